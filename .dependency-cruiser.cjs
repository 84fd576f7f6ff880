// The structure of src/ (issues 28 and 33), checked by test/structure.test.ts in `npm test`; by hand:
// npx depcruise src --config .dependency-cruiser.cjs
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-cycle',
      severity: 'error',
      comment: 'No import cycle in src/, type-only imports included: a cycle means a contract lives in the wrong room.',
      from: { path: '^src/' },
      to: { path: '^src/', circular: true },
    },
    {
      name: 'telemetry-not-to-proxy',
      severity: 'error',
      comment: 'telemetry/ and proxy/ never import each other: what they share lives below both (errors.ts).',
      from: { path: '^src/telemetry/' },
      to: { path: '^src/proxy/' },
    },
    {
      name: 'proxy-not-to-telemetry',
      severity: 'error',
      comment: 'telemetry/ and proxy/ never import each other: what they share lives below both (trace-context.ts).',
      from: { path: '^src/proxy/' },
      to: { path: '^src/telemetry/' },
    },
    {
      name: 'stages-not-sideways',
      severity: 'error',
      comment:
        'A stage (auth, protection, policy, cache, proxy, audit, consumers) never imports another stage: what two stages share lives below them, in exchange/ or the root vocabulary.',
      from: { path: '^src/(auth|protection|policy|cache|proxy|audit|consumers)/' },
      to: { path: '^src/(auth|protection|policy|cache|proxy|audit|consumers)/', pathNot: '^src/$1/' },
    },
    {
      name: 'stages-not-up',
      severity: 'error',
      comment:
        'A stage imports only the floors below it (exchange/, telemetry/, body/, config/, the root vocabulary): never the listeners (server/), the generations (live/), the command line (cli/), nor the process (main.ts, app.ts), which alone knows the order of the stages.',
      from: { path: '^src/(auth|protection|policy|cache|proxy|audit|consumers)/' },
      to: { path: '^src/((server|live|cli)/|(main|app)\\.ts$)' },
    },
    {
      name: 'telemetry-below-stages',
      severity: 'error',
      comment:
        'telemetry/ observes the stages without knowing them: it imports no stage, nor server/, live/, cli/, main.ts or app.ts (what it shares with a stage lives in exchange/ or the root vocabulary).',
      from: { path: '^src/telemetry/' },
      to: { path: '^src/((auth|protection|policy|cache|proxy|audit|consumers|server|live|cli)/|(main|app)\\.ts$)' },
    },
    {
      name: 'foundations-below-all',
      severity: 'error',
      comment:
        'exchange/, body/ and config/ are the floors everything stands on: they import none of the stages, telemetry/, server/, live/, cli/, main.ts or app.ts.',
      from: { path: '^src/(exchange|body|config)/' },
      to: { path: '^src/((auth|protection|policy|cache|proxy|audit|consumers|telemetry|server|live|cli)/|(main|app)\\.ts$)' },
    },
    {
      name: 'sandbox-stays-aside',
      severity: 'error',
      comment: 'The sandbox is a development upstream: only main.ts starts it, nothing on the request path imports it.',
      from: { path: '^src/', pathNot: '^src/(sandbox/|main\\.ts$)' },
      to: { path: '^src/sandbox/' },
    },
  ],
  options: {
    includeOnly: '^src/',
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: `import type` cycles are still cycles in the design.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
