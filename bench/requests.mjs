// What each scenario sends: the same bytes to every path. Bodies are valid per Canton's OpenAPI
// (the bench checks them against the sandbox before measuring), with the sandbox's seeded
// party, template and transaction so that the sandbox accepts them too.
import { SANDBOX_SEED } from '../dist/sandbox/seed.js';

/** The fixed upstream's answer to every request: 1 KB of JSON, no `$` or `'` (nginx `return` text). */
export const FIXED_ANSWER = (() => {
  const head = `{"offset":"1","synchronizerId":"${SANDBOX_SEED.synchronizers.global.synchronizerId}","padding":"`;
  const tail = '"}';
  return head + 'x'.repeat(1024 - head.length - tail.length) + tail;
})();

const alice = SANDBOX_SEED.parties.alice;

/** A CreateCommand of the seeded Iou template, padded to 1 KB with a `note` create argument. */
export function submitBody(targetBytes = 1024) {
  const build = (note) =>
    JSON.stringify({
      commands: {
        commands: [
          {
            CreateCommand: {
              templateId: SANDBOX_SEED.templates.iou,
              createArguments: { issuer: alice, owner: alice, currency: 'USD', amount: '999.99', observers: [], note },
            },
          },
        ],
        commandId: 'bench-00000001',
        actAs: [alice],
        userId: SANDBOX_SEED.users.alice.id,
      },
      transactionFormat: {
        eventFormat: { filtersByParty: { [alice]: { cumulative: [] } }, verbose: true },
        transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
      },
    });
  const bare = build('');
  return build('n'.repeat(Math.max(0, targetBytes - Buffer.byteLength(bare))));
}

/**
 * A submit-and-wait (JsCommands, one of the routes read only for its userId) of `targetBytes`, most of
 * it disclosed contracts of a 3 KB created-event blob each, as a large submission carries them.
 */
export function largeSubmitBody(targetBytes = 4 * 1024 * 1024) {
  const contract = {
    templateId: SANDBOX_SEED.templates.iou,
    contractId: '00ab',
    createdEventBlob: Buffer.alloc(2_300, 'canton').toString('base64'),
    synchronizerId: SANDBOX_SEED.synchronizers.global.synchronizerId,
  };
  const build = (count, workflowId) =>
    JSON.stringify({
      commands: [
        {
          CreateCommand: {
            templateId: SANDBOX_SEED.templates.iou,
            createArguments: { issuer: alice, owner: alice, currency: 'USD', amount: '999.99', observers: [] },
          },
        },
      ],
      commandId: 'bench-large-00000001',
      actAs: [alice],
      workflowId,
      disclosedContracts: Array.from({ length: count }, () => contract),
      userId: SANDBOX_SEED.users.alice.id,
    });
  const count = Math.floor((targetBytes - Buffer.byteLength(build(0, ''))) / (JSON.stringify(contract).length + 1));
  return build(count, 'w'.repeat(Math.max(0, targetBytes - Buffer.byteLength(build(count, '')))));
}

export function updateByOffsetBody() {
  return JSON.stringify({
    offset: SANDBOX_SEED.initialTransaction.offset,
    updateFormat: {
      includeTransactions: {
        eventFormat: {
          filtersByParty: {
            [alice]: {
              cumulative: [{ identifierFilter: { WildcardFilter: { value: { includeCreatedEventBlob: false } } } }],
            },
          },
          verbose: true,
        },
        transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
      },
    },
  });
}

/** The HTTP scenarios: method, path, body; `latency` is ledger-end at 4 connections. */
export const HTTP_SCENARIOS = {
  version: { title: 'GET /v2/version (gateway: cached)', method: 'GET', path: '/v2/version' },
  'ledger-end': { title: 'GET /v2/state/ledger-end (proxied)', method: 'GET', path: '/v2/state/ledger-end' },
  submit: {
    title: 'POST submit-and-wait-for-transaction, 1 KB (rules checked)',
    method: 'POST',
    path: '/v2/commands/submit-and-wait-for-transaction',
    body: submitBody(),
  },
  'submit-4mib': {
    title: 'POST submit-and-wait, 4 MiB of disclosed contracts (read for userId as it arrives)',
    method: 'POST',
    path: '/v2/commands/submit-and-wait',
    body: largeSubmitBody(),
  },
  'update-by-offset': {
    title: 'POST update-by-offset (rules checked)',
    method: 'POST',
    path: '/v2/updates/update-by-offset',
    body: updateByOffsetBody(),
  },
  latency: {
    title: 'GET ledger-end at 4 connections (latency)',
    method: 'GET',
    path: '/v2/state/ledger-end',
    lowLoad: true,
  },
};

export const STREAM_PATH = '/v2/updates';
/** The sandbox's synthetic stream (src/sandbox/streams.ts): N transactions after beginExclusive, then close. */
export const streamRequestFrame = (messages) => JSON.stringify({ beginExclusive: 0, sandboxSyntheticCount: messages });
