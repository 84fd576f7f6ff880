// Ledger policies on the verified client certificate, over real mutual TLS: a policy names its callers
// by certificate subject (RFC 4514, attribute order and spacing aside) or DNS name, and a CEL condition
// reads principal.certificateSubject and principal.certificateDnsNames. The same token with another
// certificate, or none, is not the caller the policy names.
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { describe, expect, it } from 'vitest';
import { createClientCa, type ClientCertificate } from '../helpers/short-lived-certificates.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { ALICE, IOU_BY_ID } from './support.js';

const current = perTest();
const fixture = (name: string) => new URL(`../proxy/fixtures/${name}`, import.meta.url).pathname;
const listenerTls = { certFile: fixture('test-participant.pem'), keyFile: fixture('test-only-participant-key.pem') };
const SUBMIT = '/v2/commands/submit-and-wait';
const LATER = new Date(Date.now() + 3_600_000);

const create = (commandId: string) => ({
  commands: [{ CreateCommand: { templateId: IOU_BY_ID, createArguments: { owner: ALICE } } }],
  commandId,
  actAs: [ALICE],
  userId: 'alice',
});

/** One POST on a fresh mutual-TLS connection with this client certificate (or none): status and refusal. */
function post(gw: RunningGateway, body: object, client?: ClientCertificate) {
  return new Promise<{ status: number; policy?: string; rule?: string }>((resolve, reject) => {
    const text = JSON.stringify(body);
    const request = https.request(
      `${gw.url}${SUBMIT}`,
      {
        method: 'POST',
        ca: [readFileSync(fixture('test-ca.pem'))],
        agent: false,
        headers: gw.auth({ 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) }),
        ...(client === undefined ? {} : { cert: client.cert, key: client.key }),
      },
      (response) => {
        let answer = '';
        response.on('data', (chunk: Buffer) => (answer += chunk.toString()));
        response.on('end', () => {
          const context = answer.startsWith('{')
            ? ((JSON.parse(answer) as { context?: { policy?: string; rule?: string } }).context ?? {})
            : {};
          resolve({ status: response.statusCode ?? 0, ...context });
        });
      },
    );
    request.on('error', reject).end(text);
  });
}

describe('a ledger policy on the client certificate (mutual TLS)', () => {
  it('names its callers by certificate subject and DNS name, and a CEL condition reads them', async () => {
    const ca = createClientCa();
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url, {
      server: { tls: { ...listenerTls, clientCaFile: ca.caFile, clientCertificate: 'request' } },
      ledgerPolicy: {
        policies: [
          {
            // Written in another order and spacing than the certificate's CN=ci-job,O=Acme.
            name: 'ci-by-subject',
            principals: { certificateSubjects: ['O=Acme, CN=ci-job'] },
            rules: [{ name: 'no-creates', effect: 'deny', commandKinds: ['CreateCommand'] }],
          },
          {
            name: 'bots-by-dns',
            principals: { certificateDnsNames: ['bot.acme.test'] },
            rules: [
              {
                name: 'acme-certificates-only',
                operations: ['writes'],
                where:
                  'principal.certificateSubject == "O=Acme,CN=bot" && principal.certificateDnsNames.exists(n, n.endsWith(".acme.test"))',
              },
            ],
          },
        ],
      },
    }));
    const ci = ca.issue('ci-job', LATER, { organization: 'Acme' });
    const ciElsewhere = ca.issue('ci-job', LATER, { organization: 'Globex' });
    const bot = ca.issue('bot', LATER, { organization: 'Acme', dnsNames: ['bot.acme.test'] });
    const foreignBot = ca.issue('bot', LATER, { organization: 'Globex', dnsNames: ['bot.acme.test'] });

    // The token first without a certificate: its facts then (kept per principal) are not the next call's.
    expect(await post(gw, create('first'))).toEqual({ status: 200 });
    expect(await post(gw, create('ci'), ci)).toEqual({ status: 403, policy: 'ci-by-subject', rule: 'no-creates' });
    expect(await post(gw, create('bot'), bot)).toEqual({ status: 200 });
    // Named by its DNS name, but the condition wants Acme's subject: no allow rule covers it.
    expect(await post(gw, create('foreign'), foreignBot)).toEqual({
      status: 403,
      policy: 'bots-by-dns',
      rule: 'default',
    });
    // The same token with a certificate no policy names, or none: the ledger policy has no say.
    expect(await post(gw, create('elsewhere'), ciElsewhere)).toEqual({ status: 200 });
    expect(await post(gw, create('none'))).toEqual({ status: 200 });
    expect(upstream.requests.map((request) => JSON.parse(request.body.toString()).commandId)).toEqual([
      'first',
      'bot',
      'elsewhere',
      'none',
    ]);
  });
});
