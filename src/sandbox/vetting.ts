// Package vetting: POST /v2/package-vetting/update (+ deprecated POST /v2/package-vetting) and
// POST /v2/package-vetting/list (+ deprecated GET /v2/package-vetting with a JSON body). Canton `PackageOps.scala`.
// Order of checks as in Canton: request parsing (PROTO_DESERIALIZATION_FAILURE), synchronizer choice,
// reference resolution, topology serial, dependency check (PackageService / PackageOpsImpl).

import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  bodyObject,
  DecodeFailure,
  fieldPath,
  optionalObject,
  relaxedBoolean,
  relaxedInt32,
  relaxedObjectArray,
  relaxedOneof,
  relaxedString,
  relaxedStringArray,
} from './decode.js';
import { protoDeserializationFailure, SandboxError } from './errors.js';
import { jsonBodyOf } from './http-conventions.js';
import type { JsonObject } from './json.js';
import type { SeedPackage } from './seed.js';
import type { SandboxState, VettedPackageEntry, VettingState } from './state.js';

const ALLOW_UNVETTED_DEPENDENCIES = 'UPDATE_VETTED_PACKAGES_FORCE_FLAG_ALLOW_UNVETTED_DEPENDENCIES';
const SYNCHRONIZER_ID = /^[^:]+::[^:]+$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

type PackageRef =
  | { kind: 'Id'; packageId: string }
  | { kind: 'Name'; packageName: string }
  | { kind: 'NameAndVersion'; packageName: string; packageVersion: string }
  | { kind: 'All'; packageId: string; packageName: string; packageVersion: string };

interface VettingChange {
  readonly operation: 'Vet' | 'Unvet';
  readonly refs: readonly PackageRef[];
  readonly validFromInclusive: string | null;
  readonly validUntilExclusive: string | null;
}

/** `undefined` = no serial check; `null` = NoPrior; a number = Prior(n). */
type ExpectedSerial = number | null | undefined;

export interface UpdateVettingRequest {
  readonly changes: readonly VettingChange[];
  readonly dryRun: boolean;
  readonly synchronizerId: string;
  readonly expectedSerial: ExpectedSerial;
  readonly allowUnvettedDependencies: boolean;
}

// --- request parsing (relaxed decoding; oneof Empty and Prior <= 0 are PROTO_DESERIALIZATION_FAILURE) ---

function parseTimestamp(object: JsonObject, key: string, path: string): string | null {
  const value = relaxedString(object, key, path);
  if (value === '') return null;
  if (!RFC3339.test(value) || Number.isNaN(Date.parse(value)))
    throw new DecodeFailure(`Invalid timestamp at '${fieldPath(path, key)}'`);
  return value;
}

function parseRef(ref: JsonObject, path: string): PackageRef {
  const packageId = relaxedString(ref, 'packageId', path);
  const packageName = relaxedString(ref, 'packageName', path);
  const packageVersion = relaxedString(ref, 'packageVersion', path);
  if (packageId !== '' && packageName !== '' && packageVersion !== '')
    return { kind: 'All', packageId, packageName, packageVersion };
  if (packageId === '' && packageName !== '' && packageVersion !== '')
    return { kind: 'NameAndVersion', packageName, packageVersion };
  if (packageId !== '' && packageName === '' && packageVersion === '') return { kind: 'Id', packageId };
  if (packageId === '' && packageName !== '' && packageVersion === '') return { kind: 'Name', packageName };
  throw protoDeserializationFailure(
    'InvariantViolation(Some(package_name),Either package_id must be set, or package_name and package_version must be set, or all three must be set.)',
  );
}

function parseChange(change: JsonObject, path: string): VettingChange {
  const operation = relaxedOneof(change, 'operation', path);
  if (operation === undefined) throw protoDeserializationFailure('FieldNotSet(operation)');
  if (operation.variant !== 'Vet' && operation.variant !== 'Unvet') {
    throw new DecodeFailure(`Unknown oneof variant ${operation.variant} at '${operation.path}'`);
  }
  const valuePath = fieldPath(operation.path, 'value');
  const value = optionalObject(operation.payload, 'value', operation.path) ?? {};
  const refs = relaxedObjectArray(value, 'packages', valuePath).map((ref, index) =>
    parseRef(ref, fieldPath(fieldPath(valuePath, 'packages'), index)),
  );
  const isVet = operation.variant === 'Vet';
  return {
    operation: operation.variant,
    refs,
    validFromInclusive: isVet ? parseTimestamp(value, 'newValidFromInclusive', valuePath) : null,
    validUntilExclusive: isVet ? parseTimestamp(value, 'newValidUntilExclusive', valuePath) : null,
  };
}

