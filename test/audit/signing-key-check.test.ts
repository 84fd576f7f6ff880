// `--check` judges audit.signingKeyFile as start-up would use it (missing, unreadable, not an Ed25519
// private key: refused with the key's path and a one-line reason, exit 2), and a gateway started with
// such a key stops with that one line and exit 2, never a stack trace.
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, runToExit, writeConfig } from '../helpers/process.js';
import { keyFiles, trailDirectory } from './support.js';

beforeAll(() => buildDist());

const dir = mkdtempSync(join(tmpdir(), 'audit-keys-'));
const rsaKey = join(dir, 'rsa.pem');
writeFileSync(
  rsaKey,
  generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }),
);
const notPem = join(dir, 'not.pem');
writeFileSync(notPem, 'not a key at all\n');
const missing = join(dir, 'missing.pem');

/** A config in front of the sandbox (no issuer needed) with the trail on and `signingKeyFile`. */
const configWith = (signingKeyFile: string) =>
  writeConfig(
    [
      'upstream: { url: sandbox }',
      'server: { host: 127.0.0.1, port: 0 }',
      'admin: { host: 127.0.0.1, port: 0 }',
      `audit: { enabled: true, directory: "${trailDirectory()}", signingKeyFile: "${signingKeyFile}" }`,
    ].join('\n'),
  );

const cases: Array<[string, string, string]> = [
  ['missing', missing, `audit.signingKeyFile: cannot read ${missing} (no such file)`],
  ['not a PEM key', notPem, `audit.signingKeyFile: ${notPem} is not a PEM private key`],
  ['an RSA key', rsaKey, `audit.signingKeyFile: ${rsaKey} is an rsa key, not Ed25519`],
];

describe('audit.signingKeyFile', { timeout: 120_000 }, () => {
  it.each(cases)('%s: --check refuses it with its path and a one-line reason, exit 2', async (_name, file, reason) => {
    const result = await runToExit(['dist/main.js', '--check', '--config', configWith(file)], {}, 60_000);
    expect(result.code).toBe(2);
    expect(result.stderr.split('\n').filter((line) => line.includes('signingKeyFile'))).toEqual([`  - ${reason}`]);
  });

  it.each(cases)(
    '%s: a gateway started with it stops with that line and exit 2, no stack trace',
    async (_name, file, reason) => {
      const result = await runToExit(['dist/main.js', '--config', configWith(file)], {}, 60_000);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(reason);
      expect(result.stderr).not.toMatch(/^\s+at /m);
    },
  );

  it('unreadable (a directory): refused with its path', async () => {
    const result = await runToExit(['dist/main.js', '--check', '--config', configWith(dir)], {}, 60_000);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`audit.signingKeyFile: cannot read ${dir} (EISDIR)`);
  });

  it('a good Ed25519 key passes; no key at all is a note (the trail unsigned)', async () => {
    const good = await runToExit(
      ['dist/main.js', '--check', '--config', configWith(keyFiles().privateKeyFile)],
      {},
      60_000,
    );
    expect(good.code).toBe(0);
    const unsigned = writeConfig(
      ['upstream: { url: sandbox }', `audit: { enabled: true, directory: "${trailDirectory()}" }`].join('\n'),
    );
    const noted = await runToExit(['dist/main.js', '--check', '--config', unsigned], {}, 60_000);
    expect(noted.code).toBe(0);
    expect(noted.stderr).toContain('note: audit.signingKeyFile is not set: the trail is hash-chained but not signed');
  });
});
