// Live configuration (live/reload.ts, live/generations.ts): a reload swaps rules, issuers and the log
// level while calls are in flight; an invalid file or unreachable keys change nothing; keys that
// need a restart are named; a ConfigMap-style symlink swap is seen; metrics carry the fingerprint.
import { lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { watchConfigFile } from '../../src/live/reload.js';
import { loadConfig } from '../../src/config/load.js';
import { gauge, startGateway, type RunningGateway } from '../helpers/gateway.js';
import { writeKubeletVolume } from '../helpers/kubelet-volume.js';
import { logCapture } from '../helpers/log-capture.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT, type TestIssuer } from '../helpers/tokens.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { eventually } from '../helpers/eventually.js';

const OPERATION = 'getV2StateLedger-end';
const ALLOW_ALICE = { [OPERATION]: [{ subjects: ['alice'] }] };
const DENY_ALICE = { [OPERATION]: [{ effect: 'deny', subjects: ['alice'] }, { anyAuthenticated: true }] };

let upstream: RecordingUpstream | undefined;
let running: RunningGateway | undefined;
closeAfterEach(
  () => running,
  () => upstream,
);

/** A YAML file the gateway could start from, with these policy rules (and more sections). */
function configFile(directory: string, url: string, issuer: TestIssuer, rules: object, extra: string[] = []): string {
  const file = join(directory, 'gateway.yaml');
  writeFileSync(
    file,
    [
      `auth: { participantId: ${TEST_PARTICIPANT}, issuers: [${JSON.stringify(issuer.issuerConfig)}] }`,
      `upstream: { url: "${url}" }`,
      'server: { host: 127.0.0.1, port: 0 }',
      'admin: { host: 127.0.0.1, port: 0 }',
      'log: { level: info }',
      `policy: { rules: ${JSON.stringify(rules)} }`,
      ...extra,
    ].join('\n'),
  );
  return file;
}

async function started(rules: object) {
  upstream = await startRecordingUpstream(answerJson(200, { offset: 7 }));
  const log = logCapture('info');
  const issuer = await createTestIssuer();
  running = await startGateway(
    upstream.url,
    {
      auth: { issuers: [issuer.issuerConfig], participantId: TEST_PARTICIPANT },
      policy: { rules },
    },
    { logger: log.logger },
  );
  const token = await issuer.mint({ sub: 'alice' });
  const call = () => fetch(`${running!.url}/v2/state/ledger-end`, { headers: { authorization: `Bearer ${token}` } });
  return { gateway: running, upstream, log, issuer, call, directory: mkdtempSync(join(tmpdir(), 'gateway-reload-')) };
}

describe('configuration reload', () => {
  it('under load, every call gets the old or the new decision, none fails or is lost, and then only the new one', async () => {
    const { gateway, upstream: participant, issuer, call, directory } = await started(ALLOW_ALICE);
    const file = configFile(directory, participant.url, issuer, DENY_ALICE);
    const statuses: number[] = [];
    const afterReload: number[] = [];
    const failures: unknown[] = [];
    let sent = 0;
    let reloaded = false;
    const client = async () => {
      const until = Date.now() + 2_000;
      while (Date.now() < until) {
        sent++;
        const startedAfterReload = reloaded;
        try {
          const answer = await call();
          await answer.arrayBuffer();
          statuses.push(answer.status);
          if (startedAfterReload) afterReload.push(answer.status);
        } catch (error) {
          failures.push(error);
        }
      }
    };
    const clients = Array.from({ length: 4 }, client);
    await eventually(() => participant.requests.length >= 8, 'the clients have had calls answered before the reload');
    const outcome = await gateway.gateway.reload(() => loadConfig(file), 'test');
    reloaded = true;
    await Promise.all(clients);

    expect(reloaded).toBe(true);
    expect(outcome).toMatchObject({ result: 'success', restartRequired: [], problems: [] });
    expect(failures).toEqual([]);
    expect(statuses.length).toBe(sent);
    expect(new Set(statuses)).toEqual(new Set([200, 403]));
    // A call that starts once the reload is done never gets the old decision.
    expect(afterReload.length).toBeGreaterThan(0);
    expect(new Set(afterReload)).toEqual(new Set([403]));
    expect((await call()).status).toBe(403);
  }, 20_000);

  it('keeps the running configuration when the file is invalid, naming every bad key path', async () => {
    const { gateway, upstream: participant, issuer, call, log, directory } = await started(ALLOW_ALICE);
    const before = gateway.gateway.fingerprint;
    const file = configFile(directory, participant.url, issuer, { [OPERATION]: [{ role: 'admin' }] }, [
      'protection: { maxInFlight: -1 }',
    ]);
    const outcome = await gateway.gateway.reload(() => loadConfig(file), 'test');

    expect(outcome.result).toBe('invalid');
    expect(outcome.problems.join('\n')).toMatch(/policy\.rules\.getV2StateLedger-end\[0\]\.role: unknown key/);
    expect(outcome.problems.join('\n')).toMatch(/protection\.maxInFlight/);
    expect(gateway.gateway.fingerprint).toBe(before);
    expect((await call()).status).toBe(200);
    const logged = log.entries().find((entry) => String(entry.msg).includes('invalid configuration'));
    expect(logged).toMatchObject({ level: 'error', trigger: 'test', fingerprint: before });
    expect(await gauge(gateway, 'ledger_gateway_config_reloads_total', { result: 'invalid' })).toBe(1);
    expect(await gauge(gateway, 'ledger_gateway_config_info', { fingerprint: before })).toBe(1);
  });

  it('changes the fingerprint and its metrics with each successful reload, and applies the log level', async () => {
    const { gateway, upstream: participant, issuer, directory } = await started(ALLOW_ALICE);
    const first = gateway.gateway.fingerprint;
    const file = configFile(directory, participant.url, issuer, DENY_ALICE);
    const denied = await gateway.gateway.reload(() => loadConfig(file), 'test');
    expect(denied.fingerprint).not.toBe(first);
    expect(gateway.gateway.fingerprint).toBe(denied.fingerprint);
    const again = await gateway.gateway.reload(() => loadConfig(file), 'test');
    expect(again.fingerprint).toBe(denied.fingerprint); // the same file: the same fingerprint
    writeFileSync(file, readWith(file, 'log: { level: info }', 'log: { level: warn }'));
    const third = await gateway.gateway.reload(() => loadConfig(file), 'test');
    expect(third.fingerprint).not.toBe(denied.fingerprint);
    expect(gateway.gateway.log.level).toBe('warn');

    expect(await gauge(gateway, 'ledger_gateway_config_reloads_total', { result: 'success' })).toBe(3);
    expect(await gauge(gateway, 'ledger_gateway_config_info', { fingerprint: third.fingerprint })).toBe(1);
    expect(await gauge(gateway, 'ledger_gateway_config_info', { fingerprint: first })).toBe(0);
  });

  it('names the keys that need a restart in one log line, and leaves them as they run', async () => {
    const { gateway, upstream: participant, issuer, log, directory, call } = await started(ALLOW_ALICE);
    const file = configFile(directory, participant.url, issuer, DENY_ALICE);
    writeFileSync(
      file,
      readWith(file, 'server: { host: 127.0.0.1, port: 0 }', 'server: { host: 127.0.0.1, port: 1 }') +
        '\nprotection: { redis: { url: "redis://127.0.0.1:1" } }',
    );
    const outcome = await gateway.gateway.reload(() => loadConfig(file), 'test');

    expect(outcome.result).toBe('success');
    expect(outcome.restartRequired).toEqual(['server.port', 'protection.redis.url']);
    const warned = log.entries().filter((entry) => String(entry.msg).includes('change only on a restart'));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 'warn', keys: ['server.port', 'protection.redis.url'] });
    // The live part applied; the listener still answers where it listened.
    expect((await call()).status).toBe(403);
    expect(await gauge(gateway, 'ledger_gateway_config_restart_required')).toBe(2);
    // The file put back as it runs: nothing waits for a restart any more.
    writeFileSync(file, readWith(file, 'server: { host: 127.0.0.1, port: 1 }', 'server: { host: 127.0.0.1, port: 0 }'));
    writeFileSync(file, readWith(file, 'protection: { redis: { url: "redis://127.0.0.1:1" } }', ''));
    expect((await gateway.gateway.reload(() => loadConfig(file), 'test')).restartRequired).toEqual([]);
    expect(await gauge(gateway, 'ledger_gateway_config_restart_required')).toBe(0);
  });

  it('applies a new unauthenticated budget to the next calls', async () => {
    upstream = await startRecordingUpstream(answerJson(200, { offset: 7 }));
    const issuer = await createTestIssuer();
    running = await startGateway(upstream.url, {
      auth: { issuers: [issuer.issuerConfig], participantId: TEST_PARTICIPANT },
      protection: { unauthenticated: { rate: null } },
    });
    const bad = `${(await issuer.mint({ sub: 'mallory' })).slice(0, -4)}AAAA`;
    const call = async () => {
      const answer = await fetch(`${running!.url}/v2/state/ledger-end`, {
        headers: { authorization: `Bearer ${bad}` },
      });
      await answer.arrayBuffer();
      return answer.status;
    };
    expect([await call(), await call(), await call()]).toEqual([401, 401, 401]);

    const directory = mkdtempSync(join(tmpdir(), 'gateway-reload-'));
    const file = configFile(directory, upstream.url, issuer, {}, [
      'protection: { unauthenticated: { rate: { requests: 1, perSeconds: 60, burst: 2 }, refusalDelayMs: 0 },' +
        ' connections: { maxPerAddress: 5 } }', // live as well (test/protection/connections.test.ts)
    ]);
    const outcome = await running.gateway.reload(() => loadConfig(file), 'test');

    expect(outcome.result).toBe('success');
    expect(outcome.restartRequired).toEqual([]);
    expect([await call(), await call(), await call()]).toEqual([401, 401, 429]);
  });

  it("refuses a reload whose new issuer's keys cannot be fetched, and keeps serving with the old issuers", async () => {
    const { gateway, upstream: participant, issuer, call, directory } = await started(ALLOW_ALICE);
    const before = gateway.gateway.fingerprint;
    const file = join(directory, 'gateway.yaml');
    const unreachable = { issuer: 'https://gone.test', jwksUrl: 'http://127.0.0.1:1/jwks' };
    writeFileSync(
      file,
      [
        `auth: { participantId: ${TEST_PARTICIPANT}, keySets: { fetchTimeoutMs: 300 }, issuers: [${JSON.stringify(issuer.issuerConfig)}, ${JSON.stringify(unreachable)}] }`,
        `upstream: { url: "${participant.url}" }`,
        'server: { host: 127.0.0.1, port: 0 }',
        'admin: { host: 127.0.0.1, port: 0 }',
      ].join('\n'),
    );
    const outcome = await gateway.gateway.reload(() => loadConfig(file), 'test');

    expect(outcome.result).toBe('refused');
    expect(outcome.problems.join('\n')).toMatch(/https:\/\/gone\.test/);
    expect(gateway.gateway.fingerprint).toBe(before);
    expect((await call()).status).toBe(200);
    expect(await gauge(gateway, 'ledger_gateway_config_reloads_total', { result: 'refused' })).toBe(1);
  });

  it("accepts a new issuer's tokens after a reload, without a restart", async () => {
    const { gateway, upstream: participant, issuer, directory } = await started({});
    const newcomer = await createTestIssuer('https://newcomer.test', 'new-key');
    const token = await newcomer.mint({ sub: 'carol' });
    const call = () => fetch(`${gateway.url}/v2/state/ledger-end`, { headers: { authorization: `Bearer ${token}` } });
    expect((await call()).status).toBe(401);
    const file = join(directory, 'gateway.yaml');
    writeFileSync(
      file,
      [
        `auth: { participantId: ${TEST_PARTICIPANT}, issuers: [${JSON.stringify(issuer.issuerConfig)}, ${JSON.stringify(newcomer.issuerConfig)}] }`,
        `upstream: { url: "${participant.url}" }`,
        'server: { host: 127.0.0.1, port: 0 }',
        'admin: { host: 127.0.0.1, port: 0 }',
      ].join('\n'),
    );
    expect((await gateway.gateway.reload(() => loadConfig(file), 'test')).result).toBe('success');
    expect((await call()).status).toBe(200);
  });
});

