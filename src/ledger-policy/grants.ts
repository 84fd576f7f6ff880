// "No principal may grant what it may not do" (issue 43): a right granted (POST /v2/users/{id}/rights,
// or a new user's rights) must be one the caller's own policies would let it use. A right is judged by
// the calls it lets its holder make, written as decision documents of the caller (probes): CanActAs
// of a party is a submission acting as it, CanReadAs a read of all its templates, and so on. The probes
// carry no commands, so only rules that allow the use itself cover them: a rule for one choice of one
// template acting as a party does not make its caller one who may hand out CanActAs of that party.
import { NamedOperations, SubmissionOperations } from '../operations.js';
import type { DecisionDocument, PrincipalFacts, ReadFacts, RightFacts } from './document.js';

/**
 * Stands for "any party" in a probe: no Canton party id holds a `*`, so only the pattern "*" (or a
 * rule without that party key) matches it.
 */
const ANY_PARTY = '*';

const SUBMISSIONS = [
  NamedOperations.submitAndWaitForTransaction,
  SubmissionOperations.submitAndWait,
  SubmissionOperations.submitAndWaitForTransactionTree,
  SubmissionOperations.asyncSubmit,
  SubmissionOperations.prepare,
];
const EXECUTES = [
  SubmissionOperations.execute,
  SubmissionOperations.executeAndWait,
  SubmissionOperations.executeAndWaitForTransaction,
];
const READS = ['postV2StateActive-contracts', 'postV2Updates'];

function probe(
  principal: PrincipalFacts,
  operation: string,
  writes: boolean,
  actAs: string[],
  read: ReadFacts | undefined,
): DecisionDocument {
  return {
    operation,
    writes,
    principal,
    parties: { actAs, readAs: [], submitter: [], subjects: [], all: [...actAs, ...(read?.parties ?? [])] },
    commands: [],
    disclosedContracts: [],
    read,
    packages: [],
    rights: [],
    targetUserId: '',
    commandSource: writes ? 'json' : 'none',
    unreadable: 0,
  };
}

const readOf = (party: string | undefined): ReadFacts => ({
  parties: party === undefined ? [] : [party],
  anyParty: party === undefined,
  wildcard: true,
  templates: [],
  interfaces: [],
});

/**
 * What holding `right` lets one do: each use a list of alternative probes (the routes it may take),
 * the right being the caller's to grant when every use has a probe its policies allow. An admin right
 * (ParticipantAdmin, IdentityProviderAdmin, or a kind the gateway does not know) can obtain every
 * other: its uses are acting, executing and reading as any party.
 */
export function usesOfRight(right: RightFacts, caller: PrincipalFacts): DecisionDocument[][] {
  // The caller's own user id, not the call's (a rights call's userId is the user it grants to).
  const principal: PrincipalFacts = { ...caller, userId: caller.subject };
  const acting = (party: string) => SUBMISSIONS.map((op) => probe(principal, op, true, [party], undefined));
  const executing = (party: string) => EXECUTES.map((op) => probe(principal, op, true, [party], undefined));
  const reading = (party: string | undefined) => READS.map((op) => probe(principal, op, false, [], readOf(party)));
  switch (right.kind) {
    case 'CanActAs':
      return [acting(right.party)];
    case 'CanExecuteAs':
      return [executing(right.party)];
    case 'CanReadAs':
      return [reading(right.party)];
    case 'CanReadAsAnyParty':
      return [reading(undefined)];
    case 'CanExecuteAsAnyParty':
      return [executing(ANY_PARTY)];
    default:
      return [acting(ANY_PARTY), executing(ANY_PARTY), reading(undefined)];
  }
}

/** The rights a call gives (granted, or a new user's), each with its place in the call. */
export const rightsGiven = (document: DecisionDocument): Array<{ right: RightFacts; index: number }> =>
  document.rights.flatMap((right, index) => (right.change === 'revoke' ? [] : [{ right, index }]));

export const describeRight = (right: RightFacts): string =>
  right.party === '' ? right.kind : `${right.kind} of ${right.party}`;