function parseExpectedSerial(body: JsonObject): ExpectedSerial {
  const prior = optionalObject(body, 'expectedTopologySerial', '');
  if (prior === undefined) return undefined;
  const serial = relaxedOneof(prior, 'serial', 'expectedTopologySerial');
  if (serial === undefined) return undefined;
  if (serial.variant === 'NoPrior') return null;
  if (serial.variant !== 'Prior')
    throw new DecodeFailure(`Unknown oneof variant ${serial.variant} at '${serial.path}'`);
  const value = relaxedInt32(serial.payload, 'value', serial.path);
  if (value <= 0)
    throw protoDeserializationFailure(`ValueConversionError(prior,Serial must be positive, but was ${value})`);
  return value;
}

export function parseUpdateVettingRequest(body: JsonObject): UpdateVettingRequest {
  const changes = relaxedObjectArray(body, 'changes', '').map((change, index) =>
    parseChange(change, fieldPath('changes', index)),
  );
  const synchronizerId = relaxedString(body, 'synchronizerId', '');
  if (synchronizerId !== '' && !SYNCHRONIZER_ID.test(synchronizerId)) {
    throw protoDeserializationFailure(
      `ValueConversionError(synchronizer_id,Invalid unique identifier \`${synchronizerId}\`)`,
    );
  }
  return {
    changes,
    dryRun: relaxedBoolean(body, 'dryRun', ''),
    synchronizerId,
    expectedSerial: parseExpectedSerial(body),
    allowUnvettedDependencies: relaxedStringArray(body, 'updateVettedPackagesForceFlags', '').includes(
      ALLOW_UNVETTED_DEPENDENCIES,
    ),
  };
}

// --- semantics ---

function chooseSynchronizer(state: SandboxState, requested: string): string {
  if (requested !== '') {
    if (!state.synchronizers.some((sync) => sync.synchronizerId === requested)) {
      throw new SandboxError(
        'PACKAGE_SERVICE_NOT_CONNECTED_TO_SYNCHRONIZER',
        `Cannot upload a dar because the participant is not connected to synchronizer '${requested}'.`,
      );
    }
    return requested;
  }
  const only = state.synchronizers.length === 1 ? state.synchronizers[0] : undefined;
  if (only !== undefined) return only.synchronizerId;
  const connected =
    state.synchronizers.length === 0
      ? 'no synchronizers currently connected'
      : `currently connected synchronizers ${state.synchronizers.map((sync) => sync.synchronizerId).join(', ')}`;
  throw new SandboxError(
    'PACKAGE_SERVICE_CANNOT_AUTODETECT_SYNCHRONIZER',
    `Cannot autodetect synchronizer: ${connected}`,
  );
}

/** Scala pretty-printing of a VettedPackagesRef, as it appears in Canton's causes. */
function describeRef(ref: PackageRef): string {
  switch (ref.kind) {
    case 'Id':
      return `package-id: '${ref.packageId}'`;
    case 'Name':
      return `package-name: '${ref.packageName}'`;
    case 'NameAndVersion':
      return `NameAndVersion(name = ${ref.packageName}, version = ${ref.packageVersion})`;
    case 'All':
      return `All(id = ${ref.packageId}, name = ${ref.packageName}, version = ${ref.packageVersion})`;
  }
}

/** VettedPackagesRef.findMatchingPackages: the matching package ids, or why none match. */
function matchingPackages(packages: ReadonlyMap<string, SeedPackage>, ref: PackageRef): string[] | string {
  const all = [...packages.values()];
  switch (ref.kind) {
    case 'Id':
      return packages.has(ref.packageId) ? [ref.packageId] : `No packages with package ID ${ref.packageId}`;
    case 'Name': {
      const named = all.filter((pkg) => pkg.packageName === ref.packageName);
      return named.length > 0 ? named.map((pkg) => pkg.packageId) : `No packages with name ${ref.packageName}`;
    }
    case 'NameAndVersion': {
      const named = all.filter((pkg) => pkg.packageName === ref.packageName);
      if (named.length === 0) return `Name ${ref.packageName} did not match any packages.`;
      const versioned = named.filter((pkg) => pkg.packageVersion === ref.packageVersion);
      return versioned.length > 0
        ? versioned.map((pkg) => pkg.packageId)
        : `No packages with name ${ref.packageName} have version ${ref.packageVersion}.`;
    }
    case 'All': {
      const pkg = packages.get(ref.packageId);
      if (pkg === undefined) return `No packages with package ID ${ref.packageId}`;
      if (pkg.packageName === ref.packageName && pkg.packageVersion === ref.packageVersion) return [ref.packageId];
      return `Package with package ID ${ref.packageId} has name ${pkg.packageName} and version ${pkg.packageVersion}, but filter specifies name ${ref.packageName} and version ${ref.packageVersion}`;
    }
  }
}

