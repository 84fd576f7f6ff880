// What an intent records of a request and an outcome of the participant's answer, on the shapes of
// Canton's JSON Ledger API v2 (openapi.yaml): identifying fields only, never a command's arguments.
import { describe, expect, it } from 'vitest';
import { answerFields, answerFieldsFromPrefix, identifyingFields } from '../../src/audit/request-fields.js';
import { runAuditCommand } from '../../src/cli/audit-verify.js';
import { WRITE_OPERATION_NAMES, HTTP_OPERATIONS } from '../../src/operations.js';

describe('identifying fields', () => {
  it('of a submission (JsCommands, wrapped or not): ids, parties, each command without its arguments', () => {
    const commands = {
      commands: [
        { CreateCommand: { templateId: '#app:Iou:Iou', createArguments: { owner: 'secret-argument' } } },
        {
          ExerciseCommand: {
            templateId: '#app:Iou:Iou',
            contractId: '00ab',
            choice: 'Transfer',
            choiceArgument: { to: 'x' },
          },
        },
      ],
      commandId: 'cmd-1',
      submissionId: 'sub-1',
      workflowId: 'wf-1',
      userId: 'alice',
      actAs: ['Alice::1220'],
      readAs: ['Bob::1220'],
      synchronizerId: 'sync::1',
    };
    const expected = {
      commandId: 'cmd-1',
      submissionId: 'sub-1',
      workflowId: 'wf-1',
      userId: 'alice',
      actAs: ['Alice::1220'],
      readAs: ['Bob::1220'],
      synchronizerId: 'sync::1',
      commands: [
        { kind: 'CreateCommand', templateId: '#app:Iou:Iou' },
        { kind: 'ExerciseCommand', templateId: '#app:Iou:Iou', contractId: '00ab', choice: 'Transfer' },
      ],
    };
    expect(identifyingFields(commands)).toEqual(expected);
    expect(identifyingFields({ commands, transactionFormat: {} })).toEqual(expected);
    expect(JSON.stringify(identifyingFields(commands))).not.toContain('secret-argument');
  });

  it('of a reassignment, a vetting change, rights, an IdP update', () => {
    expect(
      identifyingFields({
        reassignmentCommands: {
          commandId: 'r1',
          submitter: 'Alice::1',
          commands: [{ UnassignCommand: { contractId: 'c', source: 's', target: 't' } }],
        },
      }),
    ).toEqual({
      commandId: 'r1',
      submitter: 'Alice::1',
      commands: [{ kind: 'UnassignCommand', contractId: 'c', source: 's', target: 't' }],
    });
    expect(
      identifyingFields({
        changes: [
          {
            operation: {
              Vet: { value: { packages: [{ packageId: 'p1' }, { packageName: 'n', packageVersion: '1' }] } },
            },
          },
          { operation: { Unvet: { value: { packages: [{ packageId: 'p2' }] } } } },
        ],
        dryRun: true,
        synchronizerId: 's',
      }),
    ).toEqual({ dryRun: true, synchronizerId: 's', packageIds: ['p1', 'p2'], changes: ['Vet', 'Unvet'] });
    expect(
      identifyingFields({
        userId: 'bob',
        rights: [{ kind: { CanActAs: { value: { party: 'Bob::1' } } } }, { kind: { ParticipantAdmin: { value: {} } } }],
      }),
    ).toEqual({ userId: 'bob', rights: [{ kind: 'CanActAs', party: 'Bob::1' }, { kind: 'ParticipantAdmin' }] });
    expect(
      identifyingFields({
        identityProviderConfig: { identityProviderId: 'idp1', issuer: 'https://i', jwksUrl: 'https://j' },
        updateMask: { paths: ['issuer'] },
      }),
    ).toEqual({ identityProviderId: 'idp1', issuer: 'https://i', jwksUrl: 'https://j', updateMaskPaths: ['issuer'] });
  });
});

describe('answer fields', () => {
  it("read the participant's updateId, offset and record time, top level or in their envelope", () => {
    expect(answerFields({ updateId: 'u1', completionOffset: 7 })).toEqual({ updateId: 'u1', completionOffset: 7 });
    expect(answerFields({ transaction: { updateId: 'u2', offset: 8, recordTime: 't', events: [] } })).toEqual({
      updateId: 'u2',
      offset: 8,
      recordTime: 't',
    });
    expect(answerFields({ partyDetails: { party: 'P::1', isLocal: true } })).toEqual({ party: 'P::1' });
    expect(
      answerFieldsFromPrefix(
        '{"transaction":{"updateId":"u3","commandId":"c","offset":9,"recordTime":"t","events":[{"created',
      ),
    ).toEqual({
      updateId: 'u3',
      offset: 9,
      recordTime: 't',
    });
  });
});

describe('the write operations', () => {
  it('are POST, PATCH or DELETE routes of the catalogue, each marked writes', () => {
    const marked = HTTP_OPERATIONS.filter((operation) => operation.writes);
    expect(new Set(marked.map((operation) => operation.name))).toEqual(WRITE_OPERATION_NAMES);
    expect(marked.every((operation) => operation.method !== 'GET')).toBe(true);
    expect(WRITE_OPERATION_NAMES.has('postV2UpdatesFlats')).toBe(false);
  });
});

describe('ledger-gateway audit verify (its arguments)', () => {
  it('refuses a command line without files, or an unknown subcommand, with exit 2', () => {
    expect(runAuditCommand(['verify']).code).toBe(2);
    expect(runAuditCommand(['check', 'x']).code).toBe(2);
    expect(runAuditCommand(['verify', '--nope', 'x']).code).toBe(2);
    expect(runAuditCommand(['verify', '/no/such/file']).code).toBe(2);
  });
});
