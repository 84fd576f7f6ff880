// The gateway's peers, configured and started: nginx as the fixed upstream and as a plain reverse
// proxy, HAProxy as a plain proxy and verifying an RS256 JWT on every request, the naive Fastify
// proxy and the floors. nginx and HAProxy get one worker and run in the foreground from a temp dir:
// no root path is read or written (nginx -p <dir> -e stderr).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, portAccepts, startProcess, waitUntil } from './processes.mjs';
import { AUDIENCE } from './tokens.mjs';

const ROOT = new URL('..', import.meta.url).pathname.replace(/\/$/, '');

function nginxFrame(prefix, serverBlocks, upstreamBlocks = '') {
  for (const dir of ['logs', 'tmp']) mkdirSync(join(prefix, dir), { recursive: true });
  return `# written by bench/run.mjs
worker_processes 1;
pid ${join(prefix, 'nginx.pid')};
error_log stderr warn;
events { worker_connections 8192; }
http {
  access_log off;
  server_tokens off;
  keepalive_timeout 120s;
  keepalive_requests 100000000;
  client_body_temp_path ${join(prefix, 'tmp/body')};
  proxy_temp_path ${join(prefix, 'tmp/proxy')};
  fastcgi_temp_path ${join(prefix, 'tmp/fastcgi')};
  uwsgi_temp_path ${join(prefix, 'tmp/uwsgi')};
  scgi_temp_path ${join(prefix, 'tmp/scgi')};
${upstreamBlocks}
${serverBlocks}
}
`;
}

/** The fixed upstream: the same 1 KB JSON for every method and path (a POST body is read and dropped). */
export function writeNginxUpstreamConfig(prefix, port, answer) {
  const file = join(prefix, 'nginx.conf');
  writeFileSync(
    file,
    nginxFrame(
      prefix,
      `  server {
    listen 127.0.0.1:${port} backlog=4096;
    location / {
      default_type application/json;
      return 200 '${answer}';
    }
  }`,
    ),
  );
  return file;
}

/** nginx as a plain reverse proxy: keep-alive pool to the fixed upstream; /v2/updates upgrades go to the sandbox. */
export function writeNginxProxyConfig(prefix, port, upstreamPort, sandboxPort) {
  const file = join(prefix, 'nginx.conf');
  writeFileSync(
    file,
    nginxFrame(
      prefix,
      `  server {
    listen 127.0.0.1:${port} backlog=4096;
    location / {
      proxy_pass http://fixed;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering on;
    }
    location = /v2/updates {
      proxy_pass http://sandbox;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_read_timeout 120s;
    }
  }`,
      `  upstream fixed {
    server 127.0.0.1:${upstreamPort};
    keepalive 128;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
  }
  upstream sandbox { server 127.0.0.1:${sandboxPort ?? upstreamPort}; }`,
    ),
  );
  return file;
}

/**
 * HAProxy 2.6 checks of a Canton audience-based token, as close to the gateway's as its converters
 * allow: RS256 only, the issuer, the participant audience, exp in the future and at most 300 s away
 * (+5 s tolerance), then the signature (jwt_verify, on every request: HAProxy has no token cache).
 */
function jwtChecks(issuer, publicKeyFile) {
  return `  http-request deny deny_status 401 unless { req.hdr(authorization) -m beg "Bearer " }
  http-request set-var(txn.bearer) http_auth_bearer
  http-request set-var(txn.jwt_alg) var(txn.bearer),jwt_header_query('$.alg')
  http-request set-var(txn.jwt_iss) var(txn.bearer),jwt_payload_query('$.iss')
  http-request set-var(txn.jwt_aud) var(txn.bearer),jwt_payload_query('$.aud')
  http-request set-var(txn.jwt_exp) var(txn.bearer),jwt_payload_query('$.exp','int')
  http-request set-var(txn.now) date()
  http-request set-var(txn.remaining) var(txn.jwt_exp),sub(txn.now)
  http-request deny deny_status 401 unless { var(txn.jwt_alg) -m str RS256 }
  http-request deny deny_status 401 unless { var(txn.jwt_iss) -m str "${issuer}" }
  http-request deny deny_status 401 unless { var(txn.jwt_aud) -m str "${AUDIENCE}" }
  http-request deny deny_status 401 if { var(txn.remaining) -m int lt 0 }
  http-request deny deny_status 401 if { var(txn.remaining) -m int gt 305 }
  http-request deny deny_status 401 unless { var(txn.bearer),jwt_verify(txn.jwt_alg,"${publicKeyFile}") -m int 1 }
`;
}

