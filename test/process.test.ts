// The process as operators run it: config validated at start, probes, graceful shutdown on SIGTERM.
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, runToExit, startProcess, writeConfig, writeGatewayConfig } from './helpers/process.js';
import { answerJson, startRecordingUpstream } from './helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from './helpers/tokens.js';

beforeAll(() => buildDist(), 120_000);

describe('start', () => {
  it('refuses a bad config file with every bad key named and a non-zero exit', async () => {
    const file = writeConfig(
      'upstream:\n  url: 42\n  bogus: true\nserver:\n  port: eighty\nlimits: { bodyBytes: -1 }\n',
    );
    const { code, stderr } = await runToExit(['dist/main.js', '--config', file]);
    expect(code).toBe(2);
    expect(stderr).toContain('upstream.bogus: unknown key');
    expect(stderr).toMatch(/upstream\.url: must be string/);
    expect(stderr).toMatch(/server\.port: must be integer/);
    expect(stderr).toMatch(/limits\.bodyBytes: must be >= 1/);
  });

  it('refuses a config file that is not YAML, or missing', async () => {
    expect((await runToExit(['dist/main.js', '--config', writeConfig('server: [\n')])).code).toBe(2);
    const missing = await runToExit(['dist/main.js', '--config', '/nonexistent/gateway.yaml']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cannot read the file');
  });

  it('refuses invalid policy rules with exit 2 naming the key path', async () => {
    const file = writeConfig(
      'upstream: { url: "http://127.0.0.1:1" }\nauth: { issuers: [{ issuer: "https://idp.example", jwksUrl: "https://idp.example/jwks" }] }\npolicy: { rules: { noSuchOperation: [{ anyAuthenticated: true }] } }\n',
    );
    const { code, stderr } = await runToExit(['dist/main.js', '--config', file]);
    expect(code).toBe(2);
    expect(stderr).toContain('policy.rules.noSuchOperation');
  });

  it('refuses values Node would only trip over later (a trusted proxy, the participant URL) with exit 2, not a stack trace', async () => {
    const file = writeConfig(
      'upstream: { url: "127.0.0.1:7575" }\nserver: { trustedProxies: ["10.0.0.0/8", "ingress-nginx"] }\n',
    );
    const { code, stderr } = await runToExit(['dist/main.js', '--config', file]);
    expect(code).toBe(2);
    expect(stderr).toContain('server.trustedProxies[1]: "ingress-nginx" is not an IP address or CIDR');
    expect(stderr).toContain(
      'upstream.url: 127.0.0.1:7575 has no scheme: add http:// or https://, e.g. http://127.0.0.1:7575',
    );
    expect(stderr).not.toMatch(/\n\s+at /); // no stack
  });

  it('takes the config file from LEDGER_GATEWAY_CONFIG too', async () => {
    const file = writeConfig('nope: 1\n');
    const { code, stderr } = await runToExit(['dist/main.js'], { LEDGER_GATEWAY_CONFIG: file });
    expect(code).toBe(2);
    expect(stderr).toContain('nope: unknown key');
  });
});

describe('request log lines', () => {
  it('reach stdout within about a second on a quiet gateway, although they are written in batches', async () => {
    const upstream = await startRecordingUpstream(answerJson(200, { offset: 3 }));
    const issuer = await createTestIssuer();
    const gateway = await startProcess([
      'dist/main.js',
      '--config',
      writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT),
    ]);
    try {
      const answer = await fetch(`${gateway.api}/v2/state/ledger-end`, {
        headers: { authorization: `Bearer ${await issuer.mint()}` },
      });
      expect(answer.status).toBe(200);
      const reqId = answer.headers.get('x-request-id');
      const requestLine = () =>
        gateway.output
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as Record<string, unknown>)
          .find((line) => line.reqId === reqId && line.msg === 'request');
      // One line is far below the 32 KB batch: the periodic flush (1 s) hands it over.
      await expect
        .poll(requestLine, { timeout: 2_500, interval: 100 })
        .toMatchObject({ status: 200, operation: 'getV2StateLedger-end' });
    } finally {
      gateway.child.kill('SIGKILL');
      await upstream.close();
    }
  });
});

