// Secrets outside the config file: ${file:/path} in any text value (file or environment) reads a
// mounted file; such values and the keys the schema marks secret are never printed, and a file
// that cannot be read is named without being waited on.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { effectiveConfigYaml, redactedConfig, redactSecret } from '../../src/config/effective.js';
import { ConfigError, validateConfiguration } from '../../src/config/load.js';
import { settableKeys } from '../../src/config/schema-paths.js';

const PASSWORD = 'redis-p4ssw0rd-never-shown';
const HMAC_SECRET = 'hmac-development-secret-of-32-chars-or-more';

let dir: string;
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gw-secrets-'));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const problemsOf = (raw: unknown, env: NodeJS.ProcessEnv = {}): readonly string[] => {
  try {
    validateConfiguration(raw, 'test', env);
    return [];
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
};

describe('${file:...} references', () => {
  it("take a file's contents without the trailing line break, in the file or the environment, in a value", () => {
    const password = file('redis-password', `${PASSWORD}\n`);
    const secret = file('hmac', `${HMAC_SECRET}\r\n`);
    const { config, provenance } = validateConfiguration(
      {
        protection: { redis: { url: `rediss://:\${file:${password}}@redis.internal:6380/0` } },
      },
      'test',
      {
        LEDGER_GATEWAY_AUTH__ISSUERS: JSON.stringify([{ issuer: 'urn:dev', unsafeHmacSecret: `\${file:${secret}}` }]),
      },
    );
    expect(config.protection.redis.url).toBe(`rediss://:${PASSWORD}@redis.internal:6380/0`);
    expect(config.auth.issuers[0]!.unsafeHmacSecret).toBe(HMAC_SECRET);
    expect([...provenance.fromFiles].sort()).toEqual(['auth.issuers[0].unsafeHmacSecret', 'protection.redis.url']);
  });

  it('name a file that cannot be read, and never wait on one that is not a regular file', () => {
    const fifo = join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    const large = file('large', 'x'.repeat(64 * 1024 + 1));
    const missing = join(dir, 'missing');
    expect(problemsOf({ protection: { redis: { url: `\${file:${missing}}` } } })).toEqual([
      `protection.redis.url: cannot read ${missing} (ENOENT)`,
    ]);
    expect(problemsOf({ auth: { participantId: `\${file:${fifo}}` } })).toEqual([
      `auth.participantId: ${fifo} is not a regular file`,
    ]);
    expect(problemsOf({ auth: { participantId: `\${file:${dir}}` } })).toEqual([
      `auth.participantId: ${dir} is not a regular file`,
    ]);
    expect(problemsOf({ auth: { participantId: `\${file:${large}}` } })).toEqual([
      `auth.participantId: ${large} is larger than 64 KiB`,
    ]);
    expect(problemsOf({}, { LEDGER_GATEWAY_PROTECTION__REDIS__URL: `\${file:${missing}}` })).toEqual([
      `LEDGER_GATEWAY_PROTECTION__REDIS__URL (protection.redis.url): cannot read ${missing} (ENOENT)`,
    ]);
  });

  it('keep the secret out of every problem the schema finds with the value', () => {
    const short = file('short', 'too-short');
    const badUrl = file('bad-url', `${PASSWORD}@redis:6379`);
    const problems = problemsOf({
      auth: { issuers: [{ issuer: 'urn:dev', unsafeHmacSecret: `\${file:${short}}` }] },
      protection: { redis: { url: `\${file:${badUrl}}` } },
    });
    expect(problems).toEqual([
      'auth.issuers[0].unsafeHmacSecret: must NOT have fewer than 32 characters',
      'protection.redis.url: has no scheme: add redis:// or rediss://',
    ]);
  });
});

describe('redaction', () => {
  it('redacts every key the schema marks secret, and a secret URL down to its user information and query', () => {
    expect(
      settableKeys()
        .filter((key) => key.secret)
        .map((key) => key.path.join('.')),
    ).toEqual([
      'admin.purgeToken',
      'protection.redis.url',
      'protection.redis.sentinel.password',
      'protection.redis.password',
    ]);
    expect(redactSecret(`redis://:${PASSWORD}@redis:6379`)).toBe('redis://REDACTED@redis:6379');
    expect(redactSecret(`rediss://default:${PASSWORD}@redis.internal:6380/2?password=${PASSWORD}`)).toBe(
      'rediss://REDACTED@redis.internal:6380/2?REDACTED',
    );
    expect(redactSecret('redis://redis:6379')).toBe('redis://redis:6379');
    expect(redactSecret(HMAC_SECRET)).toBe('REDACTED');
    const { config, provenance } = validateConfiguration(
      {
        protection: { redis: { url: `redis://:${PASSWORD}@redis:6379` } },
        auth: { issuers: [{ issuer: 'urn:dev', unsafeHmacSecret: HMAC_SECRET }] },
      },
      'test',
    );
    const printed = JSON.stringify(redactedConfig(config, provenance));
    expect(printed).not.toContain(PASSWORD);
    expect(printed).not.toContain(HMAC_SECRET);
    expect(redactedConfig(config, provenance)).toMatchObject({
      auth: { issuers: [{ unsafeHmacSecret: 'REDACTED' }] },
      protection: { redis: { url: 'redis://REDACTED@redis:6379' } },
    });
  });

  it('redacts the passwords of the sentinels and of the data nodes, inline or read from a file', () => {
    const sentinelPassword = 'sentinel-p4ssw0rd-never-shown';
    const passwordFile = file('data-password', `${PASSWORD}\n`);
    const { config, provenance } = validateConfiguration(
      {
        protection: {
          redis: {
            sentinel: { nodes: ['sentinel-0:26379'], masterName: 'limits', password: sentinelPassword },
            password: `\${file:${passwordFile}}`,
          },
        },
      },
      'test',
    );
    expect(config.protection.redis.password).toBe(PASSWORD);
    const yaml = effectiveConfigYaml(config, provenance);
    expect(yaml).not.toContain(PASSWORD);
    expect(yaml).not.toContain(sentinelPassword);
    expect(redactedConfig(config, provenance)).toMatchObject({
      protection: {
        redis: {
          sentinel: { nodes: ['sentinel-0:26379'], masterName: 'limits', password: 'REDACTED' },
          password: 'REDACTED',
        },
      },
    });
  });

  it('redacts any value read from a file, whatever its key', () => {
    const participant = file('participant', 'participant::secret-looking-id');
    const { config, provenance } = validateConfiguration(
      { auth: { participantId: `\${file:${participant}}` } },
      'test',
    );
    const yaml = effectiveConfigYaml(config, provenance);
    expect(yaml).toContain('participantId: REDACTED');
    expect(yaml).not.toContain('secret-looking-id');
  });

  it('marks each key an environment variable set in the effective configuration', () => {
    const { config, provenance } = validateConfiguration({}, 'test', {
      LEDGER_GATEWAY_PORT: '9000',
      LEDGER_GATEWAY_CORS__ORIGINS: '["https://a"]',
    });
    const yaml = effectiveConfigYaml(config, provenance);
    expect(yaml).toContain('  port: 9000 # LEDGER_GATEWAY_PORT\n');
    expect(yaml).toContain(
      '\ncors:\n  enabled: false\n  # LEDGER_GATEWAY_CORS__ORIGINS\n  origins:\n    - https://a\n',
    );
    expect(yaml.indexOf('server:')).toBe(0); // the schema's order
  });
});
