// The status page on the admin listener: GET /status, plain HTML with a small script and a style
// sheet, all served here (no external asset), under a strict Content-Security-Policy (no inline
// script or style, nothing fetched but this origin's /status/data). The page itself holds no data;
// the script fetches /status/data, which the admin token guards as GET /config and GET /usage are.
// A browser cannot set a header on a navigation, so the page is opened as /status#token=<token>:
// the fragment never leaves the browser (RFC 3986 §3.5), and the script takes the token out of the
// address bar before it sends it, in Authorization, to /status/data. It writes every value as text
// (textContent), never as markup.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ConsumersStatus } from '../consumers/status.js';

/** What /status/data answers: which configuration runs, the readiness checks, the consumers. */
export interface StatusReport {
  readonly generatedAt: string;
  readonly fingerprint: string;
  readonly ready: boolean;
  readonly checks: Readonly<Record<string, string>>;
  /** Undefined: no consumer is configured. */
  readonly consumers: ConsumersStatus | undefined;
}

export interface StatusPageOptions {
  /** Whether the caller may read the data (the admin token, or a trusted loopback peer). */
  readonly allowed: (request: FastifyRequest) => boolean;
  readonly report: () => Promise<StatusReport>;
}

/** Only this origin's script, style sheet and data; no frame, no form, no base, no plugin. */
export const STATUS_PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'none'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<title>ledger-gateway status</title>
<link rel="stylesheet" href="/status/page.css">
<script src="/status/page.js" defer></script>
</head>
<body>
<header><h1>ledger-gateway</h1><p id="summary">Loading…</p></header>
<main id="consumers"></main>
</body>
</html>
`;

const STYLE = `body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1b1f24; }
h1 { font-size: 1.3rem; margin: 0; }
h2 { font-size: 1.1rem; margin: 1.5rem 0 0.4rem; }
h3 { font-size: 0.95rem; margin: 0.8rem 0 0.3rem; color: #444c56; }
table { border-collapse: collapse; margin-bottom: 0.5rem; }
th, td { border: 1px solid #d0d7de; padding: 0.2rem 0.6rem; text-align: left; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
tr.spent td { background: #ffebe9; }
p.note { color: #57606a; margin: 0.2rem 0; }
`;

const SCRIPT = `'use strict';
(function () {
  var token = new URLSearchParams(location.hash.slice(1)).get('token');
  if (token !== null) history.replaceState(null, '', location.pathname);
  var headers = token === null ? {} : { authorization: 'Bearer ' + token };

  function element(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined) node.textContent = String(text);
    if (className !== undefined) node.className = className;
    return node;
  }
  function table(columns, rows, rowClass) {
    var node = element('table');
    var head = node.appendChild(element('tr'));
    columns.forEach(function (column) { head.appendChild(element('th', column[0])); });
    rows.forEach(function (row) {
      var line = node.appendChild(element('tr', undefined, rowClass ? rowClass(row) : undefined));
      columns.forEach(function (column) {
        var value = row[column[1]];
        line.appendChild(element('td', value === undefined ? '' : value, typeof value === 'number' ? 'number' : undefined));
      });
    });
    return node;
  }
  function usageTable(days) {
    return table([['day', 'day'], ['calls', 'calls'], ['refused', 'refused'], ['failed', 'failed'],
      ['request bytes', 'requestBytes'], ['response bytes', 'responseBytes']], days);
  }
  function consumerSection(consumer) {
    var section = element('section');
    section.dataset.consumer = consumer.name;
    section.appendChild(element('h2', consumer.name));
    section.appendChild(element('h3', 'Quotas'));
    if (consumer.quotas.length === 0) section.appendChild(element('p', 'No quota in use.', 'note'));
    else section.appendChild(table([['operation', 'operation'], ['period', 'period'], ['used', 'used'],
      ['limit', 'limit'], ['left', 'left'], ['resets at (UTC)', 'resetsAt']],
      consumer.quotas.map(function (quota) {
        return Object.assign({}, quota, { left: Math.max(0, quota.limit - quota.used) });
      }), function (quota) { return quota.used >= quota.limit ? 'spent' : undefined; }));
    section.appendChild(element('h3', 'Usage by day'));
    section.appendChild(usageTable(consumer.usage));
    section.appendChild(element('h3', 'Gateway keys'));
    if (consumer.keys.length === 0) section.appendChild(element('p', 'No gateway key.', 'note'));
    else section.appendChild(table([['id', 'id'], ['state', 'state'], ['created', 'createdAt'],
      ['expires', 'expiresAt'], ['sources', 'sources'], ['operations', 'operations'], ['description', 'description']],
      consumer.keys.map(function (key) {
        return Object.assign({}, key, {
          sources: key.sources ? key.sources.join(', ') : 'any',
          operations: key.operations ? key.operations.join(', ') : 'every'
        });
      })));
    if (consumer.brokeredToken !== undefined) {
      var held = consumer.brokeredToken;
      section.appendChild(element('h3', 'Brokered Canton token'));
      section.appendChild(element('p', held.state + (held.expiresAt ? ', expires ' + held.expiresAt : '') +
        (held.lastFailure ? '; last failure: ' + held.lastFailure : ''), 'note'));
    }
    return section;
  }
  function render(report) {
    var checks = Object.keys(report.checks).map(function (name) { return name + ' ' + report.checks[name]; });
    document.getElementById('summary').textContent = (report.ready ? 'Ready' : 'Not ready') +
      ' (' + checks.join(', ') + '); configuration ' + report.fingerprint + '; as of ' + report.generatedAt + '.';
    var main = document.getElementById('consumers');
    main.replaceChildren();
    if (report.consumers === undefined) {
      main.appendChild(element('p', 'No consumer is configured (consumers.list).', 'note'));
      return;
    }
    main.appendChild(element('p', 'Usage: ' + report.consumers.usageScope + '.', 'note'));
    report.consumers.consumers.forEach(function (consumer) { main.appendChild(consumerSection(consumer)); });
    var unmapped = element('section');
    unmapped.dataset.consumer = 'unmapped';
    unmapped.appendChild(element('h2', 'Calls no consumer claims (unmapped)'));
    unmapped.appendChild(usageTable(report.consumers.unmapped));
    main.appendChild(unmapped);
  }
  function load() {
    fetch('/status/data', { headers: headers, cache: 'no-store' }).then(function (answer) {
      if (answer.status === 403) {
        document.getElementById('summary').textContent =
          'Open this page as /status#token=<admin.purgeToken> (or from loopback with admin.trustLoopback).';
        return undefined;
      }
      return answer.json().then(render);
    }).catch(function () {
      document.getElementById('summary').textContent = 'The gateway did not answer.';
    }).finally(function () { document.body.dataset.loaded = 'true'; });
  }
  load();
  setInterval(load, 10000);
})();
`;

/** Headers of every answer of the page: its policy, no sniffing, no referrer, never cached. */
function pageHeaders(reply: FastifyReply, type: string): FastifyReply {
  return reply
    .type(type)
    .header('content-security-policy', STATUS_PAGE_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', 'no-store');
}

/** Registers GET /status, its script and style sheet, and GET /status/data (behind the admin token). */
export function serveStatusPage(server: FastifyInstance, options: StatusPageOptions): void {
  server.get('/status', async (_request, reply) => pageHeaders(reply, 'text/html; charset=utf-8').send(PAGE));
  server.get('/status/page.js', async (_request, reply) =>
    pageHeaders(reply, 'text/javascript; charset=utf-8').send(SCRIPT),
  );
  server.get('/status/page.css', async (_request, reply) => pageHeaders(reply, 'text/css; charset=utf-8').send(STYLE));
  server.get('/status/data', async (request, reply) => {
    if (!options.allowed(request))
      return pageHeaders(reply, 'application/json; charset=utf-8')
        .code(403)
        .send({ error: 'the status is shown with the admin purge token only' });
    return pageHeaders(reply, 'application/json; charset=utf-8').send(await options.report());
  });
}
