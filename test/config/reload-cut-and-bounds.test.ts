// Issue 40 §3 on the built process, under the image's heap flags: a config file cut inside
// policy.rules or inside a rule, held longer than the watch's settling, is never applied (a deny
// must not become an allow); a YAML file that fools a nesting scan, or holds too many nodes within
// the 1 MiB bound, is refused before the parser builds it, and the process keeps serving.
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_CONFIG_NODES, parseConfigYaml } from '../../src/config/config-file.js';
import { OUTCOME_MESSAGES } from '../../src/live/reload.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { buildDist, startProcess, type GatewayProcess } from '../helpers/process.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT, type TestIssuer } from '../helpers/tokens.js';

beforeAll(() => buildDist(), 120_000);

const TEST_MS = 60_000;
/** The image's NODE_OPTIONS (deploy/kubernetes/base/deployment.yaml). */
const SHIPPED_HEAP = { NODE_OPTIONS: '--max-old-space-size=211 --max-semi-space-size=2' };
const OPERATION = 'getV2StateLedger-end';
/** Longer than the watch's settling (250 ms quiet, then 250 ms unchanged) and shorter than the second look (2 s). */
const WRITER_PAUSE_MS = 1_200;

let upstream: RecordingUpstream | undefined;
let gateway: GatewayProcess | undefined;
closeAfterEach(
  () => gateway,
  () => upstream,
);

function head(url: string, issuer: TestIssuer): string {
  return [
    `auth: { participantId: ${TEST_PARTICIPANT}, issuers: [${JSON.stringify(issuer.issuerConfig)}] }`,
    `upstream: { url: "${url}" }`,
    'server: { host: 127.0.0.1, port: 0 }',
    'admin: { host: 127.0.0.1, port: 0 }',
    'log: { level: info }',
    '',
  ].join('\n');
}

/** Alice denied by the first rule (its subjects written before its effect), everyone else allowed. */
const POLICY = [
  'policy:',
  '  rules:',
  `    ${OPERATION}:`,
  '      - subjects:',
  '          - mallory',
  '          - alice',
  '        effect: deny',
  '      - anyAuthenticated: true',
  '',
].join('\n');

/** Bob and "alicex" allowed, by the file's last line; alice matches no rule and is refused. */
const POLICY_ENDING_IN_A_SUBJECT = [
  'policy:',
  '  rules:',
  `    ${OPERATION}:`,
  '      - subjects:',
  '          - bob',
  '          - alicex',
  '',
].join('\n');

async function started(policy = POLICY) {
  upstream = await startRecordingUpstream(answerJson(200, { offset: 7 }));
  const issuer = await createTestIssuer();
  const file = join(mkdtempSync(join(tmpdir(), 'reload-cut-')), 'gateway.yaml');
  writeFileSync(file, head(upstream.url, issuer) + policy);
  gateway = await startProcess(['dist/main.js', '--config', file], SHIPPED_HEAP, 30_000);
  const running = gateway;
  const call = async (sub: string) => {
    const answer = await fetch(`${running.api}/v2/state/ledger-end`, {
      headers: { authorization: `Bearer ${await issuer.mint({ sub })}` },
    });
    await answer.arrayBuffer();
    return answer.status;
  };
  const logged = (message: string) =>
    running.output
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.msg === message);
  return { file, call, logged, issuer, upstream, gateway: running };
}

/** Writes the file in place in two pieces, `cut` bytes first, a pause between, while alice calls on. */
async function writeCut(
  file: string,
  text: string,
  cut: number,
  call: (sub: string) => Promise<number>,
): Promise<number[]> {
  const statuses: number[] = [];
  let writing = true;
  const client = (async () => {
    while (writing) statuses.push(await call('alice'));
  })();
  try {
    writeFileSync(file, text.slice(0, cut));
    await new Promise((resolve) => setTimeout(resolve, WRITER_PAUSE_MS));
    writeFileSync(file, text);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
  } finally {
    writing = false;
    await client;
  }
  return statuses;
}

