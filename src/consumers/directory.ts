// Which consumer a call belongs to: a gateway key's consumer (set when the key is checked), else the
// consumer whose token entry its verified claims match (the entry naming the most claims first), else the consumer its verified client
// certificate names, else none (counted as `unmapped`). The principal a call carries is frozen and
// shared by every call of its token: the one with its consumer is made once per principal and kept.
import type { IncomingMessage } from 'node:http';
import type { ConsumersConfig } from '../config/schema.js';
import { certificateAccepted } from '../exchange/client-certificate.js';
import type { Principal } from '../exchange/exchange.js';
import { resolveConsumer, tokenEntryClaims, tokenEntryKey, type ResolvedConsumer } from './config.js';

export interface ConsumerDirectory {
  /** The configured consumers by name. */
  readonly consumers: ReadonlyMap<string, ResolvedConsumer>;
  /** The principal with its consumer set (the same object when no consumer claims it, or it has one already). */
  classify(principal: Principal, request: IncomingMessage): Principal;
}

const kCertificateConsumer = Symbol('ledger-gateway.certificateConsumer');
type Remembering = IncomingMessage['socket'] & { [kCertificateConsumer]?: string | null };

/** The consumer a token's claims name: one lookup per claim combination the configuration uses. */
function claimsLookup(
  list: ConsumersConfig['list'],
): (claims: Readonly<Record<string, unknown>>) => string | undefined {
  const byKey = new Map<string, string>();
  const combinations = new Map<string, readonly string[]>();
  for (const consumer of list) {
    for (const entry of consumer.match.tokens ?? []) {
      byKey.set(tokenEntryKey(entry), consumer.name);
      const claims = tokenEntryClaims(entry);
      combinations.set(claims.join(','), claims);
    }
  }
  // The most specific entries first: { iss, azp } claims a token before { iss } alone does.
  const shapes = [...combinations.values()].sort((a, b) => b.length - a.length);
  return (claims) => {
    for (const shape of shapes) {
      const picked: Record<string, unknown> = {};
      for (const claim of shape) {
        const value = claims[claim];
        if (typeof value !== 'string') break;
        picked[claim] = value;
      }
      if (Object.keys(picked).length !== shape.length) continue;
      const name = byKey.get(tokenEntryKey(picked, true));
      if (name !== undefined) return name;
    }
    return undefined;
  };
}

export function createConsumerDirectory(list: ConsumersConfig['list']): ConsumerDirectory {
  const consumers = new Map(list.map((consumer) => [consumer.name, resolveConsumer(consumer)]));
  const byCertificate = [...consumers.values()].filter((consumer) => consumer.certificate !== undefined);
  const byClaims = claimsLookup(list);
  // Principal -> its consumer by claims (null: none); principal -> consumer -> principal with it.
  const claimed = new WeakMap<Principal, string | null>();
  const withConsumer = new WeakMap<Principal, Map<string, Principal>>();

  /** The consumer the connection's certificate names, found once per connection (its certificate cannot change). */
  function certificateConsumer(request: IncomingMessage): string | undefined {
    if (byCertificate.length === 0) return undefined;
    const socket = request.socket as Remembering;
    let name = socket[kCertificateConsumer];
    if (name === undefined) {
      name = byCertificate.find((consumer) => certificateAccepted(consumer.certificate!, request))?.name ?? null;
      socket[kCertificateConsumer] = name;
    }
    return name ?? undefined;
  }

  function principalWith(principal: Principal, name: string): Principal {
    let byName = withConsumer.get(principal);
    if (byName === undefined) withConsumer.set(principal, (byName = new Map<string, Principal>()));
    let named = byName.get(name);
    if (named === undefined) byName.set(name, (named = Object.freeze({ ...principal, consumer: name })));
    return named;
  }

  return {
    consumers,
    classify(principal, request) {
      if (principal.consumer !== undefined) return principal;
      let name = claimed.get(principal);
      if (name === undefined) claimed.set(principal, (name = byClaims(principal.claims) ?? null));
      const consumer = name ?? certificateConsumer(request);
      return consumer === undefined ? principal : principalWith(principal, consumer);
    },
  };
}
