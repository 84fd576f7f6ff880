// The values a rule lists, compiled: party patterns (ids, "Hint::*" prefixes, "*", the caller's own
// claim or user id), template patterns ("#name:Module:Entity" with "*", "<package-id>:Module:Entity").
import type { PrincipalFacts, TemplateRef } from './document.js';

/** One party pattern; `$claims.<name>` and `$userId` are read from the caller at each call. */
export type PartyPattern =
  | { readonly kind: 'any' }
  | { readonly kind: 'exact'; readonly party: string }
  | { readonly kind: 'prefix'; readonly prefix: string }
  | { readonly kind: 'claim'; readonly claim: string }
  | { readonly kind: 'userId' };

const CLAIM = /^\$claims\.([A-Za-z0-9_:/.-]{1,128})$/;

/** A party pattern, or a problem text. */
export function partyPattern(text: string): PartyPattern | string {
  if (text === '*') return { kind: 'any' };
  if (text === '$userId') return { kind: 'userId' };
  const claim = CLAIM.exec(text);
  if (claim !== null) return { kind: 'claim', claim: claim[1]! };
  if (text.startsWith('$')) return `"${text}" is not a party, "*", "$claims.<name>" or "$userId"`;
  if (text.endsWith('*')) {
    const prefix = text.slice(0, -1);
    if (prefix.includes('*')) return `"${text}": "*" stands only at the end`;
    return { kind: 'prefix', prefix };
  }
  if (text.includes('*')) return `"${text}": "*" stands only at the end`;
  return { kind: 'exact', party: text };
}

/** The parties a claim names: a string, or the strings of a list. */
function claimParties(principal: PrincipalFacts, claim: string): readonly string[] {
  const value = principal.claims[claim];
  if (typeof value === 'string') return [value];
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

export function partyMatches(pattern: PartyPattern, party: string, principal: PrincipalFacts): boolean {
  switch (pattern.kind) {
    case 'any':
      return true;
    case 'exact':
      return pattern.party === party;
    case 'prefix':
      return party.startsWith(pattern.prefix);
    case 'claim':
      return claimParties(principal, pattern.claim).includes(party);
    case 'userId':
      return principal.userId === party;
  }
}

export function anyPartyMatches(patterns: readonly PartyPattern[], party: string, principal: PrincipalFacts): boolean {
  for (const pattern of patterns) if (partyMatches(pattern, party, principal)) return true;
  return false;
}

/** A template pattern: its package by name or id (or any), its module and entity ('*': any). */
export interface TemplatePattern {
  readonly packageName: string | undefined;
  readonly packageId: string | undefined;
  readonly moduleName: string;
  readonly entityName: string;
}

const NAME_PART = /^[A-Za-z0-9_.-]+$|^\*$/;

export function templatePattern(text: string): TemplatePattern | string {
  if (text === '*') return { packageName: undefined, packageId: undefined, moduleName: '*', entityName: '*' };
  const parts = text.split(':');
  const [pkg = '', moduleName = '*', entityName = '*'] = parts;
  const wrong = `"${text}" is not "#<package-name>:<Module>:<Entity>", "<package-id>:<Module>:<Entity>" (module and entity may be "*") or "*"`;
  if (parts.length > 3 || (parts.length === 2 && moduleName !== '*') || pkg === '' || pkg === '#') return wrong;
  if (![moduleName, entityName].every((part) => NAME_PART.test(part))) return wrong;
  if (moduleName === '*' && entityName !== '*') return wrong;
  return pkg.startsWith('#')
    ? { packageName: pkg.slice(1), packageId: undefined, moduleName, entityName }
    : { packageName: undefined, packageId: pkg, moduleName, entityName };
}

export function templateMatches(pattern: TemplatePattern, template: TemplateRef): boolean {
  if (pattern.packageName !== undefined && pattern.packageName !== template.packageName) return false;
  if (pattern.packageId !== undefined && pattern.packageId !== template.packageId) return false;
  if (pattern.moduleName !== '*' && pattern.moduleName !== template.moduleName) return false;
  return pattern.entityName === '*' || pattern.entityName === template.entityName;
}

export function anyTemplateMatches(patterns: readonly TemplatePattern[], template: TemplateRef): boolean {
  for (const pattern of patterns) if (templateMatches(pattern, template)) return true;
  return false;
}

/** Whether a pattern list asks for package names (so templates named by id must be resolved). */
export const namesPackages = (patterns: readonly TemplatePattern[]) =>
  patterns.some((pattern) => pattern.packageName !== undefined);
