import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, validateGatewayConfig } from '../../src/config/load.js';

describe('config validation', () => {
  it('fills every default from an empty file', () => {
    const config = validateGatewayConfig({});
    expect(config.server).toMatchObject({ host: '0.0.0.0', port: 8080 });
    expect(config.admin).toMatchObject({ host: '0.0.0.0', port: 9464 });
    expect(config.upstream).toMatchObject({ url: 'sandbox', timeoutMs: 30000 });
    expect(config.limits.bodyBytes).toBe(8388608);
  });

  it('names every bad key path at once', () => {
    let error: unknown;
    try {
      validateGatewayConfig({
        upstream: { url: 5, bogus: 1 },
        server: { port: 'x' },
        log: { level: 'loud' },
        extra: {},
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toEqual(
      expect.arrayContaining([
        'upstream.bogus: unknown key',
        'extra: unknown key',
        expect.stringMatching(/^upstream\.url: must be string/),
        expect.stringMatching(/^server\.port: must be integer/),
        expect.stringMatching(/^log\.level: /),
      ]),
    );
    expect(problems).toHaveLength(5);
  });

  it('lets the environment override the per-pod keys', () => {
    const config = validateGatewayConfig({ upstream: { url: 'http://a:1' } }, 'test', {
      LEDGER_GATEWAY_UPSTREAM_URL: 'http://127.0.0.1:7575',
      LEDGER_GATEWAY_PORT: '9000',
      LEDGER_GATEWAY_LOG_LEVEL: 'warn',
    });
    expect(config.upstream.url).toBe('http://127.0.0.1:7575');
    expect(config.server.port).toBe(9000);
    expect(config.log.level).toBe('warn');
  });

  it('refuses a non-integer port from the environment', () => {
    expect(() => validateGatewayConfig({}, 'test', { LEDGER_GATEWAY_ADMIN_PORT: 'eighty' })).toThrow(
      /LEDGER_GATEWAY_ADMIN_PORT: must be an integer/,
    );
  });

  const problemsOf = (raw: unknown, env: NodeJS.ProcessEnv = {}): readonly string[] => {
    try {
      validateGatewayConfig(raw, 'test', env);
      return [];
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as ConfigError).problems;
    }
  };

  it('accepts trusted proxies given as addresses and CIDRs of either family', () => {
    const entries = [
      '10.1.2.3',
      '10.0.0.0/8',
      '0.0.0.0/0',
      '192.168.1.1/32',
      '::1',
      'fd00::/8',
      '::/0',
      '2001:db8::1/128',
      '::ffff:10.0.0.1',
    ];
    expect(problemsOf({ server: { trustedProxies: entries } })).toEqual([]);
  });

  it("refuses a trusted proxy that is not an address or CIDR, naming each entry (Node's BlockList would throw at start)", () => {
    const entries = [
      '10.0.0.0/8',
      'ingress-nginx',
      '10.0.0.0/33',
      'fd00::/129',
      '10.0.0.0/',
      '10.0.0.0/8x',
      '10.0.0.0/-1',
      '10.0.0/8',
      '1.2.3.4/8/1',
    ];
    expect(problemsOf({ server: { trustedProxies: entries } })).toEqual([
      'server.trustedProxies[1]: "ingress-nginx" is not an IP address or CIDR (e.g. 10.0.0.0/8, fd00::/8; host names are not resolved)',
      'server.trustedProxies[2]: "10.0.0.0/33": the prefix length must be a whole number from 0 to 32',
      'server.trustedProxies[3]: "fd00::/129": the prefix length must be a whole number from 0 to 128',
      'server.trustedProxies[4]: "10.0.0.0/": the prefix length must be a whole number from 0 to 32',
      'server.trustedProxies[5]: "10.0.0.0/8x": the prefix length must be a whole number from 0 to 32',
      'server.trustedProxies[6]: "10.0.0.0/-1": the prefix length must be a whole number from 0 to 32',
      'server.trustedProxies[7]: "10.0.0/8" is not an IP address or CIDR (e.g. 10.0.0.0/8, fd00::/8; host names are not resolved)',
      'server.trustedProxies[8]: "1.2.3.4/8/1": the prefix length must be a whole number from 0 to 32',
    ]);
  });

  it('accepts a client-facing path prefix of whole segments, never a dot segment, an encoding, a query or a relative path', () => {
    // The pattern has no lookahead (Helm's RE2 validator runs it too: test/deploy/helm.test.ts).
    for (const pathPrefix of ['/api/json-api', '/api/json-api/', '/a.b/.c', '/...', "/v1/@x:y~z!$&'()*+,;="]) {
      expect(validateGatewayConfig({ server: { pathPrefix } }).server.pathPrefix, pathPrefix).toBe(pathPrefix);
    }
    for (const pathPrefix of [
      '',
      '/',
      'api',
      '/.',
      '/..',
      '/a/./b',
      '/a/../b',
      '//a',
      '/a%2Fb',
      '/a?x',
      '/a#x',
      '/a b',
    ]) {
      expect(() => validateGatewayConfig({ server: { pathPrefix } }), JSON.stringify(pathPrefix)).toThrow(
        /server\.pathPrefix: must match pattern/,
      );
    }
  });

  it('accepts "sandbox" and http(s) base URLs for the participant', () => {
    for (const url of [
      'sandbox',
      'http://127.0.0.1:7575',
      'https://participant.example',
      'https://participant.example:8443/json-api/',
      'http://[::1]:7575',
    ]) {
      expect(problemsOf({ upstream: { url } }), url).toEqual([]);
    }
  });

  it('refuses a participant URL the gateway could not forward to as written, without echoing it', () => {
    const cases: Array<[string, RegExp]> = [
      [
        '127.0.0.1:7575',
        /^upstream\.url: 127\.0\.0\.1:7575 has no scheme: add http:\/\/ or https:\/\/, e\.g\. http:\/\/127\.0\.0\.1:7575$/,
      ],
      [
        'participant:7575',
        /^upstream\.url: participant:7575 has no scheme: add http:\/\/ or https:\/\/, e\.g\. http:\/\/participant:7575$/,
      ],
      ['localhost', /^upstream\.url: localhost has no scheme: add http:\/\/ or https:\/\//],
      ['gateway:s3cr3t@participant:7575', /^upstream\.url: has no scheme: add http:\/\/ or https:\/\/$/],
      ['http//participant', /^upstream\.url: http\/\/participant has no scheme/],
      ['ftp://participant.example', /^upstream\.url: must be an http: or https: URL, not ftp:$/],
      ['ws://participant.example', /^upstream\.url: must be an http: or https: URL, not ws:$/],
      ['https://gateway:s3cr3t@participant.example', /^upstream\.url: must not carry user information/],
      ['http://participant.example/?tenant=a', /^upstream\.url: must not carry a query or fragment/],
      ['http://participant.example/#x', /^upstream\.url: must not carry a query or fragment/],
    ];
    for (const [url, expected] of cases) {
      const problems = problemsOf({ upstream: { url } });
      expect(problems, url).toHaveLength(1);
      expect(problems[0], url).toMatch(expected);
      expect(problems[0]).not.toContain('s3cr3t');
    }
    // The environment's value is judged the same way.
    expect(problemsOf({}, { LEDGER_GATEWAY_UPSTREAM_URL: 'participant:7575' })).toEqual([
      'upstream.url: participant:7575 has no scheme: add http:// or https://, e.g. http://participant:7575 (set by LEDGER_GATEWAY_UPSTREAM_URL)',
    ]);
  });

  it('refuses a per-operation timeout for an operation that does not exist (it would silently never apply)', () => {
    expect(
      problemsOf({ upstream: { operationTimeoutsMs: { submitAndWaitForTransaction: 60_000, unknown: 5_000 } } }),
    ).toEqual([]);
    expect(
      problemsOf({ upstream: { operationTimeoutsMs: { submitAndWaitForTransactionn: 60_000, getVersion: 1_000 } } }),
    ).toEqual([
      'upstream.operationTimeoutsMs.submitAndWaitForTransactionn: unknown operation name (docs/request-policy.md "Routes and operations" lists them)',
    ]);
  });

  it('names an upstream TLS file it cannot read, and an admin port that is the API port (each failed later, unnamed, with exit 1)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-tls-'));
    const ca = new URL('../proxy/fixtures/test-ca.pem', import.meta.url).pathname;
    try {
      expect(problemsOf({ upstream: { url: 'https://participant:7575', tls: { caFile: ca } } })).toEqual([]);
      expect(
        problemsOf({
          upstream: {
            url: 'https://participant:7575',
            tls: { caFile: join(dir, 'missing.pem'), keyFile: dir + '/nope.key' },
          },
        }),
      ).toEqual([
        `upstream.tls.caFile: cannot read ${join(dir, 'missing.pem')} (ENOENT)`,
        `upstream.tls.keyFile: cannot read ${dir}/nope.key (ENOENT)`,
        'upstream.tls: certFile and keyFile go together (the client certificate for mutual TLS and its key)',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(problemsOf({ server: { port: 8080 }, admin: { port: 8080 } })).toEqual([
      'admin.port: 8080 is server.port too: the admin listener needs a port of its own',
    ]);
    expect(problemsOf({ server: { port: 0 }, admin: { port: 0 } })).toEqual([]); // each picks a free port
  });

  it('reads the upstream TLS files as the forwarder will: a CA file without a certificate, a key that does not fit', () => {
    const fixture = (name: string) => new URL(`../proxy/fixtures/${name}`, import.meta.url).pathname;
    const dir = mkdtempSync(join(tmpdir(), 'gw-tls-'));
    const truncated = join(dir, 'ca.pem');
    writeFileSync(truncated, '-----BEGIN CERTIFICATE-----\n');
    const url = 'https://participant:7575';
    try {
      expect(
        problemsOf({
          upstream: {
            url,
            tls: {
              caFile: fixture('test-ca.pem'),
              certFile: fixture('test-client.pem'),
              keyFile: fixture('test-only-client-key.pem'),
            },
          },
        }),
      ).toEqual([]);
      expect(problemsOf({ upstream: { url, tls: { caFile: truncated } } })).toEqual([
        `upstream.tls.caFile: ${truncated} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`,
      ]);
      const mismatched = problemsOf({
        upstream: {
          url,
          tls: { certFile: fixture('test-client.pem'), keyFile: fixture('test-only-stranger-key.pem') },
        },
      });
      expect(mismatched).toHaveLength(1);
      expect(mismatched[0]).toMatch(
        /^upstream\.tls: the client certificate or its key cannot be used \(.*key values mismatch/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('config errors that help', () => {
  const problemsOf = (raw: unknown, env: NodeJS.ProcessEnv = {}): readonly string[] => {
    try {
      validateGatewayConfig(raw, 'test', env);
      return [];
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as ConfigError).problems;
    }
  };

  it('suggests the key meant: a typo, another case, a key of another section', () => {
    expect(problemsOf({ server: { prot: 8080 } })).toEqual(['server.prot: unknown key; did you mean `port`?']);
    expect(problemsOf({ server: { Port: 8080 } })).toEqual(['server.Port: unknown key; did you mean `port`?']);
    expect(problemsOf({ protection: { redis: { keyPrefx: 'a:' } } })).toEqual([
      'protection.redis.keyPrefx: unknown key; did you mean `keyPrefix`?',
    ]);
    expect(problemsOf({ port: 8080 })).toEqual(['port: unknown key; did you mean `server.port` or `admin.port`?']);
    expect(problemsOf({ upstream: { bogus: 1 } })).toEqual(['upstream.bogus: unknown key']); // nothing near: no guess
  });

  it('lists the allowed values of a choice', () => {
    expect(problemsOf({ log: { level: 'loud' } })).toEqual([
      'log.level: must be one of fatal, error, warn, info, debug, trace, silent',
    ]);
    expect(problemsOf({ protection: { failMode: 'maybe' } })).toEqual([
      'protection.failMode: must be one of open, closed',
    ]);
    const algorithms = problemsOf({
      auth: { issuers: [{ issuer: 'https://idp', jwksUrl: 'https://idp/jwks', algorithms: ['RS256', 'none'] }] },
    });
    expect(algorithms).toEqual([
      'auth.issuers[0].algorithms[1]: must be one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, Ed25519, HS256',
    ]);
  });

  it('says when the Redis URL lacks its scheme, without echoing it (it may hold a password)', () => {
    expect(problemsOf({ protection: { redis: { url: 'redis-password@redis:6379' } } })).toEqual([
      'protection.redis.url: has no scheme: add redis:// or rediss://',
    ]);
    expect(problemsOf({ protection: { redis: { url: 'http://redis:6379' } } })).toEqual([
      'protection.redis.url: must start with redis:// or rediss://',
    ]);
  });
});
