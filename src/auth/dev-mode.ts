// DEVELOPMENT ONLY. With upstream.url "sandbox" and no issuer configured, the gateway trusts one
// development key: an ES256 key pair created on first use in .dev/ (git-ignored by its own
// .gitignore, file mode 0600), so that `npm start` and `npm run token` — two processes — sign and
// verify with the same key. The public half goes into the config as an inline JWKS, so the
// development path verifies exactly like a configured issuer (createLocalJWKSet, kid, pinned ES256,
// Canton audience), and nothing new is served on any port. With a real upstream this mode cannot
// start: no issuers and a real upstream is a ConfigError (auth/config.ts).
import { randomUUID } from 'node:crypto';
import { link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SignJWT, calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';
import type { GatewayConfig } from '../config/schema.js';
import { DEVELOPMENT_PARTICIPANT_ID, DEVELOPMENT_USER_ID } from '../development-identity.js';
import { CANTON_AUDIENCE_PREFIX } from './claims.js';
import { resolveAuthConfig } from './config.js';

/** An issuer no identity provider uses: a development token is recognisable at a glance. */
export const DEVELOPMENT_ISSUER = 'urn:ledger-gateway:development-only';
const KEY_FILE = 'signing-key.json';

export interface DevelopmentKey {
  readonly kid: string;
  readonly privateJwk: JWK;
  readonly publicJwk: JWK;
}

/** `.dev/` at the package root (same for dist/ and src/), or LEDGER_GATEWAY_DEV_DIR. */
export function developmentKeyDirectory(env: NodeJS.ProcessEnv = process.env): string {
  return env.LEDGER_GATEWAY_DEV_DIR ?? fileURLToPath(new URL('../../.dev/', import.meta.url));
}

/** Development mode: the embedded sandbox and no identity provider configured. */
export function isDevelopmentMode(config: GatewayConfig): boolean {
  return config.upstream.url === 'sandbox' && config.auth.issuers.length === 0;
}

export function developmentParticipantId(config: GatewayConfig): string {
  return config.auth.participantId ?? DEVELOPMENT_PARTICIPANT_ID;
}

/** Development tokens live as long as the gateway accepts (an hour when there is no limit). */
export function developmentLifetimeSeconds(config: GatewayConfig): number {
  return config.auth.maxTokenLifetimeSeconds > 0 ? config.auth.maxTokenLifetimeSeconds : 3_600;
}

function publicHalf(privateJwk: JWK): JWK {
  const { d: _d, ...rest } = privateJwk;
  return rest;
}

function asDevelopmentKey(document: unknown, file: string): DevelopmentKey {
  const jwk = document as JWK;
  if (
    typeof jwk !== 'object' ||
    jwk === null ||
    jwk.kty !== 'EC' ||
    jwk.crv !== 'P-256' ||
    typeof jwk.d !== 'string' ||
    typeof jwk.kid !== 'string'
  ) {
    throw new Error(`${file} is not a development ES256 key; delete it to create a new one`);
  }
  return { kid: jwk.kid, privateJwk: jwk, publicJwk: publicHalf(jwk) };
}

async function readKey(file: string): Promise<DevelopmentKey> {
  return asDevelopmentKey(JSON.parse(await readFile(file, 'utf8')) as unknown, file);
}

/** The development key, created (exclusively, so two processes agree) on first use. */
export async function loadOrCreateDevelopmentKey(
  directory: string = developmentKeyDirectory(),
): Promise<DevelopmentKey> {
  const file = join(directory, KEY_FILE);
  try {
    return await readKey(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  await mkdir(directory, { recursive: true, mode: 0o700 });
  await writeFile(join(directory, '.gitignore'), '# development keys: never commit\n*\n', { flag: 'w' });
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  const exported = await exportJWK(privateKey);
  const kid = await calculateJwkThumbprint(publicHalf(exported));
  const privateJwk: JWK = { ...exported, kid, alg: 'ES256', use: 'sig' };
  // Written whole under a temporary name, then linked into place: link fails if the file exists, so
  // a gateway and `npm run token` starting together end up with one key, never a half-written file.
  const temporary = join(directory, `.${KEY_FILE}.${randomUUID()}.tmp`);
  await writeFile(temporary, `${JSON.stringify(privateJwk, null, 2)}\n`, { flag: 'wx', mode: 0o600 });
  try {
    await link(temporary, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return readKey(file); // another process created it first: use theirs
  } finally {
    await unlink(temporary);
  }
  return asDevelopmentKey(privateJwk, file);
}

/** The config with the development issuer in place of the (empty) issuer list. */
export function withDevelopmentIssuer(config: GatewayConfig, key: DevelopmentKey): GatewayConfig {
  const copy = structuredClone(config);
  copy.auth.issuers = [
    { issuer: DEVELOPMENT_ISSUER, jwks: { keys: [{ ...key.publicJwk, kty: 'EC' }] }, algorithms: ['ES256'] },
  ];
  copy.auth.participantId = developmentParticipantId(config);
  return copy;
}

export interface DevelopmentTokenOptions {
  readonly subject: string;
  readonly participantId: string;
  readonly lifetimeSeconds: number;
}

/** A Canton audience-based token (`AuthServiceJWTPayload.scala`) signed with the development key. */
export async function mintDevelopmentToken(key: DevelopmentKey, options: DevelopmentTokenOptions): Promise<string> {
  const privateKey = await importJWK(key.privateJwk, 'ES256');
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid: key.kid, typ: 'JWT' })
    .setIssuer(DEVELOPMENT_ISSUER)
    .setSubject(options.subject)
    .setAudience(`${CANTON_AUDIENCE_PREFIX}${options.participantId}`)
    .setIssuedAt(now)
    .setExpirationTime(now + options.lifetimeSeconds)
    .sign(privateKey);
}

export interface PreparedAuthentication {
  readonly config: GatewayConfig;
  /** Set in development mode: a token to print at start. */
  readonly development?: {
    readonly token: string;
    readonly subject: string;
    readonly lifetimeSeconds: number;
    readonly keyFile: string;
  };
}

/**
 * For main.ts: in development mode, put the development issuer in place and mint a first token;
 * then check the auth section, so that a bad one stops the process like any bad config (ConfigError).
 */
export async function prepareAuthentication(
  config: GatewayConfig,
  directory: string = developmentKeyDirectory(),
): Promise<PreparedAuthentication> {
  if (!isDevelopmentMode(config)) {
    resolveAuthConfig(config.auth, config.upstream.url);
    return { config };
  }
  const key = await loadOrCreateDevelopmentKey(directory);
  const developmentConfig = withDevelopmentIssuer(config, key);
  resolveAuthConfig(developmentConfig.auth, developmentConfig.upstream.url);
  const subject = DEVELOPMENT_USER_ID;
  const lifetimeSeconds = developmentLifetimeSeconds(config);
  const token = await mintDevelopmentToken(key, {
    subject,
    participantId: developmentParticipantId(config),
    lifetimeSeconds,
  });
  return {
    config: developmentConfig,
    development: { token, subject, lifetimeSeconds, keyFile: join(directory, KEY_FILE) },
  };
}

/** The banner `npm start` prints in development mode. */
export function developmentBanner(
  apiUrl: string,
  development: NonNullable<PreparedAuthentication['development']>,
): string {
  const url = apiUrl.replace('://0.0.0.0:', '://127.0.0.1:').replace('://[::]:', '://127.0.0.1:');
  const line = '='.repeat(78);
  return [
    line,
    'DEVELOPMENT ONLY: no auth.issuers and upstream.url "sandbox". The gateway trusts tokens signed',
    `by the development key in ${development.keyFile} (issuer ${DEVELOPMENT_ISSUER}).`,
    'This mode cannot start with a real participant.',
    '',
    `A token for user "${development.subject}", valid ${development.lifetimeSeconds} s (mint more: npm run token -- --sub alice):`,
    development.token,
    '',
    `curl -H "Authorization: Bearer ${development.token}" ${url}/v2/version`,
    line,
  ].join('\n');
}
