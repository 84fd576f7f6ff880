// The rule for the participant's IdPs' jwksUrls (auth/jwks-hosts.ts): https only, no loopback,
// link-local or private address unless auth.participantIdentityProviders.allowedJwksHosts allows it,
// written in the URL or resolved from its name (checked at connection, against a real server).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { allowedJwksHostProblem, guardedKeySetAgent, jwksHostRule } from '../../src/auth/jwks-hosts.js';
import { resolveAuthConfig } from '../../src/auth/config.js';
import { testConfig } from '../helpers/gateway.js';
import { createTestIssuer } from '../helpers/tokens.js';

const toClose: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of toClose.splice(0).reverse()) await close();
});

describe('jwksHostRule', () => {
  const strict = jwksHostRule([]);
  it.each([
    ['http://idp.example.com/jwks', /must be https/],
    ['http://127.0.0.1:8080/jwks', /must be https/],
    ['https://127.0.0.1/jwks', /loopback, link-local or private/],
    ['https://localhost/jwks', /loopback, link-local or private/],
    ['https://keys.localhost/jwks', /loopback, link-local or private/],
    ['https://10.1.2.3/jwks', /loopback, link-local or private/],
    ['https://172.20.0.1/jwks', /loopback, link-local or private/],
    ['https://192.168.1.1/jwks', /loopback, link-local or private/],
    ['https://169.254.169.254/latest/meta-data', /loopback, link-local or private/],
    ['https://100.64.0.1/jwks', /loopback, link-local or private/],
    ['https://0.0.0.0/jwks', /loopback, link-local or private/],
    ['https://[::1]/jwks', /loopback, link-local or private/],
    ['https://[fd00::1]/jwks', /loopback, link-local or private/],
    ['https://[fe80::1]/jwks', /loopback, link-local or private/],
    ['https://[::ffff:10.0.0.1]/jwks', /loopback, link-local or private/],
    ['https://[::ffff:127.0.0.1]/jwks', /loopback, link-local or private/],
    ['not a url', /not a URL/],
  ])('refuses %s', (url, problem) => {
    expect(strict.problemOf(url)).toMatch(problem);
  });

  // 127.0.0.1, 169.254.169.254 and 10.0.0.1 in each form that carries IPv4 inside IPv6: a gateway
  // beside a NAT64 or 6to4 relay reaches them through it (issue 40).
  it.each([
    ['NAT64 (64:ff9b::/96)', ['64:ff9b::7f00:1', '64:ff9b::169.254.169.254', '64:ff9b::a00:1']],
    ['local-use NAT64 (64:ff9b:1::/48)', ['64:ff9b:1:7f00:0:100::', '64:ff9b:1::a9fe:a9fe', '64:ff9b:1::10.0.0.1']],
    ['6to4 (2002::/16)', ['2002:7f00:1::', '2002:a9fe:a9fe::1', '2002:a00:1::']],
    ['Teredo (2001::/32)', ['2001:0:7f00:1::80ff:fffe', '2001:0:4136:e378:8000:63bf:5601:5601', '2001::a00:1']],
    ['IPv4-compatible (::a.b.c.d)', ['::127.0.0.1', '::169.254.169.254', '::a00:1']],
    ['IPv4-mapped (::ffff:a.b.c.d)', ['::ffff:7f00:1', '::ffff:169.254.169.254', '::ffff:a00:1']],
  ])('refuses the %s forms, written in the URL or resolved', (_form, addresses) => {
    for (const address of addresses) {
      expect(strict.problemOf(`https://[${address}]/jwks`), address).toMatch(/loopback, link-local or private/);
      expect(strict.addressAllowed('keys.example', address), address).toBe(false);
    }
  });

  it.each(['https://idp.example.com/realms/x/certs', 'https://8.8.8.8/jwks', 'https://[2606:4700:4700::1111]/jwks'])(
    'accepts %s',
    (url) => expect(strict.problemOf(url)).toBeUndefined(),
  );

  it('accepts an allowed host, by address, CIDR or name; http only on an allowed loopback host', () => {
    const rule = jwksHostRule(['127.0.0.1', '10.20.0.0/16', 'keys.internal', 'fd00::/8']);
    expect(rule.problemOf('http://127.0.0.1:9000/jwks')).toBeUndefined();
    expect(rule.problemOf('https://10.20.3.4/jwks')).toBeUndefined();
    expect(rule.problemOf('https://[fd00::5]/jwks')).toBeUndefined();
    expect(rule.problemOf('https://keys.internal/jwks')).toBeUndefined();
    expect(rule.problemOf('http://10.20.3.4/jwks')).toMatch(/must be https/);
    expect(rule.problemOf('http://keys.internal/jwks')).toMatch(/must be https/);
    expect(rule.problemOf('https://10.21.0.1/jwks')).toMatch(/private/);
    expect(rule.addressAllowed('keys.internal', '10.99.0.1')).toBe(true);
    expect(rule.addressAllowed('other.example', '10.20.0.9')).toBe(true);
    expect(rule.addressAllowed('other.example', '192.168.0.9')).toBe(false);
    expect(rule.addressAllowed('other.example', '93.184.215.14')).toBe(true);
  });

  it('names every bad allowedJwksHosts entry at start', () => {
    expect(allowedJwksHostProblem('10.0.0.0/33')).toMatch(/CIDR/);
    expect(allowedJwksHostProblem('10.0.0.0/x')).toMatch(/CIDR/);
    expect(allowedJwksHostProblem('keys_example!')).toMatch(/not a host name/);
    expect(allowedJwksHostProblem('https://keys.example')).toBeDefined();
    expect(allowedJwksHostProblem('::1')).toBeUndefined();
    const config = testConfig('http://127.0.0.1:1', {
      auth: {
        issuers: [],
        participantIdentityProviders: { enabled: true, allowedJwksHosts: ['ok.example', 'bad host'] },
      },
    });
    expect(() => resolveAuthConfig(config.auth, config.upstream.url)).toThrow(
      /auth\.participantIdentityProviders\.allowedJwksHosts\[1\]/,
    );
  });
});

describe('guardedKeySetAgent', () => {
  it('never connects to a name that resolves to a refused address, unless the name is allowed', async () => {
    const issuer = await createTestIssuer();
    let served = 0;
    const server = http.createServer((_request, response) => {
      served++;
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(issuer.issuerConfig.jwks));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    toClose.push(() => new Promise((resolve) => server.close(resolve)));
    const url = `http://localhost:${(server.address() as AddressInfo).port}/jwks`;

    let rule = jwksHostRule([]);
    const agent = guardedKeySetAgent(() => rule);
    toClose.push(() => agent.close());
    const refused = await fetch(url, { dispatcher: agent }).then(
      () => undefined,
      (error: Error & { cause?: { code?: string } }) => error.cause?.code,
    );
    expect(refused).toBe('EJWKSHOSTNOTALLOWED');
    expect(served).toBe(0);

    rule = jwksHostRule(['localhost']); // read at each connection: a reload's list applies at once
    const answer = await fetch(url, { dispatcher: agent });
    expect(answer.status).toBe(200);
    expect(served).toBe(1);
  });
});
