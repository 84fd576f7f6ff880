// A call's gateway key, checked on the request path: the key store's record by the key's hash, its
// expiry, its allowed sources and operations. A keep-alive client's next call with the same header
// skips the hash and the lookup (the connection remembers the key it proved, as it remembers a
// token: auth/token-cache.ts), until the key store changes. A key the store does not hold, or holds
// revoked or expired, is refused as a forged token is: after the unauthenticated budget is spent.
import { clientAddress } from '../exchange/caller.js';
import type { Exchange, Principal } from '../exchange/exchange.js';
import { Errors, GatewayError } from '../errors.js';
import type { ConsumerDirectory } from './directory.js';
import { GATEWAY_KEY_PREFIX, GATEWAY_KEY_SHAPE, hashGatewayKey, type CompiledKey } from './gateway-keys.js';
import type { KeyWatch } from './key-store.js';

/** The issuer of a principal proved by gateway key (authorization rules may name it). */
export const GATEWAY_KEY_ISSUER = 'urn:ledger-gateway:gateway-key';

/**
 * The refusal of a bad credential, as the authentication stage knows it (auth/failure.ts): a class
 * the stage passes in, so that its 401, budget and metrics apply to keys as to tokens.
 */
export type CredentialFailure = new (reason: KeyFailureReason, detail?: string) => Error;
export type KeyFailureReason =
  | 'malformed'
  | 'keys_unavailable'
  | 'unknown_gateway_key'
  | 'gateway_key_expired'
  | 'gateway_key_revoked'
  | 'gateway_key_source';

export interface KeyCheck {
  readonly prefix: string;
  /**
   * The principal of the key this connection proved last, when `credential` (the header value, or
   * the token) is the one it came with, the store has not changed since and the key still serves
   * this call; else undefined (principalOf then says why not).
   */
  rememberedOn(exchange: Exchange, credential: string): Principal | undefined;
  /** The principal the key proves for this exchange; throws (or rejects with) the failure, or a 403 for an operation the key may not call. */
  principalOf(
    token: string,
    exchange: Exchange,
    credential: string,
    spend: (() => void | Promise<void>) | undefined,
  ): Principal | Promise<Principal>;
}

const kKeyMemo = Symbol('ledger-gateway.gatewayKey');
interface KeyMemo {
  credential: string;
  key: CompiledKey;
  principal: Principal;
  generation: number;
  check: KeyCheck;
}
type Remembering = Exchange['raw']['socket'] & { [kKeyMemo]?: KeyMemo };

export interface KeyCheckOptions {
  readonly keys: KeyWatch;
  readonly directory: ConsumerDirectory;
  readonly isTrustedProxy: (address: string) => boolean;
  readonly failure: CredentialFailure;
  readonly now?: () => number;
}

export function createKeyCheck(options: KeyCheckOptions): KeyCheck {
  const { keys, directory, isTrustedProxy, failure: Failure } = options;
  const now = options.now ?? Date.now;
  const principals = new WeakMap<CompiledKey, Principal>();

  function principalFor(key: CompiledKey): Principal {
    let principal = principals.get(key);
    if (principal !== undefined) return principal;
    const consumer = directory.consumers.get(key.record.consumer);
    if (consumer === undefined) throw new Failure('unknown_gateway_key', "the key's consumer is not configured");
    const claims = Object.freeze({ sub: consumer.userId, gateway_key_id: key.record.id });
    principal = Object.freeze({
      subject: consumer.userId,
      issuer: GATEWAY_KEY_ISSUER,
      claims,
      consumer: consumer.name,
    });
    principals.set(key, principal);
    return principal;
  }

  /** What must hold on every call, remembered or not; undefined when all of it does. */
  function refusalOf(key: CompiledKey, exchange: Exchange): KeyFailureReason | 'operation' | undefined {
    if (now() >= key.expiresAtMs) return 'gateway_key_expired';
    if (key.fromSource !== undefined) {
      const raw = exchange.raw;
      const address = clientAddress(raw.socket.remoteAddress ?? '', raw.headers['x-forwarded-for'], isTrustedProxy);
      if (!key.fromSource(address)) return 'gateway_key_source';
    }
    if (key.operations !== undefined && !key.operations.has(exchange.operation.name)) return 'operation';
    return undefined;
  }

  /** The principal, or the refusal: the expiry, the source, the operation. */
  function use(key: CompiledKey, principal: Principal, exchange: Exchange): Principal {
    const refusal = refusalOf(key, exchange);
    if (refusal === undefined) return principal;
    if (refusal === 'operation')
      throw new GatewayError(
        Errors.PERMISSION_DENIED,
        {},
        { reason: `gateway key ${key.record.id} may not call ${exchange.operation.name}` },
      );
    throw new Failure(
      refusal,
      refusal === 'gateway_key_expired'
        ? 'the gateway key has expired'
        : 'the gateway key is not allowed from this address',
    );
  }

  function lookUp(token: string, exchange: Exchange, credential: string): Principal {
    if (!GATEWAY_KEY_SHAPE.test(token)) throw new Failure('malformed', 'the gateway key is malformed');
    if (!keys.loaded) throw new Failure('keys_unavailable', 'the gateway key store has not been read yet');
    const ring = keys.ring;
    const key = ring.lookup(hashGatewayKey(token));
    if (key === undefined) throw new Failure('unknown_gateway_key', 'no such gateway key');
    if (key.revoked) throw new Failure('gateway_key_revoked', `gateway key ${key.record.id} is revoked`);
    const principal = use(key, principalFor(key), exchange);
    const socket = exchange.raw.socket as Remembering;
    socket[kKeyMemo] = { credential, key, principal, generation: ring.generation, check };
    return principal;
  }

  const check: KeyCheck = {
    prefix: GATEWAY_KEY_PREFIX,
    rememberedOn(exchange, credential) {
      const memo = (exchange.raw.socket as Remembering)[kKeyMemo];
      if (
        memo === undefined ||
        memo.credential !== credential ||
        memo.generation !== keys.ring.generation ||
        memo.check !== check
      )
        return undefined;
      return refusalOf(memo.key, exchange) === undefined ? memo.principal : undefined;
    },
    principalOf(token, exchange, credential, spend) {
      const spent = spend?.();
      return spent === undefined
        ? lookUp(token, exchange, credential)
        : spent.then(() => lookUp(token, exchange, credential));
    },
  };
  return check;
}
