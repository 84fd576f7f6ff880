// P2, parsed-body bombs (issue 40): bodies of arrays nested as deep as policy.maxBodyDepth allows, side
// by side, at the largest size policy.maxBodyBytes allows, on update-by-offset (a read any token may
// make), `concurrency` at a time. Five at once ran the heap out while each parsed body stayed alive
// until its call ended; eight at once held the event loop past the liveness probe's 2 s.
import http from 'node:http';
import { hostileBodies, UPDATE_BY_OFFSET_PATH } from '../../../bench/hostile-body-shapes.mjs';

/** POSTs one body; resolves with its status (0: no answer; undefined: aborted) once its answer is read. */
function post(api, token, body, signal) {
  return new Promise((resolve) => {
    const request = http.request(
      `${api}${UPDATE_BY_OFFSET_PATH}`,
      {
        method: 'POST',
        agent: false,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-length': body.length,
        },
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode));
        response.on('error', () => resolve(0));
      },
    );
    request.on('error', () => resolve(signal.aborted ? undefined : 0));
    signal.addEventListener('abort', () => request.destroy(), { once: true });
    request.end(body);
  });
}

/** Keeps `concurrency` bombs in flight until `signal` aborts; resolves with their statuses. */
export async function bodyBombs(
  { api, tokens, concurrency = 8, size = 1_048_576, maxDepth = 512, shape = 'depth' },
  signal,
) {
  const body = Buffer.from(hostileBodies(size, maxDepth).find((candidate) => candidate.name === shape).body);
  const answers = {};
  const loop = async (index) => {
    const token = tokens[index % tokens.length];
    while (!signal.aborted) {
      const status = await post(api, token, body, signal);
      if (status !== undefined) answers[status] = (answers[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, index) => loop(index)));
  return { bodyBytes: body.length, answers };
}