/**
 * Target state per package id, later changes winning; `null` = unvet. A Vet reference must match
 * exactly one package; an Unvet reference may match none (ignored) or many (all unvetted).
 */
function resolveTargets(
  packages: ReadonlyMap<string, SeedPackage>,
  changes: readonly VettingChange[],
): Map<string, VettedPackageEntry | null> {
  const targets = new Map<string, VettedPackageEntry | null>();
  for (const change of changes) {
    for (const ref of change.refs) {
      const matches = matchingPackages(packages, ref);
      if (typeof matches === 'string') {
        if (change.operation === 'Unvet') continue;
        throw new SandboxError(
          'UNRESOLVED_VETTING_REFERENCE',
          `The vetted package reference ${describeRef(ref)} does not match any package in the package store. Reason: ${matches}`,
        );
      }
      if (change.operation === 'Vet' && matches.length > 1) {
        throw new SandboxError(
          'AMBIGUOUS_VETTING_REFERENCE',
          `The package reference ${describeRef(ref)} matches multiple packages: Seq(${matches.join(', ')})`,
        );
      }
      for (const packageId of matches) {
        targets.delete(packageId);
        targets.set(
          packageId,
          change.operation === 'Vet'
            ? {
                packageId,
                validFromInclusive: change.validFromInclusive,
                validUntilExclusive: change.validUntilExclusive,
              }
            : null,
        );
      }
    }
  }
  return targets;
}

function describeSerial(serial: number | null | undefined): string {
  return serial === null || serial === undefined ? 'None' : `Some(${serial})`;
}

/** PackageOpsImpl.checkCurrentSerial (Canton `PackageOps.scala`). */
function checkSerial(current: VettingState | undefined, expected: ExpectedSerial): void {
  if (expected === undefined) return;
  const actual = current?.topologySerial;
  if (expected === null ? actual === undefined : actual === expected) return;
  throw new SandboxError(
    'TOPOLOGY_SERIAL_MISMATCH',
    `The given serial ${describeSerial(expected)} did not match the actual serial ${describeSerial(actual)}.`,
    { context: { expected: describeSerial(expected), actual: describeSerial(actual), action: 'package-vetting' } },
  );
}

function applyTargets(
  current: readonly VettedPackageEntry[],
  targets: ReadonlyMap<string, VettedPackageEntry | null>,
): VettedPackageEntry[] {
  const next: VettedPackageEntry[] = [];
  for (const entry of current) {
    const target = targets.get(entry.packageId);
    if (target === undefined) next.push(entry);
    else if (target !== null) next.push(target);
  }
  const currentIds = new Set(current.map((entry) => entry.packageId));
  for (const [packageId, target] of targets) {
    if (target !== null && !currentIds.has(packageId)) next.push(target);
  }
  return next;
}

/** Newly vetted packages need all their (transitive) dependencies vetted in the resulting state. */
function checkDependencies(
  packages: ReadonlyMap<string, SeedPackage>,
  current: readonly VettedPackageEntry[],
  next: readonly VettedPackageEntry[],
): void {
  const currentIds = new Set(current.map((entry) => entry.packageId));
  const nextIds = new Set(next.map((entry) => entry.packageId));
  const unvetted = new Set<string>();
  const visit = (packageId: string, seen: Set<string>): void => {
    for (const dependency of packages.get(packageId)?.dependencies ?? []) {
      if (seen.has(dependency)) continue;
      seen.add(dependency);
      if (!nextIds.has(dependency)) unvetted.add(dependency);
      visit(dependency, seen);
    }
  };
  for (const packageId of nextIds) if (!currentIds.has(packageId)) visit(packageId, new Set());
  if (unvetted.size > 0) {
    throw new SandboxError(
      'TOPOLOGY_DEPENDENCIES_NOT_VETTED',
      'Package vetting failed due to dependencies not being vetted',
      { context: { unvetted: `Set(${[...unvetted].join(', ')})`, action: 'package-vetting' } },
    );
  }
}

