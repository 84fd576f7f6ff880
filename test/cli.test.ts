// The command line as operators meet it, on the built gateway (dist/main.js) in a child process:
// --version, --help, --check (the effective config, secrets redacted, exit 0 or 2, nothing
// started), a port in use (one line naming the key and its source, exit 2), and secrets read from
// files that never reach the output, the logs or the metrics.
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { ENVIRONMENT_ALIASES, environmentVariable } from '../src/config/environment.js';
import { settableKeys } from '../src/config/schema-paths.js';
import { buildDist, ROOT, runToExit, startProcess, writeConfig, writeGatewayConfig } from './helpers/process.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from './helpers/recording-upstream.js';
import { createTestIssuer, TEST_AUDIENCE, TEST_PARTICIPANT } from './helpers/tokens.js';

const PASSWORD = 'r3dis-pa55word-from-a-file';
const HMAC_SECRET = 'hmac-secret-from-a-file-0123456789abcdef';
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

let upstream: RecordingUpstream;
beforeAll(async () => {
  buildDist();
  upstream = await startRecordingUpstream(answerJson(200, { version: '3.5.10' }));
}, 120_000);
afterAll(async () => {
  await upstream?.close();
});

/** A file beside a fresh config file (mkdtemp), e.g. a mounted secret. */
function secretFile(name: string, text: string): string {
  const path = join(writeConfig('{}'), '..', name);
  writeFileSync(path, text);
  return path;
}

/** A port some other process holds, on 127.0.0.1. */
async function heldPort(): Promise<{ port: number; release(): Promise<void> }> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    release: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('--version and --help', () => {
  it('--version prints the package version and exits 0', async () => {
    const { code, stdout, stderr } = await runToExit(['dist/main.js', '--version']);
    expect([code, stdout, stderr]).toEqual([0, `ledger-gateway ${VERSION}\n`, '']);
  });

  it("--help lists every environment variable read: each key's, the short names, the process's, OTEL_*", async () => {
    const { code, stdout } = await runToExit(['dist/main.js', '--help']);
    expect(code).toBe(0);
    const listed = new Set(stdout.match(/\b(?:LEDGER_GATEWAY|OTEL)_[A-Z\d_]+/g));
    for (const { path } of settableKeys())
      expect(listed, environmentVariable(path)).toContain(environmentVariable(path));
    for (const { variable } of ENVIRONMENT_ALIASES) expect(listed).toContain(variable);
    // Every variable the source reads by name (env.NAME, process.env.NAME) is listed.
    const sources = (dir: string): string[] =>
      readdirSync(dir).flatMap((name) => {
        const path = join(dir, name);
        return statSync(path).isDirectory() ? sources(path) : path.endsWith('.ts') ? [path] : [];
      });
    const read = new Set(
      sources(join(ROOT, 'src')).flatMap((file) =>
        [...readFileSync(file, 'utf8').matchAll(/\benv\.([A-Z][A-Z\d_]+)/g)].map((match) => match[1]!),
      ),
    );
    expect(read.size).toBeGreaterThan(5);
    for (const variable of read) expect(listed, variable).toContain(variable);
  });

  it('refuses an unknown option with exit 2', async () => {
    const { code, stderr } = await runToExit(['dist/main.js', '--chek']);
    expect(code).toBe(2);
    expect(stderr).toContain("ledger-gateway: Unknown option '--chek'");
  });
});

