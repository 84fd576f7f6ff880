// `npm run demo:idps` (scripts/idp-demo.mjs) against the built gateway started as `npm start` starts it:
// config/default.yaml (the embedded sandbox, development mode) on ports 0, with or without the
// participant's identity providers; and against a gateway that is not in development mode.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { closeAfterEach } from '../helpers/per-test.js';
import { loadOrCreateDevelopmentKey } from '../../src/auth/dev-mode.js';
import { runToExit, startProcess, writeGatewayConfig, type GatewayProcess } from '../helpers/process.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';

// The demo's calls can each be held while the gateway refreshes its IdP list (bounded by the gateway).
const DEMO_BOUND_MS = 120_000;

let gateway: GatewayProcess | undefined;
let upstream: RecordingUpstream | undefined;
closeAfterEach(
  () => gateway,
  () => upstream,
);

/** What `npm start` runs (package.json), on loopback ports 0, with its own development key directory. */
async function startDevelopmentGateway(env: NodeJS.ProcessEnv): Promise<{ api: string; devDir: string }> {
  const devDir = join(mkdtempSync(join(tmpdir(), 'ledger-gateway-idp-demo-')), '.dev');
  gateway = await startProcess(
    ['--import', './dist/telemetry/register.js', 'dist/main.js', '--config', 'config/default.yaml'],
    {
      LEDGER_GATEWAY_DEV_DIR: devDir,
      LEDGER_GATEWAY_HOST: '127.0.0.1',
      LEDGER_GATEWAY_PORT: '0',
      LEDGER_GATEWAY_ADMIN_HOST: '127.0.0.1',
      LEDGER_GATEWAY_ADMIN_PORT: '0',
      ...env,
    },
  );
  return { api: gateway.api, devDir };
}

const runDemo = (api: string, devDir: string) =>
  runToExit(['scripts/idp-demo.mjs', '--gateway', api], { LEDGER_GATEWAY_DEV_DIR: devDir }, DEMO_BOUND_MS);

/** The statuses of the demo's GET /v2/state/ledger-end calls with the new issuer's token, in order. */
const ledgerEndStatuses = (stdout: string) =>
  [...stdout.matchAll(/GET \/v2\/state\/ledger-end with alice's token: (\d{3})/g)].map((match) => Number(match[1]));

// A JWT's header and payload (a prefix of the header alone is what the demo may print).
const WHOLE_TOKEN = /eyJ[\w-]+\.eyJ[\w-]+/;

describe('npm run demo:idps', () => {
  it('trusting participant IdPs: 401, then 200 once the IdP exists, then 401 once it is deactivated', async () => {
    const { api, devDir } = await startDevelopmentGateway({
      LEDGER_GATEWAY_AUTH__PARTICIPANT_IDENTITY_PROVIDERS__ENABLED: 'true',
      // The demo serves its IdP's keys on loopback: a participant IdP may use it only when allowed.
      LEDGER_GATEWAY_AUTH__PARTICIPANT_IDENTITY_PROVIDERS__ALLOWED_JWKS_HOSTS: '["127.0.0.1"]',
    });
    const demo = await runDemo(api, devDir);
    expect(demo.stderr).toBe('');
    expect(demo.code).toBe(0);
    expect(ledgerEndStatuses(demo.stdout)).toEqual([401, 200, 401]);
    expect(demo.stdout).toMatch(/^3\. POST \/v2\/idps .*: 200, IdP demo-idp-[0-9a-f]+ created/m);
    expect(demo.stdout).toMatch(/^6\. DELETE \/v2\/idps\/demo-idp-[0-9a-f]+: 200$/m);
    expect(demo.stdout).not.toMatch(WHOLE_TOKEN);
  }, 150_000);

  it('with the participant IdPs not trusted: exits 1 at step 4, and deletes the IdP it created', async () => {
    const { api, devDir } = await startDevelopmentGateway({});
    const demo = await runDemo(api, devDir);
    expect(demo.code).toBe(1);
    expect(demo.stderr).toMatch(/^FAILED at step 4 .*GET \/v2\/state\/ledger-end expected 200, got 401/m);
    expect(demo.stderr).toContain('LEDGER_GATEWAY_AUTH__PARTICIPANT_IDENTITY_PROVIDERS__ENABLED=true');
    expect(ledgerEndStatuses(demo.stdout)).toEqual([401]);
    expect(demo.stdout).toMatch(/cleanup: DELETE \/v2\/idps\/demo-idp-[0-9a-f]+: 200/);
    expect(`${demo.stdout}${demo.stderr}`).not.toMatch(WHOLE_TOKEN);
  }, 150_000);

  it('refuses a gateway that is not in development mode, before it sends anything that changes it', async () => {
    upstream = await startRecordingUpstream();
    const issuer = await createTestIssuer();
    gateway = await startProcess([
      'dist/main.js',
      '--config',
      writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT),
    ]);
    const devDir = join(mkdtempSync(join(tmpdir(), 'ledger-gateway-idp-demo-')), '.dev');
    await loadOrCreateDevelopmentKey(devDir); // a development key the gateway does not trust
    const demo = await runDemo(gateway.api, devDir);
    expect(demo.code).toBe(1);
    expect(demo.stderr).toMatch(/^FAILED at step 0 \(development mode check\): .* expected 200, got 401/m);
    expect(demo.stderr).toContain('not a development-mode gateway');
    expect(demo.stdout).toBe('');
    expect(upstream.requests.map((request) => `${request.method} ${request.url}`)).toEqual([]);
  }, 60_000);
});
