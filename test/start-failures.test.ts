// Every way the built process can fail to start is reported alike (issue 40 §6): on stderr, in the
// gateway's own words (no stack trace), exit 2; and --check names every file the configuration
// names that cannot be read, in one run, as the start would.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDist, runToExit, writeConfig } from './helpers/process.js';
import { createTestIssuer } from './helpers/tokens.js';

beforeAll(() => buildDist(), 120_000);

const fixture = (name: string) => new URL(`./proxy/fixtures/${name}`, import.meta.url).pathname;
const directory = mkdtempSync(join(tmpdir(), 'start-failures-'));
const UPSTREAM = 'upstream: { url: "http://127.0.0.1:7575" }';
const LISTENERS = 'server: { host: 127.0.0.1, port: 0 }\nadmin: { host: 127.0.0.1, port: 0 }';

let occupied: net.Server | undefined;
afterAll(() => occupied?.close());

async function issuerLine(): Promise<string> {
  const issuer = await createTestIssuer();
  return `auth: { participantId: participant1, issuers: [${JSON.stringify(issuer.issuerConfig)}] }`;
}

/** The failure's output: every line the gateway's own, none a stack frame. */
function expectOwnWords(stderr: string): void {
  const lines = stderr.split('\n').filter((line) => line !== '');
  expect(lines.length).toBeGreaterThan(0);
  expect(lines[0]).toMatch(/^ledger-gateway: /);
  expect(stderr).not.toMatch(/^\s+at /m);
  expect(stderr).not.toMatch(/\.js:\d+:\d+/);
}

describe('a start that fails', () => {
  it.each([
    ['a file that is not YAML', async () => ({ config: writeConfig('server: [\n') })],
    [
      'an unreadable key file (a directory)',
      async () => {
        const keyDirectory = join(directory, 'key-is-a-directory');
        mkdirSync(keyDirectory, { recursive: true });
        return {
          config: writeConfig(
            [await issuerLine(), UPSTREAM, 'admin: { host: 127.0.0.1, port: 0 }'].join('\n') +
              `\nserver: { host: 127.0.0.1, port: 0, tls: { certFile: ${fixture('test-participant.pem')}, keyFile: ${keyDirectory} } }`,
          ),
        };
      },
    ],
    [
      'a TLS file that is not PEM',
      async () => {
        const garbage = join(directory, 'garbage.pem');
        writeFileSync(garbage, 'not a certificate\n');
        return {
          config: writeConfig(
            [await issuerLine(), UPSTREAM, 'admin: { host: 127.0.0.1, port: 0 }'].join('\n') +
              `\nserver: { host: 127.0.0.1, port: 0, tls: { certFile: ${garbage}, keyFile: ${garbage} } }`,
          ),
        };
      },
    ],
    [
      'a port in use',
      async () => {
        occupied = net.createServer();
        await new Promise<void>((resolve) => occupied!.listen(0, '127.0.0.1', resolve));
        const { port } = occupied.address() as net.AddressInfo;
        return {
          config: writeConfig(
            [
              await issuerLine(),
              UPSTREAM,
              `server: { host: 127.0.0.1, port: ${port} }`,
              'admin: { host: 127.0.0.1, port: 0 }',
            ].join('\n'),
          ),
        };
      },
    ],
    [
      'a development key directory that cannot be written',
      async () => ({
        config: writeConfig(`${LISTENERS}\nupstream: { url: sandbox }`),
        env: { LEDGER_GATEWAY_DEV_DIR: '/etc/hostname/not-a-directory' },
      }),
    ],
    [
      'an audit signing key that does not exist',
      async () => ({
        config: writeConfig(
          [
            await issuerLine(),
            UPSTREAM,
            LISTENERS,
            `audit: { enabled: true, directory: ${join(directory, 'trail')}, signingKeyFile: ${join(directory, 'no-such-key.pem')} }`,
          ].join('\n'),
        ),
      }),
    ],
  ])(
    "with %s: the gateway's own words on stderr, no stack trace, exit 2",
    async (_kind, setUp) => {
      const { config, env } = (await setUp()) as { config: string; env?: NodeJS.ProcessEnv };
      const { code, stderr } = await runToExit(['dist/main.js', '--config', config], env ?? {}, 30_000);
      expect(code).toBe(2);
      expectOwnWords(stderr);
    },
    40_000,
  );
});

describe('--check', () => {
  it('names every file the configuration names that cannot be read, in one run', async () => {
    const issuer = await createTestIssuer();
    const missing = (name: string) => join(directory, 'missing', name);
    const config = writeConfig(
      [
        `auth:`,
        `  participantId: participant1`,
        `  issuers:`,
        `    - ${JSON.stringify(issuer.issuerConfig)}`,
        `    - { issuer: "https://other.example", publicKeyFile: ${missing('issuer.pem')} }`,
        `  participantIdentityProviders: { enabled: true, tokenFile: ${missing('admin-token')} }`,
        `upstream: { url: "https://127.0.0.1:7575", tls: { caFile: ${missing('ca.pem')} } }`,
        `server: { tls: { certFile: ${missing('tls.crt')}, keyFile: ${missing('tls.key')} } }`,
      ].join('\n'),
    );
    const { code, stderr } = await runToExit(['dist/main.js', '--check', '--config', config]);
    expect(code).toBe(2);
    expectOwnWords(stderr);
    for (const key of [
      'server.tls.certFile',
      'upstream.tls.caFile',
      'auth.issuers[1].publicKeyFile',
      'auth.participantIdentityProviders.tokenFile',
    ])
      expect(stderr).toContain(`  - ${key}: `);
  }, 30_000);
});
