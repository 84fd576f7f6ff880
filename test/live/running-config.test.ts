// GET /config on the admin listener: the configuration a replica runs now (after reloads, with the
// participant's issuers), its fingerprint and the keys waiting for a restart; every secret redacted,
// those of the schema, those read with ${file:...} and URL queries; shown with the admin token only.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfiguration } from '../../src/config/load.js';
import { gauge, startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';

const ADMIN_TOKEN = 'admin-token-never-shown-0123456789';
const AUDIENCE_FROM_FILE = 'audience-read-from-a-mounted-file';

interface RunningConfig {
  fingerprint: string;
  restartRequired: string[];
  config: {
    admin: { purgeToken: string };
    server: { port: number };
    auth: { issuers: Array<{ issuer: string; audience?: string; jwksUrl?: string }> };
    policy: { rules: Record<string, unknown> };
  };
}

let upstream: RecordingUpstream | undefined;
let running: RunningGateway | undefined;
let directory: string | undefined;
afterEach(async () => {
  await running?.close();
  await upstream?.close();
  if (directory !== undefined) rmSync(directory, { recursive: true, force: true });
  running = upstream = directory = undefined;
});

/** A config file whose issuer audience is read from a file, and the gateway started from it. */
async function startedFromFile(rules: object) {
  upstream = await startRecordingUpstream();
  directory = mkdtempSync(join(tmpdir(), 'running-config-'));
  const audienceFile = join(directory, 'audience');
  writeFileSync(audienceFile, AUDIENCE_FROM_FILE);
  const issuer = await createTestIssuer();
  const file = join(directory, 'gateway.yaml');
  const write = (policyRules: object, port = 0) =>
    writeFileSync(
      file,
      [
        `auth: { participantId: ${TEST_PARTICIPANT}, issuers: [${JSON.stringify({
          ...issuer.issuerConfig,
          audience: `\${file:${audienceFile}}`,
        })}] }`,
        `upstream: { url: "${upstream!.url}" }`,
        `server: { host: 127.0.0.1, port: ${port} }`,
        `admin: { host: 127.0.0.1, port: 0, purgeToken: ${ADMIN_TOKEN} }`,
        'log: { level: silent }',
        `policy: { rules: ${JSON.stringify(policyRules)} }`,
      ].join('\n'),
    );
  write(rules);
  const loaded = loadConfiguration(file, {});
  running = await startGateway(upstream.url, loaded.config, { secretPaths: loaded.provenance.fromFiles });
  return { gateway: running, file, write };
}

async function runningConfig(gateway: RunningGateway): Promise<{ status: number; text: string }> {
  const answer = await fetch(`${gateway.adminUrl}/config`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return { status: answer.status, text: await answer.text() };
}

describe('GET /config on the admin listener', () => {
  it('shows the running configuration and its fingerprint, every secret redacted', async () => {
    const { gateway } = await startedFromFile({ 'getV2StateLedger-end': [{ subjects: ['alice'] }] });
    const { status, text } = await runningConfig(gateway);
    expect(status).toBe(200);
    expect(text).not.toContain(ADMIN_TOKEN);
    expect(text).not.toContain(AUDIENCE_FROM_FILE);
    const shown = JSON.parse(text) as RunningConfig;
    expect(shown.fingerprint).toBe(gateway.gateway.fingerprint);
    expect(await gauge(gateway, 'ledger_gateway_config_info', { fingerprint: shown.fingerprint })).toBe(1);
    expect(shown.config.admin.purgeToken).toBe('REDACTED');
    expect(shown.config.auth.issuers[0]!.audience).toBe('REDACTED');
    expect(shown.config.policy.rules).toMatchObject({ 'getV2StateLedger-end': [{ subjects: ['alice'] }] });
    expect(shown.restartRequired).toEqual([]);
  });

  it('follows a reload: the new rules and fingerprint, and the keys that wait for a restart', async () => {
    const { gateway, file, write } = await startedFromFile({});
    write({ 'getV2StateLedger-end': [{ subjects: ['bob'] }] }, 1);
    const outcome = await gateway.gateway.reload(() => loadConfiguration(file, {}), 'test');
    expect(outcome.result).toBe('success');

    const { text } = await runningConfig(gateway);
    expect(text).not.toContain(AUDIENCE_FROM_FILE);
    const shown = JSON.parse(text) as RunningConfig;
    expect(shown.fingerprint).toBe(outcome.fingerprint);
    expect(shown.config.policy.rules).toMatchObject({ 'getV2StateLedger-end': [{ subjects: ['bob'] }] });
    expect(shown.config.server.port).toBe(0); // what runs, not what the file says
    expect(shown.restartRequired).toEqual(['server.port']);
  });

  it("redacts the query of every URL: a jwksUrl's access_token is never shown", async () => {
    upstream = await startRecordingUpstream();
    const secret = 'query-token-never-shown-42';
    const jwksUrl = `http://127.0.0.1:9/keys?access_token=${secret}&tenant=a#${secret}`;
    running = await startGateway(upstream.url, {
      admin: { purgeToken: ADMIN_TOKEN },
      auth: {
        participantId: TEST_PARTICIPANT,
        issuers: [{ issuer: 'https://idp.example', jwksUrl }],
        keySets: { fetchTimeoutMs: 200 },
      },
    });
    const { status, text } = await runningConfig(running);
    expect(status).toBe(200);
    expect(text).not.toContain(secret);
    const shown = JSON.parse(text) as RunningConfig;
    expect(shown.config.auth.issuers[0]!.jwksUrl).toBe(
      'http://127.0.0.1:9/keys?access_token=REDACTED&tenant=REDACTED#REDACTED',
    );
  });

  it('is shown off loopback only with the admin token', async () => {
    const { gateway } = await startedFromFile({});
    const read = (authorization?: string) =>
      gateway.gateway.admin.inject({
        method: 'GET',
        url: '/config',
        remoteAddress: '203.0.113.7',
        headers: authorization === undefined ? {} : { authorization },
      });
    expect((await read()).statusCode).toBe(403);
    expect((await read('Bearer not-the-admin-token-at-all')).statusCode).toBe(403);
    const granted = await read(`Bearer ${ADMIN_TOKEN}`);
    expect(granted.statusCode).toBe(200);
    expect(granted.headers['cache-control']).toBe('no-store');
    expect(granted.body).not.toContain(ADMIN_TOKEN);
  });
});
