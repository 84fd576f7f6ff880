// What a reload of the config file may never do (issue 32 §3), on the built process: apply a
// half-written file, switch a gateway in front of a participant to the development issuer, die on a
// hostile file, print a value read with ${file:...}, or log one outcome in another's words.
import { closeSync, mkdtempSync, openSync, readdirSync, renameSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { closeAfterEach } from '../helpers/per-test.js';
import { OUTCOME_MESSAGES } from '../../src/live/reload.js';
import { buildDist, startProcess, type GatewayProcess } from '../helpers/process.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT, type TestIssuer } from '../helpers/tokens.js';

beforeAll(() => buildDist(), 120_000);

/** Each test starts a process and waits for reloads (a second look takes 2 s): bounded, with room on a loaded machine. */
const TEST_MS = 60_000;

const OPERATION = 'getV2StateLedger-end';
const DENY_ALICE = { [OPERATION]: [{ effect: 'deny', subjects: ['alice'] }, { anyAuthenticated: true }] };

let upstream: RecordingUpstream | undefined;
let gateway: GatewayProcess | undefined;
closeAfterEach(
  () => gateway,
  () => upstream,
);

/** The lines of a config a gateway in front of `url` starts from, its policy last (as a slow writer writes it last). */
function configLines(url: string, issuer: TestIssuer, extra: string[] = []): string[] {
  return [
    `auth: { participantId: ${TEST_PARTICIPANT}, issuers: [${JSON.stringify(issuer.issuerConfig)}] }\n`,
    `upstream: { url: "${url}" }\n`,
    'server: { host: 127.0.0.1, port: 0 }\n',
    'admin: { host: 127.0.0.1, port: 0 }\n',
    'log: { level: info }\n',
    ...extra,
    `policy: { rules: ${JSON.stringify(DENY_ALICE)} }\n`,
  ];
}

/** Replaces the file whole (a rename, as an editor or the kubelet does). */
function replace(file: string, text: string | Buffer): void {
  const next = `${file}.next`;
  writeFileSync(next, text);
  renameSync(next, file);
}

async function started(env: NodeJS.ProcessEnv = {}) {
  upstream = await startRecordingUpstream(answerJson(200, { offset: 7 }));
  const issuer = await createTestIssuer();
  const directory = mkdtempSync(join(tmpdir(), 'reload-safety-'));
  const file = join(directory, 'gateway.yaml');
  writeFileSync(file, configLines(upstream.url, issuer).join(''));
  gateway = await startProcess(['dist/main.js', '--config', file], env, 30_000);
  const running = gateway;
  const call = async (sub: string) => {
    const answer = await fetch(`${running.api}/v2/state/ledger-end`, {
      headers: { authorization: `Bearer ${await issuer.mint({ sub })}` },
    });
    await answer.arrayBuffer();
    return answer.status;
  };
  const lines = () =>
    running.output.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
  const logged = (message: string) => lines().filter((line) => line.msg === message);
  return { gateway: running, upstream, issuer, file, directory, call, lines, logged };
}

describe('a file written in place, in several writes with pauses', () => {
  it(
    'is applied only once complete: a denied user is never let through while it is being written',
    async () => {
      const { issuer, file, call, logged, upstream: participant } = await started();
      expect(await call('alice')).toBe(403);
      const complete = configLines(participant.url, issuer, ['protection: { maxInFlight: 500 }\n']);
      // As `cat > file` or `rsync --inplace` write it: truncated, then written in pieces, each pause
      // longer than the watch's settling, the policy last.
      const pieces = [complete.slice(0, 2), complete.slice(2, 4), complete.slice(4, 6), complete.slice(6)];
      const statuses: number[] = [];
      let writing = true;
      const client = (async () => {
        while (writing) statuses.push(await call('alice'));
      })();
      try {
        const descriptor = openSync(file, 'w');
        for (const [index, piece] of pieces.entries()) {
          writeSync(descriptor, piece.join(''));
          if (index < pieces.length - 1) await new Promise((resolve) => setTimeout(resolve, 800));
        }
        closeSync(descriptor);
        await expect
          .poll(() => logged('configuration reloaded').length, { timeout: 10_000, interval: 50 })
          .toBeGreaterThan(0);
      } finally {
        writing = false;
        await client.catch(() => undefined);
      }
      // One reload: the complete file's (a prefix applied would be one more, and would have let alice through).
      expect(logged('configuration reloaded')).toHaveLength(1);
      expect(statuses.length).toBeGreaterThan(10);
      expect(statuses.filter((status) => status !== 403)).toEqual([]);
      expect(participant.requests.filter((request) => request.url.includes('ledger-end'))).toEqual([]);
      expect(await call('alice')).toBe(403);
      expect(await call('bob')).toBe(200);
      // The prefixes were seen and held for a second look, never applied nor refused.
      expect(
        logged(
          'configuration reload: the file drops keys the running configuration has; it is read again once unchanged',
        ).length,
      ).toBeGreaterThan(0);
      expect(logged(OUTCOME_MESSAGES.invalid)).toEqual([]);
    },
    TEST_MS,
  );
});

describe('a file that names no issuer, in front of a participant', () => {
  it(
    'is refused (an empty file, one with log: only): the issuer keeps working and no development key is made',
    async () => {
      const devDir = mkdtempSync(join(tmpdir(), 'reload-dev-dir-'));
      const { gateway: process, file, call, logged } = await started({ LEDGER_GATEWAY_DEV_DIR: devDir });
      // The empty file, by the watch: held for a second look (it drops every section), then refused.
      replace(file, '');
      await expect.poll(() => logged(OUTCOME_MESSAGES.refused).length, { timeout: 10_000, interval: 50 }).toBe(1);
      // The log-only file, by SIGHUP (the operator's own look): refused at once.
      replace(file, 'log: { level: info }\n');
      process.child.kill('SIGHUP');
      await expect.poll(() => logged(OUTCOME_MESSAGES.refused).length, { timeout: 10_000, interval: 50 }).toBe(2);
      for (const line of logged(OUTCOME_MESSAGES.refused))
        expect(line.problems).toEqual([expect.stringMatching(/^auth\.issuers: the file names no issuer/)]);
      expect(logged('configuration reloaded')).toEqual([]);
      expect(await call('bob')).toBe(200);
      expect(await call('alice')).toBe(403);
      expect(readdirSync(devDir)).toEqual([]);
      const metrics = await (await fetch(`${process.admin}/metrics`)).text();
      expect(metrics).toMatch(/ledger_gateway_config_reloads_total\{result="refused"\} 2/);
    },
    TEST_MS,
  );
});

describe('a hostile file', () => {
  it(
    '1 MiB of nested [ and a file over 1 MiB are refused before parsing; the process keeps serving',
    async () => {
      const { gateway: process, file, call, logged, issuer, upstream: participant } = await started();
      replace(file, Buffer.alloc(1024 * 1024, '['));
      await expect.poll(() => logged(OUTCOME_MESSAGES.invalid).length, { timeout: 10_000, interval: 50 }).toBe(1);
      expect(logged(OUTCOME_MESSAGES.invalid)[0]!.problems).toEqual([
        expect.stringMatching(/^the file nests \d+ levels deep; at most 32 are read$/),
      ]);
      expect(await call('bob')).toBe(200);
      // A policy of many MB (valid YAML, one operation's rules repeated).
      const rule = `    - { subjects: [${Array.from({ length: 50 }, (_, index) => `user${index}`).join(', ')}] }\n`;
      const big = [...configLines(participant.url, issuer).slice(0, -1), `policy:\n  rules:\n    ${OPERATION}:\n`];
      replace(file, big.join('') + rule.repeat(Math.ceil((3 * 1024 * 1024) / rule.length)));
      await expect.poll(() => logged(OUTCOME_MESSAGES.invalid).length, { timeout: 10_000, interval: 50 }).toBe(2);
      expect(logged(OUTCOME_MESSAGES.invalid)[1]!.problems).toEqual([
        expect.stringMatching(/^the file is larger than 1024 KiB \(\d+ bytes\)$/),
      ]);
      expect(process.child.exitCode).toBeNull();
      expect(await call('bob')).toBe(200);
      expect(await call('alice')).toBe(403);
    },
    TEST_MS,
  );

  it(
    'an unknown operation in policy.rules is logged with the invalid-configuration line, as every invalid file is',
    async () => {
      const { file, logged, issuer, upstream: participant } = await started();
      const lines = configLines(participant.url, issuer).slice(0, -1);
      replace(file, [...lines, 'policy: { rules: { noSuchOperation: [{ anyAuthenticated: true }] } }\n'].join(''));
      await expect.poll(() => logged(OUTCOME_MESSAGES.invalid).length, { timeout: 10_000, interval: 50 }).toBe(1);
      expect(logged(OUTCOME_MESSAGES.invalid)[0]!.problems).toEqual([
        expect.stringMatching(/^policy\.rules\.noSuchOperation: unknown operation/),
      ]);
      expect(logged(OUTCOME_MESSAGES.refused)).toEqual([]);
    },
    TEST_MS,
  );
});

describe('values read with ${file:...}', () => {
  const SECRETS = {
    proxy: 'proxy-secret-4b1d9e',
    url: 'participant-secret-7c2a:7575',
    ca: '/secret/ca-path-91ef.pem',
    replica: 'replica-secret-e83b:7575',
  };
  function secretFiles(): Record<keyof typeof SECRETS, string> {
    const directory = mkdtempSync(join(tmpdir(), 'file-secrets-'));
    const files = {} as Record<keyof typeof SECRETS, string>;
    for (const [name, value] of Object.entries(SECRETS)) {
      files[name as keyof typeof SECRETS] = join(directory, name);
      writeFileSync(join(directory, name), `${value}\n`);
    }
    return files;
  }
  const hostile = (files: Record<keyof typeof SECRETS, string>) => [
    `server: { host: 127.0.0.1, port: 0, trustedProxies: ["\${file:${files.proxy}}"] }\n`,
    `upstream: { url: "\${file:${files.url}}", tls: { caFile: "\${file:${files.ca}}" } }\n`,
  ];
  const leaks = (text: string) => Object.values(SECRETS).filter((secret) => text.includes(secret));

  it(
    'are never printed in the problems of a start',
    async () => {
      const files = secretFiles();
      const directory = mkdtempSync(join(tmpdir(), 'file-secrets-start-'));
      const file = join(directory, 'gateway.yaml');
      writeFileSync(
        file,
        [...hostile(files), `auth: { issuers: [{ issuer: urn:x, jwksUrl: "https://idp.example/jwks" }] }\n`].join(''),
      );
      const { runToExit } = await import('../helpers/process.js');
      const result = await runToExit(['dist/main.js', '--config', file]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('server.trustedProxies[0]:');
      expect(result.stderr).toContain('upstream.url:');
      expect(result.stderr).toContain('upstream.tls.caFile:');
      expect(leaks(result.stderr + result.stdout)).toEqual([]);
      // The replicas' problems too, and in --check.
      writeFileSync(file, `upstream: { replicas: ["\${file:${files.replica}}"] }\n`);
      const check = await runToExit(['dist/main.js', '--check', '--config', file]);
      expect(check.code).toBe(2);
      expect(check.stderr).toContain('upstream.replicas[0]:');
      expect(leaks(check.stderr + check.stdout)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'are never printed in the problems of a reload',
    async () => {
      const files = secretFiles();
      const { gateway: process, file, logged, issuer, call } = await started();
      replace(
        file,
        [
          `auth: { participantId: ${TEST_PARTICIPANT}, issuers: [${JSON.stringify(issuer.issuerConfig)}] }\n`,
          ...hostile(files),
          'admin: { host: 127.0.0.1, port: 0 }\n',
          `policy: { rules: ${JSON.stringify(DENY_ALICE)} }\n`,
        ].join(''),
      );
      await expect.poll(() => logged(OUTCOME_MESSAGES.invalid).length, { timeout: 10_000, interval: 50 }).toBe(1);
      const problems = logged(OUTCOME_MESSAGES.invalid)[0]!.problems as string[];
      expect(problems.map((problem) => problem.split(':')[0])).toEqual([
        'server.trustedProxies[0]',
        'upstream.url',
        'upstream.tls.caFile',
      ]);
      expect(leaks(process.output.join('\n'))).toEqual([]);
      expect(await call('bob')).toBe(200);
    },
    TEST_MS,
  );
});
