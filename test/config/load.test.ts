import { describe, expect, it } from 'vitest';
import { ConfigError, validateGatewayConfig } from '../../src/config/load.js';

describe('config validation', () => {
  it('fills every default from an empty file', () => {
    const config = validateGatewayConfig({});
    expect(config.server).toMatchObject({ host: '0.0.0.0', port: 8080 });
    expect(config.admin).toMatchObject({ host: '0.0.0.0', port: 9464 });
    expect(config.upstream).toMatchObject({ url: 'sandbox', timeoutMs: 30000 });
    expect(config.limits.bodyBytes).toBe(10485760);
  });

  it('names every bad key path at once', () => {
    let error: unknown;
    try {
      validateGatewayConfig({ upstream: { url: 5, bogus: 1 }, server: { port: 'x' }, log: { level: 'loud' }, extra: {} });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toEqual(expect.arrayContaining([
      'upstream.bogus: unknown key',
      'extra: unknown key',
      expect.stringMatching(/^upstream\.url: must be string/),
      expect.stringMatching(/^server\.port: must be integer/),
      expect.stringMatching(/^log\.level: /),
    ]));
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
    expect(() => validateGatewayConfig({}, 'test', { LEDGER_GATEWAY_ADMIN_PORT: 'eighty' })).toThrow(/LEDGER_GATEWAY_ADMIN_PORT: must be an integer/);
  });
});
