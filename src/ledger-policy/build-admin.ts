// The administrative part of a call, from Canton's JSON shapes (openapi.yaml): party allocation
// (AllocatePartyRequest, UpdatePartyDetailsRequest), users and rights (CreateUserRequest,
// GrantUserRightsRequest, RevokeUserRightsRequest, Right.kind), package upload and vetting
// (UpdateVettedPackagesRequest: VettedPackagesChange.operation Vet/Unvet, VettedPackagesRef).
import type { PackageChange, PackageFacts, RightChange, RightFacts } from './document.js';
import { isObject, text } from './build-commands.js';

type Json = Record<string, unknown>;

/** A Right: `{"kind": {"CanActAs": {"value": {"party": "..."}}}}`. */
function rightFacts(right: unknown, change: RightChange, identityProviderId: string): RightFacts {
  const kindHolder = isObject(right) && isObject(right.kind) ? right.kind : {};
  const kind = Object.keys(kindHolder)[0] ?? '';
  const variant = kindHolder[kind];
  const value = isObject(variant) && isObject(variant.value) ? variant.value : {};
  return { change, kind, party: text(value.party), identityProviderId };
}

export function rightsOf(body: Json, change: RightChange): RightFacts[] {
  const identityProviderId = text(body.identityProviderId);
  return (Array.isArray(body.rights) ? body.rights : []).map((right) => rightFacts(right, change, identityProviderId));
}

/** The packages a vetting change names (each VettedPackagesRef: id, name and version, any may be ''). */
export function vettedPackagesOf(body: Json): PackageFacts[] {
  const packages: PackageFacts[] = [];
  for (const change of Array.isArray(body.changes) ? body.changes : []) {
    const operation = isObject(change) && isObject(change.operation) ? change.operation : {};
    const variant = Object.keys(operation)[0];
    const holder = variant === undefined ? undefined : operation[variant];
    const value = isObject(holder) && isObject(holder.value) ? holder.value : {};
    const kind: PackageChange | undefined = variant === 'Vet' ? 'vet' : variant === 'Unvet' ? 'unvet' : undefined;
    if (kind === undefined) continue;
    for (const ref of Array.isArray(value.packages) ? value.packages : []) {
      if (!isObject(ref)) continue;
      packages.push({
        change: kind,
        packageId: text(ref.packageId),
        packageName: text(ref.packageName),
        packageVersion: text(ref.packageVersion),
      });
    }
  }
  return packages;
}

/** An archive upload: its packages are inside the archive, which the gateway does not open. */
export const UPLOADED_ARCHIVE: PackageFacts = Object.freeze({
  change: 'upload',
  packageId: '',
  packageName: '',
  packageVersion: '',
});

/** The party a party call names: an allocation's hint, or an update's partyDetails.party. */
export function partySubjects(body: Json): string[] {
  const parties: string[] = [];
  const hint = text(body.partyIdHint);
  if (hint !== '') parties.push(hint);
  const details = isObject(body.partyDetails) ? body.partyDetails : undefined;
  const party = text(details?.party);
  if (party !== '') parties.push(party);
  const user = isObject(body.user) ? body.user : undefined;
  const primary = text(user?.primaryParty);
  if (primary !== '') parties.push(primary);
  return parties;
}

/** The user a user or rights call is about: the path's user-id, else the body's. */
export function targetUserOf(body: Json, pathUserId: string): string {
  if (pathUserId !== '') return pathUserId;
  const user = isObject(body.user) ? body.user : undefined;
  return text(user?.id) || (body.rights !== undefined ? text(body.userId) : '');
}
