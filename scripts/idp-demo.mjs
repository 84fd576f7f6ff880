#!/usr/bin/env node
// DEVELOPMENT ONLY: `npm run demo:idps` shows auth.participantIdentityProviders at work against a gateway
// started by `LEDGER_GATEWAY_AUTH__PARTICIPANT_IDENTITY_PROVIDERS__ENABLED=true
// LEDGER_GATEWAY_AUTH__PARTICIPANT_IDENTITY_PROVIDERS__ALLOWED_JWKS_HOSTS='["127.0.0.1"]' npm start`: a new issuer
// (its own JWKS endpoint on loopback, which the second variable allows) is refused, trusted once an IdP config for it is created through
// the gateway, and refused again once that config is deactivated. Exits 1 naming the step that went wrong.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { CANTON_AUDIENCE_PREFIX } from '../dist/auth/claims.js';
import {
  DEVELOPMENT_ISSUER,
  developmentKeyDirectory,
  loadOrCreateDevelopmentKey,
  mintDevelopmentToken,
} from '../dist/auth/dev-mode.js';
import { DEVELOPMENT_PARTICIPANT_ID } from '../dist/development-identity.js';

const USAGE = `Usage: npm run demo:idps -- [--gateway <url>] [--timeout <ms>]

DEVELOPMENT ONLY. Against a gateway started by
  LEDGER_GATEWAY_AUTH__PARTICIPANT_IDENTITY_PROVIDERS__ENABLED=true \\
  LEDGER_GATEWAY_AUTH__PARTICIPANT_IDENTITY_PROVIDERS__ALLOWED_JWKS_HOSTS='["127.0.0.1"]' npm start
shows the participant's identity providers trusted at the edge, step by step: a token of a new
issuer is refused (401); POST /v2/idps creates an IdP config for it through the gateway; the same
call then passes (200), with no restart and no retry (the gateway holds it while it refreshes the
list after the change); PATCH deactivates the IdP: 401 again; DELETE removes it. The new issuer's
keys are served by this script on 127.0.0.1 (a random port): the gateway fetches a participant
IdP's keys from a loopback address only when allowedJwksHosts lists it.

It runs only against a gateway in development mode: before anything else it checks that the gateway
accepts a token signed by the development key in .dev/ (or LEDGER_GATEWAY_DEV_DIR), as only a
gateway with upstream.url "sandbox" and no auth.issuers does; otherwise it stops and changes nothing.
  --gateway <url>   The gateway's API; default http://127.0.0.1:8080.
  --timeout <ms>    Bound on each call; default 60000 (above the gateway's own bound on how long it
                    holds a call while it refreshes the list after a change: 45 s with the defaults).
Exit status: 0 when every step answered as expected, 1 otherwise (the step is named), 2 on bad usage.`;

/** The sandbox's participant admin (src/sandbox/seed.ts); Canton's IdP config service needs that right. */
const ADMIN_USER = 'participant_admin';
const USER = 'alice';
const TOKEN_LIFETIME_SECONDS = 120;

class StepFailure extends Error {}

/** A token is never printed whole: its first characters at most (the JOSE header). */
const tokenPrefix = (token) => `${token.slice(0, 12)}…`;