describe('--check', () => {
  it('prints the effective config, secrets redacted, variables marked; exits 0 and starts nothing', async () => {
    const held = await heldPort(); // --check must not listen: a port in use changes nothing
    const password = secretFile('redis-password', `${PASSWORD}\n`);
    const hmac = secretFile('hmac-secret', HMAC_SECRET);
    const file = writeConfig(
      [
        `upstream: { url: "${upstream.url}" }`,
        'auth:',
        '  unsafeAllowHmacWithParticipant: true',
        '  issuers:',
        `    - { issuer: "https://idp.example", jwksUrl: "${upstream.url}/jwks" }`,
        `    - { issuer: "urn:dev", unsafeHmacSecret: "\${file:${hmac}}" }`,
        `protection: { redis: { url: "redis://:\${file:${password}}@redis.internal:6379" } }`,
      ].join('\n'),
    );
    try {
      const before = upstream.requests.length;
      const { code, stdout, stderr } = await runToExit(['dist/main.js', '--check', '--config', file], {
        LEDGER_GATEWAY_PORT: String(held.port),
        LEDGER_GATEWAY_LOG__LEVEL: 'warn',
      });
      expect(code, stderr).toBe(0);
      expect(stderr).toContain(`ledger-gateway: the configuration is valid (${file})`);
      expect(stderr).toContain('ledger-gateway: note: UNSAFE: auth.unsafeAllowHmacWithParticipant is on');
      const effective = parseYaml(stdout) as {
        server: { port: number };
        log: { level: string };
        protection: { redis: { url: string } };
        auth: { issuers: Array<Record<string, string>> };
      };
      expect(effective.server.port).toBe(held.port);
      expect(effective.log.level).toBe('warn');
      expect(effective.protection.redis.url).toBe('redis://REDACTED@redis.internal:6379');
      expect(effective.auth.issuers[1]!.unsafeHmacSecret).toBe('REDACTED');
      expect(stdout).toContain(`port: ${held.port} # LEDGER_GATEWAY_PORT\n`);
      expect(stdout).toContain('level: warn # LEDGER_GATEWAY_LOG__LEVEL\n');
      for (const secret of [PASSWORD, HMAC_SECRET]) expect(stdout + stderr).not.toContain(secret);
      expect(upstream.requests.length).toBe(before); // neither the participant nor the JWKS URL was called
    } finally {
      await held.release();
    }
  });

  it('names every problem of every section in one run with exit 2, each key spelled one way', async () => {
    // Independent problems of six sections: the schema's (server, auth, log), a value's (upstream), the
    // protection's and the policy's (operation names).
    const later = writeConfig(
      [
        'server: { prot: 8080 }',
        'log: { level: loud }',
        'upstream: { url: "participant:7575" }',
        'auth: { issuers: [{ issuer: "https://idp.example", publicKeyFile: "/nonexistent/idp.pem", audiance: x }] }',
        'protection: { operations: { noSuchOperation: { maxInFlight: 1 } } }',
        'policy: { rules: { noSuchOperation: [{ anyAuthenticated: true }] } }',
      ].join('\n'),
    );
    const third = await runToExit(['dist/main.js', '--check', '--config', later]);
    expect(third.code).toBe(2);
    expect(third.stdout).toBe('');
    const problems = third.stderr.split('\n').filter((line) => line.startsWith('  - '));
    expect(problems).toEqual([
      '  - server.prot: unknown key; did you mean `port`?',
      '  - log.level: must be one of fatal, error, warn, info, debug, trace, silent',
      '  - auth.issuers[0].audiance: unknown key; did you mean `audience`?',
      '  - upstream.url: participant:7575 has no scheme: add http:// or https://, e.g. http://participant:7575',
      expect.stringMatching(/^ {2}- protection\.operations\.noSuchOperation: unknown operation name/),
      expect.stringMatching(/^ {2}- policy\.rules\.noSuchOperation: unknown operation/),
    ]);
    // The auth section is judged once its own keys are sound: fixing the typo shows its key file next.
    const fixed = writeConfig(
      [
        'upstream: { url: "http://127.0.0.1:1" }',
        'auth: { issuers: [{ issuer: "https://idp.example", publicKeyFile: "/nonexistent/idp.pem" }] }',
        'policy: { rules: { noSuchOperation: [{ anyAuthenticated: true }] } }',
      ].join('\n'),
    );
    const next = await runToExit(['dist/main.js', '--check', '--config', fixed]);
    expect(next.stderr).toMatch(
      new RegExp(
        `^ledger-gateway: invalid configuration \\(${fixed}\\):\\n` +
          '  - auth\\.issuers\\[0\\]\\.publicKeyFile: .*/nonexistent/idp\\.pem.*\\n' +
          '  - policy\\.rules\\.noSuchOperation: unknown operation',
      ),
    );
    // At start, the same problems in the same run (not only --check).
    const started = await runToExit(['dist/main.js', '--config', later]);
    expect(started.code).toBe(2);
    expect(started.stderr.split('\n').filter((line) => line.startsWith('  - '))).toHaveLength(problems.length);
    expect(third.stderr).not.toMatch(/\n\s+at /);
  });

  it("judges the environment's settings as the file's, naming the variable", async () => {
    const { code, stderr } = await runToExit(['dist/main.js', '--check'], {
      LEDGER_GATEWAY_SERVER__PORT: 'eighty',
      LEDGER_GATEWAY_PROTECTON__REDIS__URL: 'redis://redis:6379',
    });
    expect(code).toBe(2);
    expect(stderr).toBe(
      [
        'ledger-gateway: invalid configuration (defaults + environment):',
        '  - LEDGER_GATEWAY_PROTECTON__REDIS__URL: no such key protecton; ' +
          'did you mean LEDGER_GATEWAY_PROTECTION__REDIS__URL?',
        '  - LEDGER_GATEWAY_SERVER__PORT: must be an integer (sets server.port)',
        '',
      ].join('\n'),
    );
  });
});

