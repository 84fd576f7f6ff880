// The bench's allocation summary (npm run bench:alloc) on a sampling heap profile whose answer is known.
import { describe, expect, it } from 'vitest';
import { originOf, summarizeAllocations } from '../../bench/alloc-summary.mjs';

interface Node {
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number; scriptId: string };
  selfSize: number;
  id: number;
  children: Node[];
}

let ids = 0;
const node = (functionName: string, url: string, selfSize: number, children: Node[] = [], lineNumber = 0): Node => ({
  callFrame: { functionName, url, lineNumber, columnNumber: 0, scriptId: '0' },
  selfSize,
  id: ++ids,
  children,
});

/**
 * (root) -> parserOnIncoming (node:_http_server) 3,000 -> handler (dist/app.js) 1,000
 *   -> dispatch (undici) 4,000 ; handler -> write (dist/telemetry/logging.js) 1,500
 * (root) -> (V8 API) 500 ; and the same handler reached by a second path: 500 more.
 * 10,500 bytes over 10 requests.
 */
const profile = {
  head: node('(root)', '', 0, [
    node(
      'parserOnIncoming',
      'node:_http_server',
      3_000,
      [
        node(
          'handler',
          'file:///srv/gateway/dist/app.js',
          1_000,
          [
            node('dispatch', 'file:///srv/gateway/node_modules/undici/lib/dispatcher/pool-base.js', 4_000, [], 155),
            node('write', 'file:///srv/gateway/dist/telemetry/logging.js', 1_500, [], 227),
          ],
          205,
        ),
      ],
      1166,
    ),
    node('(V8 API)', '', 500),
    node('emit', 'node:events', 0, [node('handler', 'file:///srv/gateway/dist/app.js', 500, [], 205)]),
  ]),
  samples: [],
};

describe('summarizeAllocations', () => {
  it('divides the sampled bytes by the requests, by origin and by function (one function reached twice counts once)', () => {
    const lines = summarizeAllocations(profile, 10, { top: 3, ownTop: 5 });
    expect(lines[0]).toBe('allocated per request: 1,050 B (10 requests)');
    const section = (title: string) => {
      const start = lines.findIndex((line) => line.startsWith(title));
      const end = lines.findIndex((line, index) => index > start && !line.startsWith('  '));
      return lines.slice(start + 1, end === -1 ? undefined : end).map((line) => line.trim().replace(/\s+/g, ' '));
    };
    expect(section('by origin')).toEqual([
      '400 B 38.1% package undici',
      '300 B 28.6% ours',
      '300 B 28.6% node:_http_server',
      '50 B 4.8% (V8, native)',
    ]);
    expect(section('by function, top 3')).toEqual([
      '400 B 38.1% dispatch undici/lib/dispatcher/pool-base.js:156',
      '300 B 28.6% parserOnIncoming node:_http_server:1167',
      '150 B 14.3% handler app.js:206',
    ]);
    expect(section("the gateway's own functions (300 B in all)")).toEqual([
      '150 B 14.3% handler app.js:206',
      '150 B 14.3% write telemetry/logging.js:228',
    ]);
  });

  it('leaves the own section out for a process without the gateway, and says when nothing was sampled', () => {
    const floor = { head: node('(root)', '', 0, [node('dispatch', 'file:///x/node_modules/undici/lib/a.js', 2_000)]) };
    const lines = summarizeAllocations(floor, 4);
    expect(lines[0]).toBe('allocated per request: 500 B (4 requests)');
    expect(lines.some((line) => line.includes("gateway's own"))).toBe(false);
    expect(summarizeAllocations({ head: node('(root)', '', 0) }, 100)).toEqual(['allocations: nothing sampled']);
    expect(summarizeAllocations(profile, 0)).toEqual(['allocations: nothing sampled']);
  });

  it.each([
    ['file:///app/dist/proxy/forward.js', 'ours'],
    ['file:///app/node_modules/@fastify/otel/index.js', 'package @fastify/otel'],
    ['file:///app/node_modules/fastify/lib/route.js', 'package fastify'],
    ['node:internal/streams/readable', 'node:internal/streams'],
    ['node:_http_outgoing', 'node:_http_outgoing'],
    ['', '(V8, native)'],
  ])('names the origin of %j: %s', (url, origin) => {
    expect(originOf(url)).toBe(origin);
  });
});
