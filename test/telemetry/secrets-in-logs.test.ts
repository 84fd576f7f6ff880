// What must never reach a log line (issue 40 §5): a value read with ${file:...} (an issuer's
// audience, in the reason of a 401), a credential in a query (access_token, token, id_token, ...),
// a JWT anywhere in a logged request target, and a secret key nested deeper than the redaction
// used to look. The first three on the built process's own output; the redaction's bounds unit by unit.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { REDACTED, REDACTED_BEYOND_BOUND, redactSecrets, scrubUrl } from '../../src/telemetry/logging.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { buildDist, startProcess, writeGatewayConfig, type GatewayProcess } from '../helpers/process.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';

beforeAll(() => buildDist(), 120_000);

let upstream: RecordingUpstream | undefined;
let gateway: GatewayProcess | undefined;
closeAfterEach(
  () => gateway,
  () => upstream,
);

const SECRET_AUDIENCE = 'https://audience-read-from-a-file.example/4f1e9c';

describe('the built process logs no secret', () => {
  it('an audience read with ${file:...} is not in a 401 line; query credentials and JWTs are not in the access line', async () => {
    upstream = await startRecordingUpstream(answerJson(200, { offset: 7 }));
    const issuer = await createTestIssuer();
    const audienceFile = join(mkdtempSync(join(tmpdir(), 'audience-')), 'audience');
    writeFileSync(audienceFile, `${SECRET_AUDIENCE}\n`);
    const file = writeGatewayConfig(
      upstream.url,
      { ...issuer.issuerConfig, audience: `\${file:${audienceFile}}` },
      TEST_PARTICIPANT,
      ['log: { level: info, access: { enabled: true, includeQuery: true } }'],
    );
    gateway = await startProcess(['dist/main.js', '--config', file]);
    const running = gateway;
    const get = async (target: string, token: string) => {
      const answer = await fetch(`${running.api}${target}`, { headers: { authorization: `Bearer ${token}` } });
      await answer.arrayBuffer();
      return answer.status;
    };
    const other = await issuer.mint({ aud: 'https://another-audience.example' });
    const valid = await issuer.mint({ aud: SECRET_AUDIENCE });
    expect(await get('/v2/state/ledger-end', other)).toBe(401);
    const jwt = await issuer.mint({ sub: 'in-the-query' });
    expect(await get(`/v2/state/ledger-end?access_token=${jwt}&token=tok-7d2&ID_TOKEN=idt-91a&offset=5`, valid)).toBe(
      200,
    );
    const jwtInPath = await issuer.mint({ sub: 'in-the-path' });
    expect(await get(`/v2/users/${jwtInPath}`, valid)).toBe(200);

    const requestLines = async (count: number) => {
      await expect
        .poll(() => running.output.filter((line) => line.includes('"msg":"request"')).length, { timeout: 5_000 })
        .toBeGreaterThanOrEqual(count);
      return running.output.filter((line) => line.includes('"msg":"request"'));
    };
    const [refused, query, path] = await requestLines(3);
    expect(refused).toMatch(/"status":401/);
    expect(refused).toMatch(/"reason":"[^"]*audience/);
    expect(query).toContain(
      `"path":"/v2/state/ledger-end?access_token=${REDACTED}&token=${REDACTED}&ID_TOKEN=${REDACTED}&offset=5"`,
    );
    expect(path).toContain(`"path":"/v2/users/${REDACTED}"`);
    const everything = running.output.join('\n');
    expect(everything).not.toContain(SECRET_AUDIENCE);
    for (const secret of [jwt, jwtInPath, valid, other, 'tok-7d2', 'idt-91a']) expect(everything).not.toContain(secret);
  }, 30_000);
});

describe('scrubUrl', () => {
  it.each([
    ['/v2/parties?access_token=abc&x=1', `/v2/parties?access_token=${REDACTED}&x=1`],
    ['/v2/parties?Token=abc&id%5Ftoken=def', `/v2/parties?Token=${REDACTED}&id%5Ftoken=${REDACTED}`],
    ['/v2/parties?pageToken=next-7&refresh_token=r', `/v2/parties?pageToken=next-7&refresh_token=${REDACTED}`],
    ['/v2/users/eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl/rights', `/v2/users/${REDACTED}/rights`],
    ['/v2/parties?filter=eyJhbGciOi.eyJzdWIiOi.c2ln', `/v2/parties?filter=${REDACTED}`],
    ['/v2/parties?party=alice::1220ab', '/v2/parties?party=alice::1220ab'],
    ['/v2/version', '/v2/version'],
  ])('%s is logged as %s', (url, logged) => {
    expect(scrubUrl(url)).toBe(logged);
  });
});

describe('redactSecrets', () => {
  /** `{ next: { next: ... { password } } }`, `levels` deep. */
  function nested(levels: number, leaf: Record<string, unknown>): Record<string, unknown> {
    let value: Record<string, unknown> = leaf;
    for (let i = 0; i < levels; i++) value = { next: value };
    return value;
  }

  it('redacts a secret key at any depth a body can have (20 and 600 levels down; it used to stop at 8)', () => {
    for (const levels of [20, 600]) {
      const text = JSON.stringify(redactSecrets(nested(levels, { password: 'p-4c1', kept: 'k' })));
      expect(text).not.toContain('p-4c1');
      expect(text).toContain(`"password":"${REDACTED}"`);
      expect(text).toContain('"kept":"k"');
    }
  });

  it('past its bounds replaces what is left whole, never writing it unredacted: 1,500 levels, or a million values', () => {
    const deep = JSON.stringify(redactSecrets(nested(1_500, { password: 'p-4c1' })));
    expect(deep).not.toContain('p-4c1');
    expect(deep).toContain(REDACTED_BEYOND_BOUND);
    const wide = { rows: Array.from({ length: 1_100_000 }, () => ({ n: 1 })), last: { secret: 's-88e' } };
    const text = JSON.stringify(redactSecrets(wide));
    expect(text).not.toContain('s-88e');
  });

  it('returns a value without secrets as it is (no copy)', () => {
    const value = nested(50, { kept: 1 });
    expect(redactSecrets(value)).toBe(value);
  });
});