function readWith(file: string, from: string, to: string): string {
  const text = readFileSync(file, 'utf8');
  if (!text.includes(from)) throw new Error(`${from} is not in ${file}`);
  return text.replace(from, to);
}

describe('watching the config file', () => {
  it('sees a Kubernetes ConfigMap update: the kubelet swaps the ..data symlink, the file is never written', async () => {
    // The layout of deploy/kubernetes: the ConfigMap mounted as a directory, --config <dir>/config.yaml.
    const volume = join(mkdtempSync(join(tmpdir(), 'configmap-')), 'config');
    writeKubeletVolume(volume, { 'config.yaml': 'log: { level: info }\n' });
    const file = join(volume, 'config.yaml');
    expect(lstatSync(file).isSymbolicLink()).toBe(true);
    expect(readlinkSync(file)).toBe('..data/config.yaml');
    const [before] = readdirSync(volume).filter((name) => /^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$/.test(name));
    expect(readlinkSync(join(volume, '..data'))).toBe(before);
    let changes = 0;
    const watch = watchConfigFile(file, () => changes++, { debounceMs: 50 });
    try {
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(changes).toBe(0);
      writeKubeletVolume(volume, { 'config.yaml': 'log: { level: warn }\n' });
      expect(readlinkSync(join(volume, '..data'))).not.toBe(before);
      expect(readdirSync(volume)).not.toContain(before); // the old timestamped directory is gone
      await expect.poll(() => changes, { timeout: 3_000, interval: 20 }).toBe(1); // debounced: one call for the swap
      expect(loadConfig(file).log.level).toBe('warn');
    } finally {
      watch.close();
    }
  });
});
