// The status page of the admin listener against a real gateway with consumers: its data behind the
// admin token, its strict Content-Security-Policy, and the page rendered in a real Chromium
// (playwright-core driving the system's browser): each consumer's quota use, usage and keys as the
// calls made them, no secret, key, hash or token anywhere on it, and a screenshot written.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { describeNeeding } from '../helpers/tool-groups.js';
import { chromiumPath } from '../helpers/system-tools.js';
import { rawRequest } from '../auth/support/http.js';
import { keyFilePath, ledgerEnd, newKey, writeKeys } from '../consumers/support.js';

const ADMIN_TOKEN = 'admin-token-for-the-status-page';
const OPERATION = 'getV2StateLedger-end';

let upstream: RecordingUpstream | undefined;
let gateway: RunningGateway | undefined;
let browser: Browser | undefined;
closeAfterEach(
  () => browser,
  () => gateway,
  () => upstream,
);

/** A gateway with two consumers (one by token claims with quotas, one by gateway key), after a few calls. */
async function gatewayWithUsage() {
  upstream = await startRecordingUpstream();
  const file = keyFilePath();
  const payments = newKey('payments', { sources: ['127.0.0.1/32'], description: 'settlement batch' });
  writeKeys(file, [payments.record]);
  gateway = await startGateway(upstream.url, {
    admin: { purgeToken: ADMIN_TOKEN },
    consumers: {
      list: [
        {
          name: 'alice-app',
          match: { tokens: [{ sub: 'alice' }] },
          quotas: { default: { perMonth: 100 }, operations: { [OPERATION]: { perDay: 3 } } },
        },
        { name: 'payments' },
      ],
      keys: { store: 'file', file, refreshIntervalMs: 100 },
    },
  });
  const alice = `Bearer ${await gateway.issuer.mint()}`;
  const bob = `Bearer ${await gateway.issuer.mint({ sub: 'bob' })}`;
  for (const authorization of [alice, alice, `Bearer ${payments.key}`, bob])
    expect((await ledgerEnd(gateway.url, authorization)).status).toBe(200);
  return { gateway, secrets: [ADMIN_TOKEN, payments.key, payments.record.hash, alice.slice(7), bob.slice(7)] };
}

const statusData = (authorization?: string) =>
  rawRequest(gateway!.adminUrl, '/status/data', {
    headers: authorization === undefined ? [] : ['authorization', authorization],
  });

describe('the status page on the admin listener', () => {
  it('serves its data with the admin token only, and never a key, a hash or a token', async () => {
    const { secrets } = await gatewayWithUsage();
    expect((await statusData()).status).toBe(403);
    expect((await statusData('Bearer not-the-admin-token')).status).toBe(403);
    const answer = await statusData(`Bearer ${ADMIN_TOKEN}`);
    expect(answer.status).toBe(200);
    expect(answer.headers['cache-control']).toBe('no-store');
    for (const secret of secrets) expect(answer.text).not.toContain(secret);
    const report = answer.json() as {
      consumers: { consumers: Array<{ name: string; quotas: unknown[]; usage: unknown[]; keys: unknown[] }> };
    };
    const [alice, payments] = report.consumers.consumers;
    expect(alice!.quotas).toEqual([
      expect.objectContaining({ operation: OPERATION, period: 'day', limit: 3, used: 2 }),
      expect.objectContaining({ operation: OPERATION, period: 'month', limit: 100, used: 2 }),
    ]);
    expect(alice!.usage.at(-1)).toMatchObject({ calls: 2, refused: 0, failed: 0 });
    expect(payments!.keys).toEqual([
      expect.objectContaining({ state: 'in force', sources: ['127.0.0.1/32'], description: 'settlement batch' }),
    ]);
    expect(payments!.keys[0]).not.toHaveProperty('hash');
  });

  it('answers every part of the page under a strict Content-Security-Policy, from the gateway itself', async () => {
    await gatewayWithUsage();
    for (const [path, type] of [
      ['/status', 'text/html'],
      ['/status/page.js', 'text/javascript'],
      ['/status/page.css', 'text/css'],
    ] as const) {
      const answer = await rawRequest(gateway!.adminUrl, path);
      expect(answer.status, path).toBe(200);
      expect(answer.headers['content-type'], path).toContain(type);
      expect(answer.headers['content-security-policy'], path).toMatch(/^default-src 'none'; script-src 'self';/);
      expect(answer.headers['x-content-type-options'], path).toBe('nosniff');
      // No asset from elsewhere: every src and href of the page is a path of this listener.
      for (const [, target] of answer.text.matchAll(/(?:src|href)="([^"]+)"/g)) expect(target).toMatch(/^\/status\//);
    }
  });
});

