// The whole mutable state of one sandbox participant. Every buildSandbox() call creates its own.

import type { Json } from './json.js';
import { SANDBOX_SEED, type SeedPackage } from './seed.js';

export interface VettedPackageEntry {
  readonly packageId: string;
  readonly validFromInclusive: string | null;
  readonly validUntilExclusive: string | null;
}

/** One participant's VettedPackages topology mapping on one synchronizer (Canton's OpenAPI `VettedPackages`). */
export interface VettingState {
  readonly topologySerial: number;
  readonly packages: readonly VettedPackageEntry[];
}

export interface ContractRecord {
  readonly contractId: string;
  readonly templateId: string;
  readonly packageName: string;
  readonly representativePackageId: string;
  readonly createArgument: Json;
  readonly signatories: readonly string[];
  readonly observers: readonly string[];
  readonly createdAt: string;
}

export type LedgerNode =
  | {
      readonly kind: 'create';
      readonly nodeId: number;
      readonly contract: ContractRecord;
      /** Archived by a later node of the same transaction (CreateAndExercise of a consuming choice). */
      readonly consumedInSameTransaction: boolean;
    }
  | {
      readonly kind: 'exercise';
      readonly nodeId: number;
      readonly contract: ContractRecord;
      readonly templateId: string;
      readonly choice: string;
      readonly choiceArgument: Json;
      readonly actingParties: readonly string[];
      readonly consuming: boolean;
      readonly exerciseResult: Json;
      readonly createdInSameTransaction: boolean;
    };

export interface StoredTransaction {
  readonly updateId: string;
  readonly offset: number;
  readonly commandId: string;
  readonly workflowId: string;
  readonly submitters: readonly string[];
  readonly synchronizerId: string;
  readonly effectiveAt: string;
  readonly recordTime: string;
  readonly traceContext: { readonly traceparent: string; readonly tracestate: string | null };
  readonly nodes: readonly LedgerNode[];
}

export interface IdentityProviderConfig {
  identityProviderId: string;
  isDeactivated: boolean;
  issuer: string;
  jwksUrl: string;
  audience: string;
}

export interface SandboxUser {
  readonly id: string;
  readonly primaryParty: string;
}

export interface SynchronizerRecord {
  readonly synchronizerId: string;
  readonly synchronizerAlias: string;
}

export interface SandboxState {
  readonly participantId: string;
  readonly packages: ReadonlyMap<string, SeedPackage>;
  readonly parties: readonly string[];
  readonly users: ReadonlyMap<string, SandboxUser>;
  readonly synchronizers: readonly SynchronizerRecord[];
  /** Keyed by synchronizer id; absent = no VettedPackages transaction yet. */
  readonly vetting: Map<string, VettingState>;
  readonly activeContracts: Map<string, ContractRecord>;
  readonly transactionsByOffset: Map<number, StoredTransaction>;
  ledgerEnd: number;
  readonly identityProviders: Map<string, IdentityProviderConfig>;
  /** Called after each commit; the WebSocket update streams subscribe here. */
  readonly transactionListeners: Set<(transaction: StoredTransaction) => void>;
}

export function createSandboxState(): SandboxState {
  const packages = new Map(Object.values(SANDBOX_SEED.packages).map((pkg) => [pkg.packageId, pkg]));
  const globalVetting = SANDBOX_SEED.initialVetting.global;
  return {
    participantId: SANDBOX_SEED.participantId,
    packages,
    parties: Object.values(SANDBOX_SEED.parties),
    users: new Map(Object.values(SANDBOX_SEED.users).map((user) => [user.id, user])),
    synchronizers: Object.values(SANDBOX_SEED.synchronizers),
    vetting: new Map([
      [
        SANDBOX_SEED.synchronizers.global.synchronizerId,
        {
          topologySerial: globalVetting.topologySerial,
          packages: globalVetting.packageIds.map((packageId) => ({
            packageId,
            validFromInclusive: null,
            validUntilExclusive: null,
          })),
        },
      ],
    ]),
    activeContracts: new Map(),
    transactionsByOffset: new Map(),
    ledgerEnd: 0,
    identityProviders: new Map([
      [SANDBOX_SEED.identityProvider.identityProviderId, { ...SANDBOX_SEED.identityProvider }],
    ]),
    transactionListeners: new Set(),
  };
}

/**
 * Append a transaction at the next offset and apply it to the active contract set.
 * `build` receives the offset so ids derived from it are stable; it must not await.
 */
export function commitTransaction(
  state: SandboxState,
  build: (offset: number) => Omit<StoredTransaction, 'offset'>,
): StoredTransaction {
  const offset = state.ledgerEnd + 1;
  const transaction: StoredTransaction = { ...build(offset), offset };
  for (const node of transaction.nodes) {
    if (node.kind === 'create' && !node.consumedInSameTransaction)
      state.activeContracts.set(node.contract.contractId, node.contract);
    if (node.kind === 'exercise' && node.consuming) state.activeContracts.delete(node.contract.contractId);
  }
  state.transactionsByOffset.set(offset, transaction);
  state.ledgerEnd = offset;
  for (const listener of state.transactionListeners) listener(transaction);
  return transaction;
}

export function stakeholdersOf(contract: ContractRecord): Set<string> {
  return new Set([...contract.signatories, ...contract.observers]);
}
