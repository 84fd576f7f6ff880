// The fixed identities every sandbox starts with. Ids are derived deterministically so tests,
// benchmarks and documentation can name them; they have Canton's shapes (party `hint::1220<hex>`,
// 64-hex package ids, synchronizer `alias::1220<hex>`).

import { createHash } from 'node:crypto';
import { DEVELOPMENT_PARTICIPANT_ID, DEVELOPMENT_USER_ID } from '../development-identity.js';

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function fingerprint(text: string): string {
  return `1220${sha256Hex(text)}`;
}

/** Update id of the transaction at `offset` (Canton update ids are `1220` + 64 hex). */
export function updateIdAt(offset: number): string {
  return fingerprint(`sandbox-update:${offset}`);
}

/** Contract id created by node `nodeId` of the transaction at `offset` (V1 shape: `00` + discriminator + suffix). */
export function contractIdAt(offset: number, nodeId: number): string {
  return `00${sha256Hex(`sandbox-contract:${offset}:${nodeId}`)}ca111220${sha256Hex(`sandbox-suffix:${offset}:${nodeId}`)}`;
}

export interface SeedPackage {
  readonly packageId: string;
  readonly packageName: string;
  readonly packageVersion: string;
  readonly dependencies: readonly string[];
}

function seedPackage(
  packageName: string,
  packageVersion: string,
  dependencies: readonly SeedPackage[] = [],
): SeedPackage {
  return {
    packageId: sha256Hex(`sandbox-package:${packageName}:${packageVersion}`),
    packageName,
    packageVersion,
    dependencies: dependencies.map((dependency) => dependency.packageId),
  };
}

const base = seedPackage('sandbox-base', '1.0.0');
const iouV1 = seedPackage('sandbox-iou', '1.0.0', [base]);
const iouV2 = seedPackage('sandbox-iou', '2.0.0', [base]);
const extrasDependency = seedPackage('sandbox-extras-dep', '0.1.0');
const extras = seedPackage('sandbox-extras', '0.1.0', [extrasDependency]);

const globalSynchronizerId = `global::${fingerprint('sandbox-synchronizer:global')}`;
const privateSynchronizerId = `private::${fingerprint('sandbox-synchronizer:private')}`;

const alice = `Alice::${fingerprint('sandbox-party:Alice')}`;
const bob = `Bob::${fingerprint('sandbox-party:Bob')}`;
const operator = `Operator::${fingerprint('sandbox-party:Operator')}`;

export const SANDBOX_SEED = {
  participantId: DEVELOPMENT_PARTICIPANT_ID,
  parties: { alice, bob, operator },
  users: {
    admin: { id: 'participant_admin', primaryParty: '' },
    alice: { id: DEVELOPMENT_USER_ID, primaryParty: alice },
    bob: { id: 'bob', primaryParty: bob },
  },
  synchronizers: {
    global: { synchronizerId: globalSynchronizerId, synchronizerAlias: 'global' },
    private: { synchronizerId: privateSynchronizerId, synchronizerAlias: 'private' },
  },
  packages: { base, iouV1, iouV2, extras, extrasDependency },
  /** `sandbox-extras` depends on `sandbox-extras-dep`, which is vetted nowhere at start. */
  packageWithUnvettedDependency: extras,
  /** Vetting at start: the global synchronizer has serial 1; the private one has no vetting state (NoPrior). */
  initialVetting: {
    global: { topologySerial: 1, packageIds: [base.packageId, iouV1.packageId, iouV2.packageId] },
    private: null,
  },
  templates: {
    /** `Iou:Iou` in sandbox-iou 1.0.0; any createArguments are accepted (no Daml type checking). */
    iou: `${iouV1.packageId}:Iou:Iou`,
    iouByPackageName: '#sandbox-iou:Iou:Iou',
  },
  identityProvider: {
    identityProviderId: 'sandbox-idp',
    isDeactivated: false,
    issuer: 'https://issuer.sandbox.invalid',
    jwksUrl: 'https://issuer.sandbox.invalid/.well-known/jwks.json',
    audience: '',
  },
  /** With `seed: 'default'` one transaction exists at start: Alice creates an Iou. */
  initialTransaction: {
    offset: 1,
    commandId: 'sandbox-seed-iou',
    updateId: updateIdAt(1),
    contractId: contractIdAt(1, 0),
  },
} as const;

export type SandboxSeed = typeof SANDBOX_SEED;
