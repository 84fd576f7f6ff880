// One 'close' listener per response runs the stages' close work in order, once, whether the answer
// was sent or its client left; work added after the close runs at once.
import { createServer, request as httpRequest, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { onResponseClose } from '../../src/exchange/response-close.js';

const servers: ReturnType<typeof createServer>[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A server whose handler gets each response; resolves with its port. */
async function serve(handle: (response: ServerResponse) => void): Promise<number> {
  const server = createServer((_request, response) => handle(response));
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

describe('onResponseClose', () => {
  it('runs the listeners in the order they were added, once each, after the answer is sent, with one close listener', async () => {
    const ran: string[] = [];
    const closed = Promise.withResolvers<number>();
    const port = await serve((response) => {
      for (const name of ['telemetry', 'protection', 'forwarder']) onResponseClose(response, () => ran.push(name));
      const listenerCount = response.listenerCount('close');
      response.on('close', () => setImmediate(() => closed.resolve(listenerCount)));
      response.end('ok');
    });
    const answer = await fetch(`http://127.0.0.1:${port}/`);
    expect(await answer.text()).toBe('ok');
    expect(await closed.promise).toBe(1);
    expect(ran).toEqual(['telemetry', 'protection', 'forwarder']);
  });

  it('runs them when the client leaves before the answer, and at once for one added after the close', async () => {
    const ran: string[] = [];
    const done = Promise.withResolvers<void>();
    const port = await serve((response) => {
      onResponseClose(response, () => {
        ran.push(`first, finished: ${response.writableFinished}`);
        setImmediate(() => {
          onResponseClose(response, () => ran.push('late'));
          done.resolve();
        });
      });
      response.write('partial');
    });
    const client = httpRequest({ host: '127.0.0.1', port, path: '/' }, (answer) => {
      answer.once('data', () => client.destroy());
    });
    client.on('error', () => {});
    client.end();
    await done.promise;
    expect(ran).toEqual(['first, finished: false', 'late']);
  });
});