describe('graceful shutdown', () => {
  it('turns /readyz 503 on SIGTERM while an in-flight submit still completes, then exits 0', async () => {
    let received: () => void = () => {};
    const arrived = new Promise<void>((resolve) => {
      received = resolve;
    });
    const upstream = await startRecordingUpstream((request, response) => {
      if (request.url.startsWith('/v2/commands')) {
        received();
        setTimeout(() => void answerJson(200, { transaction: { offset: 7 } })(request, response), 1_500);
      } else {
        void answerJson(200, { version: '3.5.10' })(request, response);
      }
    });
    const issuer = await createTestIssuer();
    const file = writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT, [
      'shutdown: { graceMs: 10000 }',
    ]);
    const gateway = await startProcess(['dist/main.js', '--config', file]);
    try {
      await expect.poll(async () => (await fetch(`${gateway.admin}/readyz`)).status, { timeout: 5_000 }).toBe(200);
      expect((await fetch(`${gateway.admin}/livez`)).status).toBe(200);

      const inFlight = fetch(`${gateway.api}/v2/commands/submit-and-wait`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${await issuer.mint()}` },
        body: JSON.stringify({ commands: { commands: [], commandId: 'c1', actAs: ['Alice'] } }),
      });
      await arrived;
      gateway.child.kill('SIGTERM');
      await expect.poll(async () => (await fetch(`${gateway.admin}/readyz`)).status, { timeout: 2_000 }).toBe(503);

      const answer = await inFlight;
      expect(answer.status).toBe(200);
      expect(await answer.json()).toEqual({ transaction: { offset: 7 } });
      expect(await gateway.exited).toBe(0);
      await expect(fetch(`${gateway.api}/v2/version`)).rejects.toThrow();
    } finally {
      gateway.child.kill('SIGKILL');
      await upstream.close();
    }
  });
});

describe('graceful shutdown under load', () => {
  it('completes every in-flight call, refuses new connections, exits 0 within the grace', async () => {
    const inFlight = 24;
    let arrivedCount = 0;
    let allArrived: () => void = () => {};
    const arrived = new Promise<void>((resolve) => {
      allArrived = resolve;
    });
    const upstream = await startRecordingUpstream((request, response) => {
      if (!request.url.startsWith('/v2/commands')) return answerJson(200, { version: '3.5.10' })(request, response);
      arrivedCount += 1;
      if (arrivedCount === inFlight) allArrived();
      setTimeout(
        () => void answerJson(200, { n: request.headers['x-n'] })(request, response),
        1_000 + Math.random() * 500,
      );
    });
    const issuer = await createTestIssuer();
    const file = writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT, [
      'shutdown: { graceMs: 8000 }',
    ]);
    const gateway = await startProcess(['dist/main.js', '--config', file]);
    try {
      const token = await issuer.mint();
      const calls = Array.from({ length: inFlight }, (_, n) =>
        fetch(`${gateway.api}/v2/commands/submit-and-wait`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, 'x-n': String(n) },
          body: '{}',
        }).then(async (response) => ({
          status: response.status,
          connection: response.headers.get('connection'),
          body: (await response.json()) as { n?: string },
        })),
      );
      await arrived;
      const signalled = Date.now();
      gateway.child.kill('SIGTERM');
      const answers = await Promise.all(calls);
      expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
      expect(answers.map((a) => Number(a.body.n)).sort((a, b) => a - b)).toEqual(
        Array.from({ length: inFlight }, (_, n) => n),
      );
      // Answered after shutdown began: each closes its connection, so no client reuses one.
      expect(answers.map((a) => a.connection)).toEqual(answers.map(() => 'close'));
      await expect(
        fetch(`${gateway.api}/v2/version`, { headers: { authorization: `Bearer ${token}` } }),
      ).rejects.toThrow();
      expect(await gateway.exited).toBe(0);
      expect(Date.now() - signalled).toBeLessThan(8_000);
    } finally {
      gateway.child.kill('SIGKILL');
      await upstream.close();
    }
  });
});