function sameEntries(a: readonly VettedPackageEntry[], b: readonly VettedPackageEntry[]): boolean {
  const key = (entry: VettedPackageEntry): string =>
    `${entry.packageId}|${entry.validFromInclusive}|${entry.validUntilExclusive}`;
  const left = new Set(a.map(key));
  const right = new Set(b.map(key));
  return left.size === right.size && [...left].every((entry) => right.has(entry));
}

function renderVettedPackages(
  state: SandboxState,
  synchronizerId: string,
  vetting: VettingState,
  keep: (pkg: VettedPackageEntry) => boolean = () => true,
): JsonObject {
  return {
    packages: vetting.packages.filter(keep).map((entry) => {
      const pkg = state.packages.get(entry.packageId);
      return {
        packageId: entry.packageId,
        validFromInclusive: entry.validFromInclusive,
        validUntilExclusive: entry.validUntilExclusive,
        packageName: pkg?.packageName ?? '',
        packageVersion: pkg?.packageVersion ?? '',
      };
    }),
    participantId: state.participantId,
    synchronizerId,
    topologySerial: vetting.topologySerial,
  };
}

/** Apply (or, on dryRun, only validate) a vetting update; errors are identical either way. */
export function updateVetting(state: SandboxState, request: UpdateVettingRequest): JsonObject {
  const synchronizerId = chooseSynchronizer(state, request.synchronizerId);
  const targets = resolveTargets(state.packages, request.changes);
  const current = state.vetting.get(synchronizerId);
  checkSerial(current, request.expectedSerial);
  const currentEntries = current?.packages ?? [];
  const nextEntries = applyTargets(currentEntries, targets);
  if (!request.allowUnvettedDependencies) checkDependencies(state.packages, currentEntries, nextEntries);
  const unchanged = current !== undefined && sameEntries(currentEntries, nextEntries);
  const next: VettingState = unchanged
    ? current
    : { topologySerial: (current?.topologySerial ?? 0) + 1, packages: nextEntries };
  if (!request.dryRun) state.vetting.set(synchronizerId, next);
  return {
    pastVettedPackages: current === undefined ? null : renderVettedPackages(state, synchronizerId, current),
    newVettedPackages: renderVettedPackages(state, synchronizerId, next),
  };
}

export function listVetting(state: SandboxState, body: JsonObject): JsonObject {
  const metadata = optionalObject(body, 'packageMetadataFilter', '') ?? {};
  const packageIds = new Set(relaxedStringArray(metadata, 'packageIds', 'packageMetadataFilter'));
  const prefixes = relaxedStringArray(metadata, 'packageNamePrefixes', 'packageMetadataFilter');
  const topology = optionalObject(body, 'topologyStateFilter', '') ?? {};
  const participantIds = relaxedStringArray(topology, 'participantIds', 'topologyStateFilter');
  const synchronizerIds = relaxedStringArray(topology, 'synchronizerIds', 'topologyStateFilter');
  relaxedString(body, 'pageToken', '');
  relaxedInt32(body, 'pageSize', '');

  const keepPackage = (entry: VettedPackageEntry): boolean => {
    if (packageIds.size === 0 && prefixes.length === 0) return true;
    const name = state.packages.get(entry.packageId)?.packageName;
    return (
      packageIds.has(entry.packageId) || (name !== undefined && prefixes.some((prefix) => name.startsWith(prefix)))
    );
  };
  const ourParticipantSelected = participantIds.length === 0 || participantIds.includes(state.participantId);
  const vettedPackages = [...state.vetting.entries()]
    .filter(
      ([synchronizerId]) =>
        ourParticipantSelected && (synchronizerIds.length === 0 || synchronizerIds.includes(synchronizerId)),
    )
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([synchronizerId, vetting]) => renderVettedPackages(state, synchronizerId, vetting, keepPackage));
  return { vettedPackages, nextPageToken: '' };
}

export function registerVettingRoutes(app: FastifyInstance, state: SandboxState): void {
  const update = async (request: FastifyRequest) =>
    updateVetting(state, parseUpdateVettingRequest(bodyObject(jsonBodyOf(request))));
  const list = async (request: FastifyRequest) => listVetting(state, bodyObject(jsonBodyOf(request)));
  app.post('/v2/package-vetting/update', update);
  app.post('/v2/package-vetting', update);
  app.post('/v2/package-vetting/list', list);
  app.get('/v2/package-vetting', list);
}
