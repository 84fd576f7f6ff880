// What a read asks to see, from Canton's JSON shapes (openapi.yaml): EventFormat and the deprecated
// TransactionFilter (filtersByParty, filtersForAnyParty, each a Filters of CumulativeFilter),
// UpdateFormat (includeTransactions, includeReassignments, includeTopologyEvents), TransactionFormat,
// and the plain party lists (requestingParties, a completion stream's parties, queryingParties).
import { templateRef, type ReadFacts } from './document.js';
import { isObject, NO_ENTRIES, strings, unique } from './build-commands.js';

type Json = Record<string, unknown>;

/**
 * The read part while it is gathered. Its parties' list is never changed: the first parties found
 * are it (a body's own list, or its keys), and more make a new one.
 */
type ReadBuilder = { -readonly [K in keyof ReadFacts]: ReadFacts[K] };

function emptyRead(): ReadBuilder {
  return { parties: NO_ENTRIES, anyParty: false, wildcard: false, templates: [], interfaces: [] };
}

function addParties(read: ReadBuilder, parties: string[]): void {
  if (parties.length === 0) return;
  read.parties = read.parties.length === 0 ? parties : [...read.parties, ...parties];
}

/** A Filters message: `cumulative` empty (or a WildcardFilter) takes every template. */
function addFilters(read: ReadBuilder, filters: unknown): void {
  const cumulative = isObject(filters) && Array.isArray(filters.cumulative) ? filters.cumulative : [];
  if (cumulative.length === 0) read.wildcard = true;
  for (const entry of cumulative) {
    const identifier = isObject(entry) ? entry.identifierFilter : undefined;
    const variant = isObject(identifier) ? Object.keys(identifier)[0] : undefined;
    const holder = variant === undefined ? undefined : (identifier as Json)[variant];
    const value = isObject(holder) && isObject(holder.value) ? holder.value : {};
    if (variant === 'TemplateFilter') {
      const template = templateRef(value.templateId);
      if (template !== undefined) read.templates.push(template);
      else read.wildcard = true; // unreadable: judged as the widest read
    } else if (variant === 'InterfaceFilter') {
      const template = templateRef(value.interfaceId);
      if (template !== undefined) read.interfaces.push(template);
      else read.wildcard = true;
    } else {
      read.wildcard = true; // WildcardFilter, Empty, or a variant this gateway does not know
    }
  }
}

/** An EventFormat or TransactionFilter: the same two fields. */
function addEventFormat(read: ReadBuilder, format: unknown): void {
  if (!isObject(format)) return;
  const byParty = format.filtersByParty;
  if (isObject(byParty)) {
    // A parsed body's own keys (Object.keys: a list of their number).
    const parties = Object.keys(byParty);
    addParties(read, parties);
    for (const party of parties) addFilters(read, byParty[party]);
  }
  if (format.filtersForAnyParty !== undefined && format.filtersForAnyParty !== null) {
    read.anyParty = true;
    addFilters(read, format.filtersForAnyParty);
  }
}

function addTransactionFormat(read: ReadBuilder, format: unknown): void {
  if (isObject(format)) addEventFormat(read, format.eventFormat);
}

function addUpdateFormat(read: ReadBuilder, format: unknown): void {
  if (!isObject(format)) return;
  addTransactionFormat(read, format.includeTransactions);
  addEventFormat(read, format.includeReassignments);
  const topology = isObject(format.includeTopologyEvents) ? format.includeTopologyEvents : undefined;
  const authorization = isObject(topology?.includeParticipantAuthorizationEvents)
    ? topology.includeParticipantAuthorizationEvents
    : undefined;
  if (authorization !== undefined) {
    const parties = strings(authorization.parties);
    // An empty list asks for every party's authorization events (openapi.yaml ParticipantAuthorizationTopologyFormat).
    if (parties.length === 0) read.anyParty = true;
    addParties(read, parties);
  }
}

/**
 * The read part of any request body: every format field Canton's read requests carry, in their
 * 3.4 and 3.5 forms. Undefined when the body names none (a read of no events, or not a read).
 */
export function readFacts(body: Json): ReadFacts | undefined {
  if (
    body.filter === undefined &&
    body.eventFormat === undefined &&
    body.transactionFormat === undefined &&
    body.updateFormat === undefined &&
    !namesPartyLists(body)
  )
    return undefined;
  const read = emptyRead();
  if (body.filter !== undefined) addEventFormat(read, body.filter);
  if (body.eventFormat !== undefined) addEventFormat(read, body.eventFormat);
  if (body.transactionFormat !== undefined) addTransactionFormat(read, body.transactionFormat);
  if (body.updateFormat !== undefined) addUpdateFormat(read, body.updateFormat);
  for (const key of PARTY_LISTS) if (Array.isArray(body[key])) addParties(read, strings(body[key]));
  const parties = unique(read.parties);
  return parties === read.parties ? read : { ...read, parties };
}

const PARTY_LISTS = ['requestingParties', 'parties', 'queryingParties'] as const;

function namesPartyLists(body: Json): boolean {
  for (const key of PARTY_LISTS) if (Array.isArray(body[key])) return true;
  return false;
}