describe('a config file cut while it is written', () => {
  it(
    'cut inside policy.rules, between two lines of a rule: never applied, alice never let through',
    async () => {
      const { file, call, logged, issuer, upstream: participant } = await started();
      expect(await call('alice')).toBe(403);
      const complete = head(participant.url, issuer) + 'protection: { maxInFlight: 500 }\n' + POLICY;
      // The prefix ends after alice's line: a valid file whose first rule has no effect (allow) and no second rule.
      const statuses = await writeCut(file, complete, complete.indexOf('        effect: deny'), call);
      expect(statuses.length).toBeGreaterThan(5);
      expect(statuses.filter((status) => status !== 403)).toEqual([]);
      expect(logged('configuration reloaded')).toHaveLength(1);
      const held = logged(
        'configuration reload: the file drops keys the running configuration has; it is read again once unchanged',
      );
      expect(held.length).toBeGreaterThan(0);
      expect(held[0]!.dropped).toEqual(
        expect.arrayContaining([`policy.rules.${OPERATION}[0].effect`, `policy.rules.${OPERATION}[1]`]),
      );
      expect(await call('alice')).toBe(403);
      expect(await call('bob')).toBe(200);
    },
    TEST_MS,
  );

  it(
    'cut inside a rule, in the middle of the last subject: never applied, alice never let through',
    async () => {
      const { file, call, logged, issuer, upstream: participant } = await started(POLICY_ENDING_IN_A_SUBJECT);
      expect(await call('alice')).toBe(403);
      const complete =
        head(participant.url, issuer) + 'protection: { maxInFlight: 500 }\n' + POLICY_ENDING_IN_A_SUBJECT;
      // "- alice" of "- alicex": every key is still there; only the unended last line tells.
      const statuses = await writeCut(file, complete, complete.indexOf('alicex') + 'alice'.length, call);
      expect(statuses.length).toBeGreaterThan(5);
      expect(statuses.filter((status) => status !== 403)).toEqual([]);
      expect(
        logged(
          "configuration reload: the file's last line has no line break (a write under way?); it is read again once unchanged",
        ).length,
      ).toBeGreaterThan(0);
      expect(logged('configuration reloaded')).toHaveLength(1);
      expect(await call('alice')).toBe(403);
      expect(await call('bob')).toBe(200);
    },
    TEST_MS,
  );
});

/** Replaces the file whole (a rename, as an editor or the kubelet does). */
function replace(file: string, text: string): void {
  writeFileSync(`${file}.next`, text);
  renameSync(`${file}.next`, file);
}

describe('a hostile config file, under the image heap flags', () => {
  it(
    'a quote that fooled the nesting scan, and a 1 MiB rules file, are refused unparsed; the process serves on',
    async () => {
      const { file, call, logged, issuer, upstream: participant, gateway: process } = await started();
      // "it's" opened a quote for a hand-written scan, which then missed 400,000 nested brackets.
      const levels = 200_000;
      replace(file, `${head(participant.url, issuer)}cors: [it's, ${'['.repeat(levels)}${']'.repeat(levels)}]\n`);
      await expect.poll(() => logged(OUTCOME_MESSAGES.invalid).length, { timeout: 20_000, interval: 100 }).toBe(1);
      expect(logged(OUTCOME_MESSAGES.invalid)[0]!.problems).toEqual([
        expect.stringMatching(/^the file nests \d+ levels deep; at most 32 are read$/),
      ]);
      // Just under 1 MiB of rules, each naming 50 subjects: about 130,000 nodes.
      const rule = `      - { subjects: [${Array.from({ length: 50 }, (_, index) => `user${index}`).join(', ')}] }\n`;
      const rules = `${head(participant.url, issuer)}policy:\n  rules:\n    ${OPERATION}:\n`;
      const big = rules + rule.repeat(Math.floor((1_040_000 - rules.length) / rule.length));
      expect(big.length).toBeGreaterThan(1_000_000);
      replace(file, big);
      await expect.poll(() => logged(OUTCOME_MESSAGES.invalid).length, { timeout: 20_000, interval: 100 }).toBe(2);
      expect(logged(OUTCOME_MESSAGES.invalid)[1]!.problems).toEqual([
        expect.stringMatching(new RegExp(`^the file holds \\d+ YAML nodes; at most ${MAX_CONFIG_NODES} are read$`)),
      ]);
      expect(process.child.exitCode).toBeNull();
      expect(await call('bob')).toBe(200);
      expect(await call('alice')).toBe(403);
    },
    TEST_MS,
  );
});

describe('parseConfigYaml', () => {
  it('refuses an alias expanded past 100 uses (a "billion laughs"), and takes a few anchors as written', () => {
    const laughs = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let level = 1; level < 6; level++) {
      const previous = String.fromCharCode(96 + level);
      const name = String.fromCharCode(97 + level);
      laughs.push(`${name}: &${name} [${Array.from({ length: 10 }, () => `*${previous}`).join(', ')}]`);
    }
    const bomb = parseConfigYaml(`${laughs.join('\n')}\n`);
    expect(bomb).toEqual({ problem: expect.stringMatching(/^not valid YAML: .*[Ee]xcessive alias count/) });
    const reuse = parseConfigYaml('x: &rules [{ anyAuthenticated: true }]\ny: *rules\n');
    expect(reuse).toEqual({ parsed: { x: [{ anyAuthenticated: true }], y: [{ anyAuthenticated: true }] } });
  });
});