describe('a port that cannot be listened on', () => {
  it('is one line naming the key and the variable or file that set it, exit 2, no stack trace', async () => {
    const held = await heldPort();
    const issuer = await createTestIssuer();
    try {
      const byVariable = await runToExit(
        ['dist/main.js', '--config', writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT)],
        { LEDGER_GATEWAY_PORT: String(held.port) },
      );
      expect(byVariable.code).toBe(2);
      expect(byVariable.stderr).toBe(
        `ledger-gateway: server.port: the API listener cannot listen on 127.0.0.1:${held.port}: ` +
          'the port is already in use (set by LEDGER_GATEWAY_PORT)\n',
      );

      const file = writeConfig(
        [
          `auth: { participantId: ${TEST_PARTICIPANT}, issuers: [${JSON.stringify(issuer.issuerConfig)}] }`,
          `upstream: { url: "${upstream.url}" }`,
          'server: { host: 127.0.0.1, port: 0 }',
          `admin: { host: 127.0.0.1, port: ${held.port} }`,
        ].join('\n'),
      );
      const byFile = await runToExit(['dist/main.js', '--config', file]);
      expect(byFile.code).toBe(2);
      expect(byFile.stderr).toBe(
        `ledger-gateway: admin.port: the admin listener cannot listen on 127.0.0.1:${held.port}: ` +
          `the port is already in use (set in ${file})\n`,
      );
    } finally {
      await held.release();
    }
  }, 60_000); // three process starts, each seconds long on a loaded machine
});

describe('secrets from files', () => {
  it('are used, and never written to the output, the logs or the metrics', async () => {
    const closed = await heldPort(); // a Redis that never answers: failMode open logs the store failing
    await closed.release();
    const password = secretFile('redis-password', `${PASSWORD}\n`);
    const hmac = secretFile('hmac-secret', `${HMAC_SECRET}\n`);
    const issuer = await createTestIssuer();
    const file = writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT, [
      'protection:',
      `  redis: { url: "redis://:\${file:${password}}@127.0.0.1:${closed.port}",`,
      '           connectTimeoutMs: 200, commandTimeoutMs: 100 }',
      '  default: { rate: { requests: 100, perSeconds: 1 } }',
    ]);
    const gateway = await startProcess(['dist/main.js', '--config', file], {
      // The HMAC issuer comes from the environment, its secret from a file.
      LEDGER_GATEWAY_AUTH__ISSUERS: JSON.stringify([
        issuer.issuerConfig,
        { issuer: 'urn:dev-hmac', unsafeHmacSecret: `\${file:${hmac}}` },
      ]),
      LEDGER_GATEWAY_AUTH__UNSAFE_ALLOW_HMAC_WITH_PARTICIPANT: 'true',
    });
    try {
      const now = Math.floor(Date.now() / 1000);
      const token = await new SignJWT({
        iss: 'urn:dev-hmac',
        sub: 'alice',
        aud: TEST_AUDIENCE,
        iat: now,
        exp: now + 120,
      })
        .setProtectedHeader({ alg: 'HS256' })
        .sign(new TextEncoder().encode(HMAC_SECRET));
      const answer = await fetch(`${gateway.api}/v2/version`, { headers: { authorization: `Bearer ${token}` } });
      expect(answer.status).toBe(200); // the secret read from the file verifies the token
      await answer.arrayBuffer();
      const metrics = await (await fetch(`${gateway.admin}/metrics`)).text();
      expect(metrics).toContain('ledger_gateway_protection_store_failures_total');
      await expect
        .poll(() => gateway.output.some((line) => line.includes('"msg":"request"')), { timeout: 5_000 })
        .toBe(true);
      const everything = gateway.output.join('\n') + metrics;
      for (const secret of [PASSWORD, HMAC_SECRET]) expect(everything).not.toContain(secret);
    } finally {
      gateway.child.kill('SIGTERM');
      await gateway.exited;
    }
  });
});
