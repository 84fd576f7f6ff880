// The structure of src/ (issues 28, 33 and 41), checked by test/structure.test.ts in `npm test`; by hand:
// npx depcruise src --config .dependency-cruiser.cjs
// The floor rules are generated from the one table of floors, floors.cjs; only the cycle rule is written here.
const { floorRules } = require('./floors.cjs');

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
    ...floorRules(),
  ],
  options: {
    includeOnly: '^src/',
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: `import type` cycles are still cycles in the design.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