function parseOptions() {
  const { values } = parseArgs({
    options: {
      gateway: { type: 'string', default: 'http://127.0.0.1:8080' },
      timeout: { type: 'string', default: '60000' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const timeoutMs = Number(values.timeout);
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) throw new Error('--timeout must be a positive number of ms');
  if (!URL.canParse(values.gateway)) throw new Error(`--gateway is not a URL: ${values.gateway}`);
  return { gateway: values.gateway.replace(/\/+$/, ''), timeoutMs };
}

/** What an answer shows, in a few words: Canton's error code and cause, or the fields asked for. */
function summary(body) {
  if (body === undefined) return 'no JSON body';
  if (typeof body.code === 'string') {
    const cause = typeof body.cause === 'string' ? body.cause.slice(0, 120) : '';
    return `${body.code}${cause === '' ? '' : `: ${cause}`}`;
  }
  return JSON.stringify(body).slice(0, 160);
}

/** The gateway holds a client's call while it refreshes the IdP list after a change (each IdP's keys included). */
const held = (ms) => `answered in ${ms} ms, held while the gateway refreshed its list after the change`;

function createCaller(gateway, timeoutMs) {
  /** One call through the gateway, bounded; a status other than `expected` is a StepFailure naming the step. */
  return async function call(step, { method, path, token, body, expected, hint }) {
    const started = performance.now();
    let response;
    try {
      response = await fetch(`${gateway}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      const cause =
        error.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (error.cause?.code ?? error.message);
      throw new StepFailure(`step ${step}: ${method} ${path} expected ${expected}, got no answer (${cause})`);
    }
    const text = await response.text();
    let json;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (response.status !== expected) {
      throw new StepFailure(
        `step ${step}: ${method} ${path} expected ${expected}, got ${response.status} (${summary(json)})` +
          (hint === undefined ? '' : `\n  ${hint}`),
      );
    }
    return { status: response.status, json, ms: Math.round(performance.now() - started) };
  };
}

/** A JWKS endpoint on 127.0.0.1 (a random port) serving one fresh ES256 public key. */
async function startKeyServer() {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const publicJwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicJwk);
  const jwks = JSON.stringify({ keys: [{ ...publicJwk, kid, alg: 'ES256', use: 'sig' }] });
  const server = http.createServer((request, response) => {
    if (request.method === 'GET' && request.url === '/jwks.json') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(jwks);
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  return {
    privateKey,
    kid,
    jwksUrl: `http://127.0.0.1:${port}/jwks.json`,
    close() {
      server.closeAllConnections(); // the gateway's keep-alive connection would hold close() open
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** A Canton audience-based token (as `npm run token` mints) from the new issuer. */
async function mintIssuerToken(keys, issuer) {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid: keys.kid, typ: 'JWT' })
    .setIssuer(issuer)
    .setSubject(USER)
    .setAudience(`${CANTON_AUDIENCE_PREFIX}${DEVELOPMENT_PARTICIPANT_ID}`)
    .setIssuedAt(now)
    .setExpirationTime(now + TOKEN_LIFETIME_SECONDS)
    .sign(keys.privateKey);
}

async function developmentAdminToken() {
  const directory = developmentKeyDirectory();
  if (!existsSync(join(directory, 'signing-key.json'))) {
    throw new StepFailure(
      `step 0 (development mode check): no development key in ${directory}; ` +
        'start the gateway from this checkout with npm start first',
    );
  }
  return mintDevelopmentToken(await loadOrCreateDevelopmentKey(directory), {
    subject: ADMIN_USER,
    participantId: DEVELOPMENT_PARTICIPANT_ID,
    lifetimeSeconds: TOKEN_LIFETIME_SECONDS,
  });
}

async function run({ gateway, timeoutMs }, cleanup) {
  const call = createCaller(gateway, timeoutMs);
  const admin = await developmentAdminToken();
  const checked = await call('0 (development mode check)', {
    method: 'GET',
    path: '/v2/authenticated-user',
    token: admin,
    expected: 200,
    hint:
      `the gateway at ${gateway} does not accept a development token: it is not a development-mode gateway ` +
      '(upstream.url "sandbox", no auth.issuers) started from this checkout, so the demo changes nothing there',
  });
  console.log(
    `0. ${gateway} is in development mode: a token of the development key (${DEVELOPMENT_ISSUER}) for ` +
      `"${ADMIN_USER}" is accepted (GET /v2/authenticated-user: ${checked.status}, user ${checked.json?.user?.id})`,
  );

  const keys = await startKeyServer();
  cleanup.push(async () => {
    await keys.close();
    console.log('   JWKS endpoint stopped');
  });
  const suffix = randomBytes(6).toString('hex');
  const issuer = `https://demo-idp.invalid/${suffix}`;
  const idpId = `demo-idp-${suffix}`;
  const token = await mintIssuerToken(keys, issuer);
  console.log(`1. New issuer ${issuer}, its keys at ${keys.jwksUrl}`);
  const audience = `${CANTON_AUDIENCE_PREFIX}${DEVELOPMENT_PARTICIPANT_ID}`;
  console.log(`   token for user "${USER}", audience ${audience}: ${tokenPrefix(token)}`);

  const ledgerEnd = (step, expected, hint) =>
    call(step, { method: 'GET', path: '/v2/state/ledger-end', token, expected, hint });

  const unknown = await ledgerEnd('2 (a token of an issuer the gateway does not know)', 401);
  console.log(
    `2. GET /v2/state/ledger-end with ${USER}'s token: ${unknown.status} (${summary(unknown.json)}): ` +
      'the issuer is unknown at the edge',
  );

  const config = { identityProviderId: idpId, isDeactivated: false, issuer, jwksUrl: keys.jwksUrl, audience: '' };
  const created = await call('3 (create the IdP config)', {
    method: 'POST',
    path: '/v2/idps',
    token: admin,
    body: { identityProviderConfig: config },
    expected: 200,
  });
  cleanup.unshift(async () => {
    const deleted = await fetch(`${gateway}/v2/idps/${idpId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${admin}` },
      signal: AbortSignal.timeout(timeoutMs),
    }).catch((error) => ({ status: error.name }));
    console.log(`   cleanup: DELETE /v2/idps/${idpId}: ${deleted.status}`);
  });
  console.log(
    `3. POST /v2/idps as "${ADMIN_USER}" (development token): ${created.status}, IdP ` +
      `${created.json?.identityProviderConfig?.identityProviderId} created with jwksUrl ${keys.jwksUrl}`,
  );

  const trusted = await ledgerEnd(
    '4 (the same token once the IdP exists)',
    200,
    'is the gateway started with LEDGER_GATEWAY_AUTH__PARTICIPANT_IDENTITY_PROVIDERS__ENABLED=true and ' +
      `LEDGER_GATEWAY_AUTH__PARTICIPANT_IDENTITY_PROVIDERS__ALLOWED_JWKS_HOSTS='["127.0.0.1"]'?`,
  );
  console.log(
    `4. GET /v2/state/ledger-end with ${USER}'s token: ${trusted.status} (offset ${trusted.json?.offset}): ` +
      `trusted from the next call, no restart, no retry (${held(trusted.ms)})`,
  );

  const deactivated = await call('5 (deactivate the IdP)', {
    method: 'PATCH',
    path: `/v2/idps/${idpId}`,
    token: admin,
    body: { identityProviderConfig: { ...config, isDeactivated: true }, updateMask: { paths: ['is_deactivated'] } },
    expected: 200,
  });
  console.log(
    `5. PATCH /v2/idps/${idpId} isDeactivated: true (update mask [is_deactivated]): ${deactivated.status}, ` +
      `isDeactivated ${deactivated.json?.identityProviderConfig?.isDeactivated}`,
  );
  const refused = await ledgerEnd('5 (the same token once the IdP is deactivated)', 401);
  console.log(
    `   GET /v2/state/ledger-end with ${USER}'s token: ${refused.status} (${summary(refused.json)}): ` +
      `a deactivated IdP is not trusted (${held(refused.ms)})`,
  );

  cleanup.shift(); // the IdP is deleted here, as a step
  const removed = await call('6 (delete the IdP)', {
    method: 'DELETE',
    path: `/v2/idps/${idpId}`,
    token: admin,
    expected: 200,
  });
  console.log(`6. DELETE /v2/idps/${idpId}: ${removed.status}`);
}

async function main() {
  let options;
  try {
    options = parseOptions();
  } catch (error) {
    console.error(`demo:idps: ${error.message}\n\n${USAGE}`);
    process.exit(2);
  }
  const cleanup = [];
  let code = 0;
  try {
    await run(options, cleanup);
  } catch (error) {
    console.error(error instanceof StepFailure ? `FAILED at ${error.message}` : `FAILED: ${error.stack}`);
    code = 1;
  }
  for (const step of cleanup) await step();
  if (code === 0) console.log('Done: the same token answered 401 -> 200 -> 401, following the IdP configs.');
  process.exit(code);
}

await main();
