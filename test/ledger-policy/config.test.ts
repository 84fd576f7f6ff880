// The ledgerPolicy section at start (--check) and at reload: a policy that does not compile (CEL that
// does not type-check, an unknown operation) is refused with its key path, the running one kept.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkConfiguration } from '../../src/cli/check.js';
import { loadConfig } from '../../src/config/load.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';

const GOOD = {
  policies: [
    {
      name: 'ci',
      principals: { subjects: ['ci'] },
      rules: [{ name: 'bump', choices: ['Bump'], where: 'commands.size() == 1' }],
    },
  ],
};
const BAD = {
  policies: [
    {
      name: 'ci',
      principals: { subjects: ['ci'] },
      rules: [{ name: 'bump', operations: ['postV2Nope'], where: 'commands.all(c, c.choise == "Bump")' }],
    },
  ],
};

function file(lines: string[]): string {
  const path = join(mkdtempSync(join(tmpdir(), 'ledger-policy-config-')), 'gateway.yaml');
  writeFileSync(path, lines.join('\n'));
  return path;
}

let upstream: RecordingUpstream | undefined;
let running: RunningGateway | undefined;
closeAfterEach(
  () => running,
  () => upstream,
);

describe('the ledgerPolicy section', () => {
  it('is judged by --check: every problem with its key path', () => {
    const base = [
      'auth: { participantId: p, issuers: [{ issuer: "https://idp.example", jwksUrl: "https://idp.example/jwks" }] }',
      'upstream: { url: "http://127.0.0.1:7575" }',
    ];
    expect(checkConfiguration(file([...base, `ledgerPolicy: ${JSON.stringify(GOOD)}`]), {}).effective).toContain(
      'ledgerPolicy:',
    );
    expect(() => checkConfiguration(file([...base, `ledgerPolicy: ${JSON.stringify(BAD)}`]), {})).toThrow(
      /ledgerPolicy\.policies\[0\]\.rules\[0\]\.operations: unknown operation "postV2Nope"[\s\S]*ledgerPolicy\.policies\[0\]\.rules\[0\]\.where: does not type-check: No such key: choise/,
    );
    expect(() =>
      checkConfiguration(
        file([
          ...base,
          'ledgerPolicy: { policies: [{ name: x, principals: { subjects: [a] }, rules: [{ name: r, colour: red }] }] }',
        ]),
        {},
      ),
    ).toThrow(/ledgerPolicy\.policies\[0\]\.rules\[0\]\.colour/);
  });

  it('reloads live, and a reload with a rule that does not compile keeps the running configuration', async () => {
    upstream = await startRecordingUpstream(answerJson(200, { offset: 7 }));
    const issuer = await createTestIssuer();
    running = await startGateway(upstream.url, {
      auth: { issuers: [issuer.issuerConfig], participantId: TEST_PARTICIPANT },
    });
    const lines = (section: object) => [
      `auth: { participantId: ${TEST_PARTICIPANT}, issuers: [${JSON.stringify(issuer.issuerConfig)}] }`,
      `upstream: { url: "${upstream!.url}" }`,
      'server: { host: 127.0.0.1, port: 0 }',
      'admin: { host: 127.0.0.1, port: 0 }',
      `ledgerPolicy: ${JSON.stringify(section)}`,
    ];
    const before = running.gateway.fingerprint;
    const refused = await running.gateway.reload(() => loadConfig(file(lines(BAD))), 'test');
    expect(refused.result).not.toBe('success');
    expect(refused.problems.join('\n')).toMatch(/ledgerPolicy\.policies\[0\]\.rules\[0\]\.where: does not type-check/);
    expect(running.gateway.fingerprint).toBe(before);
    const applied = await running.gateway.reload(() => loadConfig(file(lines(GOOD))), 'test');
    expect(applied).toMatchObject({ result: 'success', restartRequired: [] });
    expect(running.gateway.fingerprint).not.toBe(before);
  });
});
