// The floors of src/ (docs/development.md#layout), the one table of them: a room imports only rooms
// on floors below its own, never a room beside it on the same floor. Every folder of src/ takes a
// line in ROOMS before it can hold code: `npm test` fails for one that has none (test/structure.test.ts).
// Read by .dependency-cruiser.cjs (its import rules are generated here) and scripts/config-walk.mjs.
const { readdirSync } = require('node:fs');

/** Top to bottom. */
const FLOORS = [
  'process', // main.ts and app.ts
  'command line',
  'listeners',
  'live configuration',
  'stages',
  'telemetry',
  'one request',
  'bodies',
  'configuration',
  'aside', // off the request path: only ASIDE_IMPORTER imports it
  'protobuf values', // a Daml value's JSON form on Canton's protobuf messages: the ledger policy's and the sandbox's
  'vocabulary', // every other file at the root of src/
];

/** Each folder of src/ (and the process's files at its root) with its floor: one line each. */
const ROOMS = {
  'main.ts': 'process',
  'app.ts': 'process',
  cli: 'command line',
  server: 'listeners',
  live: 'live configuration',
  auth: 'stages',
  protection: 'stages',
  policy: 'stages',
  'ledger-policy': 'stages',
  cache: 'stages',
  proxy: 'stages',
  audit: 'stages',
  consumers: 'stages',
  telemetry: 'telemetry',
  exchange: 'one request',
  body: 'bodies',
  config: 'configuration',
  sandbox: 'aside',
  proto: 'protobuf values',
};

/** Imports the floors allow but the house does not: what these rooms share lives below both. */
const WALLS = [{ from: 'proxy', to: 'telemetry', shared: 'errors.ts, trace-context.ts' }];

/** The one file that may import a room standing aside (the sandbox: a development upstream). */
const ASIDE_IMPORTER = 'main.ts';

const VOCABULARY = 'vocabulary';
const isRootFile = (room) => room.endsWith('.ts');
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A module's room: its folder, a process file, `vocabulary` for the other root files; undefined: a folder with no floor. */
function roomOf(path) {
  const folder = /^src\/([^/]+)\//.exec(path);
  if (folder !== null) return ROOMS[folder[1]] === undefined ? undefined : folder[1];
  const file = /^src\/([^/]+\.ts)$/.exec(path);
  if (file === null) return undefined;
  return ROOMS[file[1]] === undefined ? VOCABULARY : file[1];
}

/** A module's floor as a height (the vocabulary 0, higher up more), or undefined for a folder with no floor. */
function floorOf(path) {
  const room = roomOf(path);
  if (room === undefined) return undefined;
  return FLOORS.length - 1 - FLOORS.indexOf(room === VOCABULARY ? VOCABULARY : ROOMS[room]);
}

/** The pattern of the modules of these rooms (folders and root files). */
function pathPattern(rooms) {
  const folders = rooms.filter((room) => !isRootFile(room));
  const files = rooms.filter(isRootFile).map((file) => escape(file.slice(0, -3)));
  const parts = [
    ...(folders.length === 0 ? [] : [`(${folders.join('|')})/`]),
    ...(files.length === 0 ? [] : [`(${files.join('|')})\\.ts$`]),
  ];
  return `^src/(${parts.join('|')})`;
}

const roomsOn = (floor) => Object.keys(ROOMS).filter((room) => ROOMS[room] === floor);
const slug = (floor) => floor.replaceAll(' ', '-');
const listed = (rooms) => rooms.map((room) => (isRootFile(room) ? room : `${room}/`)).join(', ');

/** The floor rule of one floor: none of its modules imports a room on a floor above it. */
function notUpRule(floor, index) {
  const above = FLOORS.slice(0, index).flatMap(roomsOn);
  const here = roomsOn(floor);
  const from =
    floor === VOCABULARY
      ? { path: '^src/[^/]+\\.ts$', pathNot: pathPattern(Object.keys(ROOMS).filter(isRootFile)) }
      : { path: pathPattern(here) };
  return {
    name: `${slug(floor)}-not-up`,
    severity: 'error',
    comment: `The ${floor} floor (${floor === VOCABULARY ? 'the root files' : listed(here)}) imports only the floors below it: never ${listed(above)}.`,
    from,
    to: { path: pathPattern(above) },
  };
}

/** The rule of a floor with several folders: none imports another beside it. */
function notSidewaysRule(floor) {
  const folders = roomsOn(floor).filter((room) => !isRootFile(room));
  return {
    name: `${slug(floor)}-not-sideways`,
    severity: 'error',
    comment: `A room of the ${floor} floor (${listed(folders)}) never imports another beside it: what two share lives below them.`,
    from: { path: `^src/(${folders.join('|')})/` },
    to: { path: `^src/(${folders.join('|')})/`, pathNot: '^src/$1/' },
  };
}

/** The dependency-cruiser rules the table makes: floors, sideways, walls, the aside room, folders without a floor. */
function floorRules() {
  const knownFolders = `^src/(${Object.keys(ROOMS)
    .filter((room) => !isRootFile(room))
    .join('|')})/`;
  return [
    ...FLOORS.map((floor, index) => (index === 0 ? undefined : notUpRule(floor, index))).filter(Boolean),
    ...FLOORS.filter((floor) => roomsOn(floor).filter((room) => !isRootFile(room)).length > 1).map(notSidewaysRule),
    ...WALLS.map((wall) => ({
      name: `${wall.from}-not-to-${wall.to}`,
      severity: 'error',
      comment: `${wall.from}/ never imports ${wall.to}/ (a floor below it): what they share lives below both (${wall.shared}).`,
      from: { path: `^src/${wall.from}/` },
      to: { path: `^src/${wall.to}/` },
    })),
    ...roomsOn('aside').map((room) => ({
      name: `${room}-stays-aside`,
      severity: 'error',
      comment: `${room}/ stands aside, off the request path: only ${ASIDE_IMPORTER} imports it.`,
      from: { path: '^src/', pathNot: `^src/(${room}/|${escape(ASIDE_IMPORTER)}$)` },
      to: { path: `^src/${room}/` },
    })),
    {
      name: 'folder-without-floor',
      severity: 'error',
      comment: 'Every folder of src/ takes its floor in floors.cjs before it holds code.',
      from: { path: '^src/[^/]+/', pathNot: knownFolders },
      to: { path: '^src/' },
    },
    {
      name: 'folder-without-floor',
      severity: 'error',
      comment: 'Every folder of src/ takes its floor in floors.cjs before it holds code.',
      from: { path: '^src/' },
      to: { path: '^src/[^/]+/', pathNot: knownFolders },
    },
  ];
}

/** The folders of `srcDir` that have no line in ROOMS. */
function foldersWithoutFloor(srcDir) {
  return readdirSync(srcDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && ROOMS[entry.name] === undefined)
    .map((entry) => entry.name);
}

module.exports = { FLOORS, ROOMS, WALLS, roomOf, floorOf, floorRules, foldersWithoutFloor };
