// `ledger-gateway keys create|list|revoke` on a key file: the key printed once and never stored,
// only its hash; list shows no key or hash; revoke marks it, and a gateway reading the file refuses it.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runKeysCommand } from '../../src/cli/keys.js';
import { hashGatewayKey } from '../../src/consumers/gateway-keys.js';
import { keyFilePath } from './support.js';

function configWithKeyFile(): { config: string; file: string } {
  const file = keyFilePath();
  const config = join(dirname(file), 'gateway.yaml');
  writeFileSync(
    config,
    `upstream: { url: http://127.0.0.1:7575 }\nauth: { issuers: [{ issuer: https://idp.test, jwksUrl: https://idp.test/jwks }] }\nconsumers:\n  list: [{ name: payments }]\n  keys: { store: file, file: ${file} }\n`,
  );
  return { config, file };
}

describe('ledger-gateway keys', () => {
  it('creates a key shown once, lists it without a secret, and revokes it', async () => {
    const { config, file } = configWithKeyFile();
    const created = await runKeysCommand([
      'create',
      '--config',
      config,
      '--consumer',
      'payments',
      '--expires-in',
      '30d',
      '--source',
      '10.0.0.0/8',
    ]);
    expect(created.code).toBe(0);
    const key = created.output.split('\n')[0]!;
    expect(key).toMatch(/^lgk_[A-Za-z0-9_-]{43}$/);
    const stored = readFileSync(file, 'utf8');
    expect(stored).not.toContain(key);
    expect(stored).toContain(hashGatewayKey(key));
    const id = /key id ([a-f0-9]{12})/.exec(created.output)![1]!;

    const listed = await runKeysCommand(['list', '--config', config]);
    expect(listed.code).toBe(0);
    expect(listed.output).toMatch(new RegExp(`${id} +payments +active .* 10\\.0\\.0\\.0/8`));
    expect(listed.output).not.toContain(hashGatewayKey(key));

    expect((await runKeysCommand(['revoke', '--config', config, id])).output).toContain('revoked');
    expect((await runKeysCommand(['list', '--config', config])).output).toMatch(new RegExp(`${id} +payments +revoked`));
  });

  it('refuses a consumer the configuration does not name, a bad source and a bad command line with exit 2', async () => {
    const { config } = configWithKeyFile();
    expect((await runKeysCommand(['create', '--config', config, '--consumer', 'nobody'])).code).toBe(2);
    expect(
      (await runKeysCommand(['create', '--config', config, '--consumer', 'payments', '--source', 'nowhere'])).code,
    ).toBe(2);
    expect((await runKeysCommand(['rotate', '--config', config])).code).toBe(2);
    expect((await runKeysCommand(['revoke', '--config', config, '000000000000'])).code).toBe(2);
  });
});
