// A test group that needs programs beside Node (system-tools.ts) runs when they are all there.
// When one is missing the group does not run, and the run's last line names the program, the test
// files and how to install it (test/missing-tools-reporter.ts). Under CI (CI set, not "false" or
// "0") a missing program is a failure: the group runs and fails loudly, so CI never passes by
// leaving tests out.
import { describe, it } from 'vitest';
import { needsMarker, toolAvailable, underCi, type SystemTool } from './system-tools.js';

const shouldRun = (tools: readonly SystemTool[]) => tools.every(toolAvailable) || underCi();

/** describe() for a group that needs every one of `tools`; `.each` as describe.each. */
export function describeNeeding(...tools: [SystemTool, ...SystemTool[]]) {
  const marked = (name: string) => `${name} ${needsMarker(...tools)}`;
  const group = (name: string, body: () => void) => describe.runIf(shouldRun(tools))(marked(name), body);
  group.each =
    <T extends string | number>(cases: readonly T[]) =>
    (name: string, body: (item: T) => void) =>
      describe.runIf(shouldRun(tools)).each([...cases])(marked(name), body);
  return group;
}

/** it() for one test that needs `tool`. */
export function itNeeding(tool: SystemTool, name: string, body: () => Promise<void> | void, timeout?: number) {
  it.runIf(shouldRun([tool]))(`${name} ${needsMarker(tool)}`, body, timeout);
}
