// Any key from the environment: LEDGER_GATEWAY_<SECTION>__<KEY>, typed by the key's schema and
// validated with the file, over the file (precedence), the six short names still working.
import { describe, expect, it } from 'vitest';
import { environmentVariable, upperSnake } from '../../src/config/environment.js';
import { ConfigError, validateConfiguration, validateGatewayConfig } from '../../src/config/load.js';
import { originOf } from '../../src/config/provenance.js';
import { pathText, settableKeys } from '../../src/config/schema-paths.js';

const problemsOf = (raw: unknown, env: NodeJS.ProcessEnv): readonly string[] => {
  try {
    validateGatewayConfig(raw, 'test', env);
    return [];
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
};

describe('the environment convention', () => {
  it('names every key by one rule, and no two keys alike', () => {
    expect(environmentVariable(['protection', 'redis', 'url'])).toBe('LEDGER_GATEWAY_PROTECTION__REDIS__URL');
    expect(environmentVariable(['server', 'tls', 'clientCaFile'])).toBe('LEDGER_GATEWAY_SERVER__TLS__CLIENT_CA_FILE');
    expect(environmentVariable(['auth', 'issuers', 0, 'audience'])).toBe('LEDGER_GATEWAY_AUTH__ISSUERS__0__AUDIENCE');
    expect(upperSnake('maxInFlightPerPrincipal')).toBe('MAX_IN_FLIGHT_PER_PRINCIPAL');
    const names = settableKeys().map(({ path }) => environmentVariable(path));
    expect(names.length).toBeGreaterThan(60);
    expect(new Set(names).size).toBe(names.length);
  });

  it("types each value by its key's schema: integers, true/false, text, JSON for lists and records", () => {
    const config = validateGatewayConfig({ upstream: { url: 'http://file:1' } }, 'test', {
      LEDGER_GATEWAY_SERVER__PORT: '9000',
      LEDGER_GATEWAY_CORS__ENABLED: 'TRUE',
      LEDGER_GATEWAY_CORS__ORIGINS: '["https://app.example"]',
      LEDGER_GATEWAY_UPSTREAM__URL: 'http://participant:7575',
      LEDGER_GATEWAY_UPSTREAM__OPERATION_TIMEOUTS_MS: '{"submitAndWaitForTransaction": 60000}',
      LEDGER_GATEWAY_PROTECTION__DEFAULT__RATE: '{"requests": 10, "perSeconds": 2}',
      LEDGER_GATEWAY_LOG__LEVEL: 'warn',
      LEDGER_GATEWAY_ROUTES__EXPOSE_PARTICIPANT_DOCS: 'false',
    });
    expect(config.server.port).toBe(9000);
    expect(config.cors.enabled).toBe(true);
    expect(config.cors.origins).toEqual(['https://app.example']);
    expect(config.upstream.url).toBe('http://participant:7575'); // over the file's
    expect(config.upstream.operationTimeoutsMs).toEqual({ submitAndWaitForTransaction: 60_000 });
    expect(config.protection.default.rate).toEqual({ requests: 10, perSeconds: 2 });
    expect(config.log.level).toBe('warn');
    expect(config.routes.exposeParticipantDocs).toBe(false);
  });

  it('sets one entry of a list the file has, by index', () => {
    const file = {
      upstream: { url: 'http://p:1' },
      auth: {
        issuers: [
          { issuer: 'https://a', jwksUrl: 'https://a/jwks' },
          { issuer: 'https://b', jwksUrl: 'https://b/jwks' },
        ],
      },
    };
    const config = validateGatewayConfig(file, 'test', { LEDGER_GATEWAY_AUTH__ISSUERS__1__AUDIENCE: 'gateway' });
    expect(config.auth.issuers.map((issuer) => issuer.audience)).toEqual([undefined, 'gateway']);
    expect(problemsOf(file, { LEDGER_GATEWAY_AUTH__ISSUERS__5__AUDIENCE: 'x' })).toEqual([
      'LEDGER_GATEWAY_AUTH__ISSUERS__5__AUDIENCE: auth.issuers has 2 entries; set index 2 or below',
    ]);
  });

  it('applies a whole section first and a key inside it after, whatever their order in the environment', () => {
    const config = validateGatewayConfig({}, 'test', {
      LEDGER_GATEWAY_SERVER__PORT: '9001',
      LEDGER_GATEWAY_SERVER: '{"port": 1, "host": "127.0.0.1"}',
    });
    expect(config.server).toMatchObject({ port: 9001, host: '127.0.0.1' });
  });

  it('keeps the six short names, and refuses a short and a long name that disagree', () => {
    const config = validateGatewayConfig({}, 'test', {
      LEDGER_GATEWAY_PORT: '9000',
      LEDGER_GATEWAY_SERVER__PORT: '9000',
      LEDGER_GATEWAY_ADMIN_PORT: '9001',
    });
    expect([config.server.port, config.admin.port]).toEqual([9000, 9001]);
    expect(problemsOf({}, { LEDGER_GATEWAY_PORT: '9000', LEDGER_GATEWAY_SERVER__PORT: '9002' })).toEqual([
      'LEDGER_GATEWAY_PORT and LEDGER_GATEWAY_SERVER__PORT both set server.port, to different values: keep one',
    ]);
  });

  it("judges an environment value as the file's, naming the variable", () => {
    expect(
      problemsOf(
        {},
        {
          LEDGER_GATEWAY_SERVER__PORT: 'eighty',
          LEDGER_GATEWAY_ADMIN__PORT: '70000',
          LEDGER_GATEWAY_CORS__ENABLED: 'yes',
          LEDGER_GATEWAY_CORS__ORIGINS: 'https://app.example',
          LEDGER_GATEWAY_LOG__LEVEL: 'loud',
        },
      ),
    ).toEqual([
      'LEDGER_GATEWAY_CORS__ENABLED: must be true or false (sets cors.enabled)',
      'LEDGER_GATEWAY_CORS__ORIGINS: must be JSON (a list, e.g. ["a","b"]) (sets cors.origins)',
      'LEDGER_GATEWAY_SERVER__PORT: must be an integer (sets server.port)',
      'admin.port: must be <= 65535 (set by LEDGER_GATEWAY_ADMIN__PORT)',
      'log.level: must be one of fatal, error, warn, info, debug, trace, silent (set by LEDGER_GATEWAY_LOG__LEVEL)',
    ]);
  });

  it('refuses a variable that names no key, with the variable meant', () => {
    expect(
      problemsOf(
        {},
        {
          LEDGER_GATEWAY_SERVER__PROT: '8080',
          LEDGER_GATEWAY_PROTECTON__REDIS__URL: 'redis://redis:6379',
          LEDGER_GATEWAY_SERVER__NOTHING_LIKE_IT: '1',
          LEDGER_GATEWAY_UPSTREAM__OPERATION_TIMEOUTS_MS__GET_VERSION: '100',
        },
      ),
    ).toEqual([
      'LEDGER_GATEWAY_PROTECTON__REDIS__URL: no such key protecton; ' +
        'did you mean LEDGER_GATEWAY_PROTECTION__REDIS__URL?',
      'LEDGER_GATEWAY_SERVER__NOTHING_LIKE_IT: no such key server.nothing_like_it',
      'LEDGER_GATEWAY_SERVER__PROT: no such key server.prot; did you mean LEDGER_GATEWAY_SERVER__PORT?',
      'LEDGER_GATEWAY_UPSTREAM__OPERATION_TIMEOUTS_MS__GET_VERSION: upstream.operationTimeoutsMs is set as a whole, ' +
        'in JSON: LEDGER_GATEWAY_UPSTREAM__OPERATION_TIMEOUTS_MS',
    ]);
  });

  it("leaves alone the variables that are not its own: Kubernetes service links, the process's, empty ones", () => {
    expect(
      problemsOf(
        {},
        {
          LEDGER_GATEWAY_SERVICE_HOST: '10.96.0.10',
          LEDGER_GATEWAY_SERVICE_PORT_HTTP: '8080',
          LEDGER_GATEWAY_PORT_8080_TCP_ADDR: '10.96.0.10',
          LEDGER_GATEWAY_CONFIG: '/etc/ledger-gateway/config.yaml',
          LEDGER_GATEWAY_DEV_DIR: '/tmp/dev',
          LEDGER_GATEWAY_SERVER__PORT: '',
        },
      ),
    ).toEqual([]);
  });

  it("says where a key's value came from: a variable, the file, or the default", () => {
    const { provenance } = validateConfiguration(
      { server: { host: '127.0.0.1' } },
      'gateway.yaml',
      { LEDGER_GATEWAY_PORT: '9000', LEDGER_GATEWAY_CORS: '{"enabled": true}' },
      'gateway.yaml',
    );
    expect(originOf(provenance, ['server', 'port'])).toBe('set by LEDGER_GATEWAY_PORT');
    expect(originOf(provenance, ['server', 'host'])).toBe('set in gateway.yaml');
    expect(originOf(provenance, ['admin', 'port'])).toBe('the default');
    expect(originOf(provenance, ['cors', 'enabled'])).toBe('set by LEDGER_GATEWAY_CORS');
    expect(provenance.variables.map(({ variable, path }) => `${variable}=${pathText(path)}`)).toEqual([
      'LEDGER_GATEWAY_CORS=cors',
      'LEDGER_GATEWAY_PORT=server.port',
    ]);
  });
});
