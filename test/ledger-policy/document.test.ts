// The decision document of each route family, from bodies in Canton's JSON shapes (openapi.yaml).
import { describe, expect, it } from 'vitest';
import { templateRef } from '../../src/ledger-policy/document.js';
import {
  ALICE,
  BOB,
  create,
  document,
  exercise,
  IOU_BY_ID,
  IOU_BY_NAME,
  IOU_PACKAGE_ID,
  OPERATOR,
  principal,
  submission,
} from './support.js';

describe('the decision document', () => {
  it('splits a template id into package (name or id), module and entity, and refuses other forms', () => {
    expect(templateRef('#my-app:Main.Iou:Iou')).toEqual({
      templateId: '#my-app:Main.Iou:Iou',
      packageId: '',
      packageName: 'my-app',
      moduleName: 'Main.Iou',
      entityName: 'Iou',
    });
    expect(templateRef(IOU_BY_ID)).toMatchObject({
      packageId: IOU_PACKAGE_ID,
      packageName: '',
      moduleName: 'Iou',
      entityName: 'Iou',
    });
    for (const wrong of ['Iou:Iou', 'a:b:c:d', 'p::E', 42]) expect(templateRef(wrong)).toBeUndefined();
  });

  it('reads a submission: each command kind, actAs, readAs, userId, disclosed contracts and its transaction format', () => {
    const doc = document('submitAndWaitForTransaction', {
      ...submission(
        [
          create(IOU_BY_NAME, { owner: BOB }),
          exercise(IOU_BY_ID, 'Transfer', { newOwner: BOB }),
          {
            CreateAndExerciseCommand: {
              templateId: IOU_BY_NAME,
              createArguments: {},
              choice: 'Archive',
              choiceArgument: {},
            },
          },
          {
            ExerciseByKeyCommand: {
              templateId: IOU_BY_NAME,
              contractKey: { k: 1 },
              choice: 'Bump',
              choiceArgument: {},
            },
          },
        ],
        [ALICE],
        {
          readAs: [OPERATOR],
          userId: 'alice-user',
          disclosedContracts: [{ templateId: IOU_BY_ID, contractId: '00d', createdEventBlob: '' }],
        },
      ),
      transactionFormat: {
        eventFormat: { filtersByParty: { [ALICE]: { cumulative: [] } } },
        transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
      },
    });
    expect(doc.commands.map((c) => [c.kind, c.template?.entityName, c.choice])).toEqual([
      ['CreateCommand', 'Iou', ''],
      ['ExerciseCommand', 'Iou', 'Transfer'],
      ['CreateAndExerciseCommand', 'Iou', 'Archive'],
      ['ExerciseByKeyCommand', 'Iou', 'Bump'],
    ]);
    expect(doc.commands[0]!.createArguments).toEqual({ owner: BOB });
    expect(doc.commands[1]!.choiceArgument).toEqual({ newOwner: BOB });
    expect(doc.commands[3]!.contractKey).toEqual({ k: 1 });
    expect(doc.parties).toMatchObject({ actAs: [ALICE], readAs: [OPERATOR], all: [ALICE, OPERATOR] });
    expect(doc.principal.userId).toBe('alice-user');
    expect(doc.disclosedContracts).toEqual([
      { template: expect.objectContaining({ packageId: IOU_PACKAGE_ID }), contractId: '00d' },
    ]);
    expect(doc.read).toMatchObject({ parties: [ALICE], wildcard: true });
    expect(doc.commandSource).toBe('json');
    expect(doc.unreadable).toBe(0);
  });

  it('reads the JsCommands at the top of submit-and-wait, async submit and prepare', () => {
    for (const operation of [
      'postV2CommandsSubmit-and-wait',
      'postV2CommandsAsyncSubmit',
      'postV2Interactive-submissionPrepare',
    ]) {
      const doc = document(operation, { commands: [create(IOU_BY_NAME)], commandId: 'c', actAs: [BOB] });
      expect([operation, doc.parties.actAs, doc.commands.length]).toEqual([operation, [BOB], 1]);
    }
  });

  it('counts a command it cannot read and a template id of another form as unreadable', () => {
    const doc = document('postV2CommandsAsyncSubmit', {
      commands: [{ LaunchMissiles: {} }, create('no-colons')],
      actAs: [ALICE],
    });
    expect(doc.unreadable).toBe(2);
  });

  it('reads reassignments: the submitter, the contract, source and target', () => {
    const doc = document('postV2CommandsSubmit-and-wait-for-reassignment', {
      reassignmentCommands: {
        submitter: ALICE,
        commandId: 'r',
        commands: [{ command: { UnassignCommand: { value: { contractId: '00c', source: 's', target: 't' } } } }],
      },
    });
    expect(doc.commands).toEqual([
      expect.objectContaining({ kind: 'UnassignCommand', contractId: '00c', source: 's', target: 't' }),
    ]);
    expect(doc.parties.submitter).toEqual([ALICE]);
    expect(doc.unreadable).toBe(0);
  });

  it('reads the parties and templates of every read form: eventFormat, filter, updateFormat, requestingParties, parties', () => {
    const templateFilter = (templateId: string) => ({
      identifierFilter: { TemplateFilter: { value: { templateId, includeCreatedEventBlob: false } } },
    });
    const acs = document('postV2StateActive-contracts', {
      eventFormat: { filtersByParty: { [ALICE]: { cumulative: [templateFilter(IOU_BY_NAME)] } } },
      activeAtOffset: 3,
    });
    expect(acs.read).toMatchObject({
      parties: [ALICE],
      anyParty: false,
      wildcard: false,
      templates: [expect.objectContaining({ packageName: 'sandbox-iou' })],
    });
    const legacy = document('postV2Updates', {
      filter: { filtersForAnyParty: { cumulative: [{ identifierFilter: { WildcardFilter: { value: {} } } }] } },
      beginExclusive: 0,
    });
    expect(legacy.read).toMatchObject({ anyParty: true, wildcard: true });
    const updates = document('getUpdateByOffset', {
      offset: 1,
      updateFormat: {
        includeTransactions: {
          eventFormat: {
            filtersByParty: {
              [BOB]: { cumulative: [{ identifierFilter: { InterfaceFilter: { value: { interfaceId: '#if:M:I' } } } }] },
            },
          },
          transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
        },
        includeReassignments: { filtersByParty: { [OPERATOR]: {} } },
        includeTopologyEvents: { includeParticipantAuthorizationEvents: { parties: [ALICE] } },
      },
    });
    expect(updates.read?.parties.sort()).toEqual([ALICE, BOB, OPERATOR].sort());
    expect(updates.read?.interfaces).toEqual([expect.objectContaining({ packageName: 'if', entityName: 'I' })]);
    expect(updates.parties.all.sort()).toEqual([ALICE, BOB, OPERATOR].sort());
    const completions = document('postV2CommandsCompletions', { userId: 'alice', parties: [ALICE], beginExclusive: 0 });
    expect(completions.read?.parties).toEqual([ALICE]);
    const byId = document('postV2UpdatesTransaction-by-id', { updateId: 'u', requestingParties: [BOB] });
    expect(byId.read?.parties).toEqual([BOB]);
  });

  it('reads a party allocation, a rights grant and revoke, a user creation, and the path party', () => {
    expect(document('postV2Parties', { partyIdHint: 'Carol', identityProviderId: '' }).parties.subjects).toEqual([
      'Carol',
    ]);
    expect(
      document('patchV2PartiesParty', { partyDetails: { party: BOB } }, principal('admin'), {
        pathParameters: { party: BOB },
      }).parties.subjects,
    ).toEqual([BOB]);
    const grant = document(
      'postV2UsersUser-idRights',
      {
        userId: 'bob',
        rights: [{ kind: { CanActAs: { value: { party: BOB } } } }, { kind: { ParticipantAdmin: { value: {} } } }],
      },
      principal('admin'),
      { pathParameters: { userId: 'bob' } },
    );
    expect(grant.rights).toEqual([
      { change: 'grant', kind: 'CanActAs', party: BOB, identityProviderId: '' },
      { change: 'grant', kind: 'ParticipantAdmin', party: '', identityProviderId: '' },
    ]);
    expect(grant.targetUserId).toBe('bob');
    expect(grant.parties.subjects).toEqual([BOB]);
    expect(
      document('patchV2UsersUser-idRights', {
        userId: 'bob',
        rights: [{ kind: { CanReadAs: { value: { party: ALICE } } } }],
      }).rights[0],
    ).toMatchObject({ change: 'revoke', kind: 'CanReadAs' });
    const user = document('postV2Users', {
      user: { id: 'carol', primaryParty: OPERATOR },
      rights: [{ kind: { CanActAs: { value: { party: OPERATOR } } } }],
    });
    expect([user.targetUserId, user.rights[0]?.change, user.parties.subjects]).toEqual(['carol', 'create', [OPERATOR]]);
  });

  it('reads package uploads (the archive is not opened) and vetting changes', () => {
    expect(document('postV2Dars', undefined).packages).toEqual([
      { change: 'upload', packageId: '', packageName: '', packageVersion: '' },
    ]);
    const vetting = document('updateVettedPackages', {
      changes: [
        { operation: { Vet: { value: { packages: [{ packageName: 'my-app', packageVersion: '1.2.0' }] } } } },
        { operation: { Unvet: { value: { packages: [{ packageId: IOU_PACKAGE_ID }] } } } },
      ],
    });
    expect(vetting.packages).toEqual([
      { change: 'vet', packageId: '', packageName: 'my-app', packageVersion: '1.2.0' },
      { change: 'unvet', packageId: IOU_PACKAGE_ID, packageName: '', packageVersion: '' },
    ]);
  });

  it('takes the commands and actAs of an execute from its prepared transaction, never from its JSON', () => {
    const prepared = { commands: [], actAs: [BOB], commandId: 'c', synchronizerId: 's', unreadable: 0 };
    const doc = document(
      'postV2Interactive-submissionExecute',
      { preparedTransaction: 'x', userId: 'u', actAs: [ALICE] },
      principal('alice'),
      { prepared },
    );
    expect([doc.parties.actAs, doc.commandSource, doc.principal.userId]).toEqual([[BOB], 'prepared', 'u']);
    expect(document('postV2Interactive-submissionExecute', { preparedTransaction: 'x' }).unreadable).toBe(1);
  });
});