describeNeeding('chromium')('the status page in a browser', () => {
  it("shows each consumer's quota use, usage and keys, and no secret, in Chromium", async () => {
    const { secrets } = await gatewayWithUsage();
    browser = await chromium.launch({ executablePath: chromiumPath(), chromiumSandbox: false });
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));
    await page.goto(`${gateway!.adminUrl}/status#token=${ADMIN_TOKEN}`);
    await page.waitForSelector('body[data-loaded="true"]');

    // The token left the address bar before anything was shown.
    expect(new URL(page.url()).hash).toBe('');
    expect(await page.textContent('#summary')).toMatch(
      /^Ready \(.*upstream ok.*\); configuration [0-9a-f]{16}; as of /,
    );
    const rows = (consumer: string, table: number) =>
      page.$$eval(`section[data-consumer="${consumer}"] table:nth-of-type(${table}) tr`, (lines) =>
        lines.map((line) => [...line.children].map((cell) => cell.textContent)),
      );
    const aliceQuotas = await rows('alice-app', 1);
    expect(aliceQuotas[0]).toEqual(['operation', 'period', 'used', 'limit', 'left', 'resets at (UTC)']);
    expect(aliceQuotas.slice(1).map((row) => row.slice(0, 5))).toEqual([
      [OPERATION, 'day', '2', '3', '1'],
      [OPERATION, 'month', '2', '100', '98'],
    ]);
    const aliceUsage = await rows('alice-app', 2);
    expect(aliceUsage.at(-1)!.slice(1, 4)).toEqual(['2', '0', '0']);
    const paymentsUsage = await rows('payments', 1);
    expect(paymentsUsage.at(-1)!.slice(1, 4)).toEqual(['1', '0', '0']);
    const paymentsKeys = await rows('payments', 2);
    expect(paymentsKeys[1]!.slice(1)).toEqual([
      'in force',
      expect.stringMatching(/^\d{4}-/),
      expect.stringMatching(/^\d{4}-/),
      '127.0.0.1/32',
      'every',
      'settlement batch',
    ]);
    expect((await rows('unmapped', 1)).at(-1)!.slice(1, 2)).toEqual(['1']);

    const html = await page.content();
    for (const secret of secrets) expect(html).not.toContain(secret);
    expect(problems).toEqual([]); // no CSP violation, no script error

    const screenshot = join(mkdtempSync(join(tmpdir(), 'status-page-')), 'status-page.png');
    await page.screenshot({ path: screenshot, fullPage: true });
    const png = readFileSync(screenshot);
    expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
    expect(png.length).toBeGreaterThan(10_000);
    console.log(`status page screenshot: ${screenshot}`);
  }, 60_000);

  it('asks for the admin token when opened without it, and shows no data', async () => {
    await gatewayWithUsage();
    browser = await chromium.launch({ executablePath: chromiumPath(), chromiumSandbox: false });
    const page = await browser.newPage();
    await page.goto(`${gateway!.adminUrl}/status`);
    await page.waitForSelector('body[data-loaded="true"]');
    expect(await page.textContent('#summary')).toContain('/status#token=<admin.purgeToken>');
    expect(await page.$$('section')).toHaveLength(0);
  }, 60_000);
});
