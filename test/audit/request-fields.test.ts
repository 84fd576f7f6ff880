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

describe('the bounds of the identifying fields, in bytes', () => {
  const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value)) - 2;

  it('cuts a string at 512 bytes of its JSON text, on a character boundary: U+FFFD, escapes and emoji alike', () => {
    // A byte 0xFF the client sent is U+FFFD once decoded: 3 bytes on disk; a control character, 6.
    const fffd = identifyingFields({ commandId: '\uFFFD'.repeat(1000) });
    expect(jsonBytes(fffd.commandId)).toBeLessThanOrEqual(512);
    expect(fffd.commandId).toBe('\uFFFD'.repeat(170));
    expect(fffd.truncated).toEqual(['commandId']);
    const control = identifyingFields({ workflowId: '\u0001'.repeat(200) });
    expect(control.workflowId).toBe('\u0001'.repeat(85));
    const emoji = identifyingFields({ submissionId: '😀'.repeat(200) });
    expect(emoji.submissionId).toBe('😀'.repeat(128));
    expect(identifyingFields({ commandId: 'a'.repeat(512) })).toEqual({ commandId: 'a'.repeat(512) });
    expect(identifyingFields({ commandId: 'a'.repeat(513) }).truncated).toEqual(['commandId']);
  });

  it('keeps 100 items of a list and names it: parties, commands, rights, package ids', () => {
    const many = Array.from({ length: 150 }, (_, n) => `P${n}::1`);
    const fields = identifyingFields({
      actAs: many,
      commands: many.map((templateId) => ({ CreateCommand: { templateId } })),
      rights: many.map((party) => ({ kind: { CanActAs: { value: { party } } } })),
    });
    expect((fields.actAs as string[]).length).toBe(100);
    expect((fields.commands as unknown[]).length).toBe(100);
    expect((fields.rights as unknown[]).length).toBe(100);
    expect(fields.truncated).toEqual(['actAs', 'commands', 'rights']);
    const vetting = identifyingFields({
      changes: [{ operation: { Vet: { value: { packages: many.map((packageId) => ({ packageId })) } } } }],
    });
    expect((vetting.packageIds as string[]).length).toBe(100);
    expect(vetting.truncated).toEqual(['packageIds']);
    expect(identifyingFields({ actAs: many.slice(0, 100) })).not.toHaveProperty('truncated');
  });

  it("cuts the answer's fields the same way", () => {
    expect(answerFields({ updateId: 'u'.repeat(600), offset: 3 })).toEqual({
      updateId: 'u'.repeat(512),
      offset: 3,
      truncated: ['updateId'],
    });
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
  it('refuses a command line without files, or an unknown subcommand, with exit 2', async () => {
    expect((await runAuditCommand(['verify'])).code).toBe(2);
    expect((await runAuditCommand(['check', 'x'])).code).toBe(2);
    expect((await runAuditCommand(['verify', '--nope', 'x'])).code).toBe(2);
    expect((await runAuditCommand(['verify', '/no/such/file'])).code).toBe(2);
  });
});
