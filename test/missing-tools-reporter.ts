// Ends the run with one line naming the programs some test groups need that are missing
// (test/helpers/system-tools.ts), the test files of those groups, and how to install each. Under CI those
// groups ran and failed; the line says so too.
import type { Reporter, RunnerTask, RunnerTestFile } from 'vitest/node';
import { INSTALL, neededTools, toolAvailable, underCi, type SystemTool } from './helpers/system-tools.js';

function markedFiles(tasks: readonly RunnerTask[], into: Map<SystemTool, Set<string>>, file: string): void {
  for (const task of tasks) {
    const tools = neededTools(task.name).filter((tool): tool is SystemTool => tool in INSTALL);
    for (const tool of tools) {
      let files = into.get(tool);
      if (files === undefined) into.set(tool, (files = new Set()));
      files.add(file);
    }
    if (tools.length === 0 && task.type === 'suite') markedFiles(task.tasks, into, file);
  }
}

export default class MissingToolsReporter implements Reporter {
  onFinished(files: readonly RunnerTestFile[] = []): void {
    const needs = new Map<SystemTool, Set<string>>();
    for (const file of files) markedFiles(file.tasks, needs, file.name);
    const missing = [...needs].filter(([tool]) => !toolAvailable(tool));
    if (missing.length === 0) return;
    const parts = missing.map(([tool, files]) => `${tool} for ${[...files].join(', ')} (install: ${INSTALL[tool]})`);
    const outcome = underCi()
      ? 'CI: these groups ran and FAILED for want of their program'
      : 'these groups did NOT run (CI=true makes this a failure)';
    process.stdout.write(`\nMissing programs, ${outcome}: ${parts.join('; ')}\n`);
  }
}
