// A key withdrawn from the JWKS while a token signed with it is being checked: the outcome of that
// check must not outlive the withdrawal, neither in the token cache nor in the connection's memo.
// The interleaving is fixed, not left to timing: the real key set (fetching from a real JWKS server
// on 127.0.0.1) resolves the token's key, the check is held right there, the key set is refreshed
// from the server without that key (which clears the cache), and only then is the check let go.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createAuthenticator, type Authenticator } from '../../src/auth/authenticator.js';
import { RemoteKeySet } from '../../src/auth/key-set.js';
import { validateGatewayConfig } from '../../src/config/load.js';
import { startJwksServer, type JwksServer } from './support/jwks-server.js';
import { sign, signingKey, type SigningKey } from './support/keys.js';
import { reasonOf } from './support/outcome.js';

const ISSUER = 'https://idp.example.com';

let opened: { auth: Authenticator; jwks: JwksServer } | undefined;
afterEach(async () => {
  opened?.auth.close();
  await opened?.jwks.close();
  opened = undefined;
});

interface HeldCheck {
  /** Resolves once a check has resolved its key and is waiting. */
  readonly held: Promise<void>;
  release(): void;
}

/** Holds the next check of this key set right after its key was resolved, until release(). */
function holdNextCheck(keySet: RemoteKeySet): HeldCheck {
  const resolveKey = keySet.resolve.bind(keySet);
  let reached!: () => void;
  let release!: () => void;
  const held = new Promise<void>((resolve) => (reached = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  vi.spyOn(keySet, 'resolve').mockImplementationOnce(async (header, token) => {
    const key = await resolveKey(header, token);
    reached();
    await released;
    return key;
  });
  return { held, release };
}

/** An authenticator whose issuer publishes `published` at a JWKS URL, loaded. */
async function authenticatorOver(
  published: readonly SigningKey[],
): Promise<{ auth: Authenticator; keySet: RemoteKeySet; jwks: JwksServer }> {
  const jwks = await startJwksServer(published.map((key) => key.publicJwk));
  const auth = createAuthenticator(
    validateGatewayConfig({
      upstream: { url: 'http://participant:7575' },
      auth: {
        issuers: [{ issuer: ISSUER, jwksUrl: jwks.jwksUrl }],
        participantId: 'participant1',
        keySets: { unknownKeyCooldownMs: 60_000 },
      },
    }).auth,
    'http://participant:7575',
  );
  opened = { auth, jwks };
  const keySet = auth.keySets[0];
  if (!(keySet instanceof RemoteKeySet)) throw new Error('a jwksUrl issuer has a RemoteKeySet');
  auth.start();
  await expect.poll(() => keySet.ready()).toBe(true);
  return { auth, keySet, jwks };
}

/** The identity provider publishes `next`; the key set fetches it and reports the withdrawal. */
async function publish(
  auth: Authenticator,
  jwks: JwksServer,
  keySet: RemoteKeySet,
  next: readonly SigningKey[],
): Promise<void> {
  jwks.setKeys(next.map((key) => key.publicJwk));
  const cleared = vi.spyOn(auth.cache, 'clear');
  expect(await keySet.refresh()).toBe(true);
  expect(cleared).toHaveBeenCalledTimes(1);
}

/** A token signed with k1, whose next check the test holds; `withdraw` publishes k2 alone. */
async function withdrawnDuringCheck() {
  const [k1, k2] = await Promise.all([signingKey('ES256'), signingKey('ES256')]);
  const { auth, keySet, jwks } = await authenticatorOver([k1, k2]);
  const token = await sign(k1, { iss: ISSUER });
  return { auth, token, hold: holdNextCheck(keySet), withdraw: () => publish(auth, jwks, keySet, [k2]) };
}

describe('a key withdrawn while a token signed with it is being checked', () => {
  it('leaves the token out of the cache: its next use is refused', async () => {
    const { auth, token, hold, withdraw } = await withdrawnDuringCheck();

    const first = auth.authenticate(token);
    await hold.held;
    await withdraw(); // k1 withdrawn
    hold.release();

    // The check in flight ends with the key it had resolved; its outcome is not kept.
    await expect(first).resolves.toMatchObject({ subject: 'alice' });
    expect(await reasonOf(auth.authenticate(token))).toBe('unknown_key');
    expect(auth.cache.size.verified).toBe(0);
  });

  it("leaves it out of the connection's memo: the same connection's next call is refused", async () => {
    const { auth, token, hold, withdraw } = await withdrawnDuringCheck();
    const connection = {};

    const first = auth.principalOf(token, 'bearer token', connection, `Bearer ${token}`);
    await hold.held;
    await withdraw();
    hold.release();

    await expect(first).resolves.toMatchObject({ subject: 'alice' });
    expect(auth.rememberedOn(connection, `Bearer ${token}`)).toBeUndefined();
    expect(
      await reasonOf(
        Promise.resolve().then(() => auth.principalOf(token, 'bearer token', connection, `Bearer ${token}`)),
      ),
    ).toBe('unknown_key');
  });

  it('does not let a call that arrives after the withdrawal join the check in flight', async () => {
    const { auth, token, hold, withdraw } = await withdrawnDuringCheck();

    const first = auth.authenticate(token);
    await hold.held;
    await withdraw();
    const second = reasonOf(auth.authenticate(token)); // checked against the keys published now
    hold.release();

    await expect(first).resolves.toMatchObject({ subject: 'alice' });
    expect(await second).toBe('unknown_key');
    expect(auth.signatureChecks).toBe(2);
  });

  it('does not remember a refusal reached with a key replaced meanwhile: the token passes with the new key', async () => {
    const old = await signingKey('ES256');
    const replacement = await signingKey('ES256', old.kid); // the identity provider reuses the kid
    const { auth, keySet, jwks } = await authenticatorOver([old]);
    const token = await sign(replacement, { iss: ISSUER });
    const hold = holdNextCheck(keySet);

    const first = auth.authenticate(token);
    await hold.held;
    await publish(auth, jwks, keySet, [replacement]);
    hold.release();

    expect(await reasonOf(first)).toBe('bad_signature'); // checked with the key it had resolved
    await expect(auth.authenticate(token)).resolves.toMatchObject({ subject: 'alice' });
  });

  it('notices a withdrawn key that shares its kid with a key that stays (RFC 7517 §4.5 allows it across key types)', async () => {
    for (const order of ['rsa first', 'ec first'] as const) {
      const rsa = await signingKey('RS256', 'shared');
      const ec = await signingKey('ES256', 'shared');
      const { auth, keySet, jwks } = await authenticatorOver(order === 'rsa first' ? [rsa, ec] : [ec, rsa]);
      const token = await sign(rsa, { iss: ISSUER });
      await expect(auth.authenticate(token), order).resolves.toMatchObject({ subject: 'alice' });
      expect(auth.cache.size.verified, order).toBe(1);
      await publish(auth, jwks, keySet, [ec]); // the RSA key is withdrawn: the cache is cleared
      expect(auth.cache.size.verified, order).toBe(0);
      expect(await reasonOf(auth.authenticate(token)), order).toBe('unknown_key');
      auth.close();
      await jwks.close();
      opened = undefined;
    }
  });
});