/** HAProxy, one thread, keep-alive both sides; `jwt` adds the token checks to every request. */
export function writeHaproxyConfig(dir, name, { port, upstreamPort, sandboxPort, jwt }) {
  const file = join(dir, `${name}.cfg`);
  writeFileSync(
    file,
    `# written by bench/run.mjs
global
  nbthread 1
  maxconn 4000
defaults
  mode http
  option http-keep-alive
  http-reuse always
  timeout connect 5s
  timeout client 120s
  timeout server 120s
  timeout tunnel 120s
  timeout http-keep-alive 120s
frontend api
  bind 127.0.0.1:${port}
${jwt === undefined ? '' : jwtChecks(jwt.issuer, jwt.publicKeyFile)}  use_backend sandbox if { path /v2/updates }
  default_backend fixed
backend fixed
  server upstream 127.0.0.1:${upstreamPort} maxconn 1000
backend sandbox
  server sandbox 127.0.0.1:${sandboxPort ?? upstreamPort}
`,
  );
  return file;
}

export async function startNginxProxy(dir, core, upstreamPort, sandboxPort) {
  const port = await freePort();
  const prefix = join(dir, 'nginx-proxy');
  const config = writeNginxProxyConfig(prefix, port, upstreamPort, sandboxPort);
  const handle = startProcess(
    'nginx proxy',
    'nginx',
    ['-p', prefix, '-c', config, '-e', 'stderr', '-g', 'daemon off;'],
    { core, stderr: join(dir, 'nginx-proxy.log') },
  );
  await waitUntil(handle, `listening on ${port}`, () => portAccepts(port));
  return { ...handle, baseUrl: `http://127.0.0.1:${port}` };
}

export async function startHaproxy(dir, name, core, upstreamPort, sandboxPort, jwt) {
  const port = await freePort();
  const config = writeHaproxyConfig(dir, name, { port, upstreamPort, sandboxPort, jwt });
  const handle = startProcess(name, 'haproxy', ['-db', '-f', config], { core, stderr: join(dir, `${name}.log`) });
  await waitUntil(handle, `listening on ${port}`, () => portAccepts(port));
  return { ...handle, baseUrl: `http://127.0.0.1:${port}` };
}

export async function startNaiveProxy(dir, core, upstreamUrl, sandboxPort) {
  const port = await freePort();
  const env = {
    ...process.env,
    NODE_ENV: 'production',
    PORT: String(port),
    UPSTREAM: upstreamUrl,
    ...(sandboxPort && { WS_UPSTREAM: `ws://127.0.0.1:${sandboxPort}` }),
  };
  const handle = startProcess('naive Fastify proxy', process.execPath, [join(ROOT, 'bench/naive-proxy.mjs')], {
    core,
    cwd: ROOT,
    env,
    stderr: join(dir, 'naive.log'),
  });
  await waitUntil(handle, `listening on ${port}`, () => portAccepts(port));
  return { ...handle, baseUrl: `http://127.0.0.1:${port}` };
}

export async function startFloorProxy(dir, core, upstreamUrl, floor) {
  const port = await freePort();
  const env = { ...process.env, NODE_ENV: 'production', PORT: String(port), UPSTREAM: upstreamUrl, FLOOR: floor };
  const handle = startProcess(`${floor} floor proxy`, process.execPath, [join(ROOT, 'bench/floor-proxy.mjs')], {
    core,
    cwd: ROOT,
    env,
    stderr: join(dir, `${floor}-floor.log`),
  });
  await waitUntil(handle, `listening on ${port}`, () => portAccepts(port));
  return { ...handle, baseUrl: `http://127.0.0.1:${port}` };
}
