// The structure of src/ (issue 28), checked by test/structure.test.ts in `npm test`; by hand:
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
      comment: 'telemetry/ and proxy/ never import each other: what they share lives below both (error-codes.ts).',
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
