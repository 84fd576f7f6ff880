// Start-up from the environment and the file, on the built process (issues 32 §4 and 34 §2): the rate
// variables are listed by --help, a partial rate object takes its defaults, and the variables the
// kubelet sets for a Service named ledger-gateway cannot stop the gateway.
import { createServer } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, runToExit, startProcess, writeConfig } from '../helpers/process.js';
import { answerJson, startRecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';

beforeAll(() => buildDist(), 120_000);

const TEST_MS = 60_000;

/** A port free on 127.0.0.1 right now (the gateway is then configured with it). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The variables the kubelet sets in every container of the namespace for a Service (enableServiceLinks). */
function serviceLinks(service: string, ip: string, port: number): Record<string, string> {
  const name = service.toUpperCase().replace(/-/g, '_');
  const address = `tcp://${ip}:${port}`;
  return {
    [`${name}_SERVICE_HOST`]: ip,
    [`${name}_SERVICE_PORT`]: String(port),
    [`${name}_SERVICE_PORT_HTTP`]: String(port),
    [`${name}_PORT`]: address,
    [`${name}_PORT_${port}_TCP`]: address,
    [`${name}_PORT_${port}_TCP_PROTO`]: 'tcp',
    [`${name}_PORT_${port}_TCP_PORT`]: String(port),
    [`${name}_PORT_${port}_TCP_ADDR`]: ip,
  };
}

describe('the rate objects', () => {
  it(
    '--help lists the variable of each key of a rate',
    async () => {
      const help = await runToExit(['dist/main.js', '--help']);
      expect(help.code).toBe(0);
      for (const key of ['REQUESTS', 'PER_SECONDS', 'BURST'])
        expect(help.stdout).toMatch(new RegExp(`^ {4}LEDGER_GATEWAY_PROTECTION__DEFAULT__RATE__${key} +integer$`, 'm'));
    },
    TEST_MS,
  );

  it(
    'a partial rate takes its defaults; a bad one is named once',
    async () => {
      const partial = writeConfig('protection: { default: { rate: { requests: 10 } } }\n');
      const accepted = await runToExit(['dist/main.js', '--check', '--config', partial]);
      expect(accepted.code).toBe(0);
      expect(accepted.stdout).toMatch(/ {4}rate:\n {6}requests: 10\n {6}perSeconds: 1\n/);
      const fromVariable = await runToExit(['dist/main.js', '--check'], {
        LEDGER_GATEWAY_PROTECTION__DEFAULT__RATE__REQUESTS: '20',
      });
      expect(fromVariable.code).toBe(0);
      expect(fromVariable.stdout).toMatch(
        / {6}requests: 20 # LEDGER_GATEWAY_PROTECTION__DEFAULT__RATE__REQUESTS\n {6}perSeconds: 1\n/,
      );
      const bad = writeConfig('protection: { default: { rate: { requests: 10, perSeconds: 0 } } }\n');
      const refused = await runToExit(['dist/main.js', '--check', '--config', bad]);
      expect(refused.code).toBe(2);
      expect(refused.stderr.split('\n').filter((line) => line.startsWith('  - '))).toEqual([
        '  - protection.default.rate.perSeconds: must be >= 1',
      ]);
    },
    TEST_MS,
  );
});

describe("Kubernetes' service links", () => {
  it(
    'the variables of Services named ledger-gateway and ledger-gateway-admin leave the configured ports alone',
    async () => {
      const upstream = await startRecordingUpstream(answerJson(200, { version: '3.5.10' }));
      const issuer = await createTestIssuer();
      const [port, adminPort] = [await freePort(), await freePort()];
      const file = writeConfig(
        [
          `auth: { participantId: ${TEST_PARTICIPANT}, issuers: [${JSON.stringify(issuer.issuerConfig)}] }`,
          `upstream: { url: "${upstream.url}" }`,
          `server: { host: 127.0.0.1, port: ${port} }`,
          `admin: { host: 127.0.0.1, port: ${adminPort} }`,
        ].join('\n'),
      );
      const env = {
        ...serviceLinks('ledger-gateway', '10.96.0.12', 8080),
        ...serviceLinks('ledger-gateway-admin', '10.96.0.13', 9464),
        ...serviceLinks('ledger-gateway-server--x', '10.96.0.14', 80),
      };
      const gateway = await startProcess(['dist/main.js', '--config', file], env);
      try {
        expect(new URL(gateway.api).port).toBe(String(port));
        expect(new URL(gateway.admin).port).toBe(String(adminPort));
        const answer = await fetch(`${gateway.api}/v2/version`, {
          headers: { authorization: `Bearer ${await issuer.mint()}` },
        });
        expect(answer.status).toBe(200);
        const warnings = gateway.output.filter((line) => line.includes('service link'));
        expect(warnings).toHaveLength(1);
        expect(JSON.parse(warnings[0]!)).toMatchObject({
          level: 'warn',
          variables: ['LEDGER_GATEWAY_ADMIN_PORT', 'LEDGER_GATEWAY_PORT', 'LEDGER_GATEWAY_SERVER__X_PORT'],
        });
      } finally {
        gateway.child.kill('SIGTERM');
        await gateway.exited;
        await upstream.close();
      }
    },
    TEST_MS,
  );
});
