// P2, parsed-body bombs (issue 40): bodies of arrays nested as deep as policy.maxBodyDepth allows, side
// by side, at the largest size parsed on the event loop (1 MiB), on update-by-offset (a read any token may
// make), `concurrency` at a time. Five at once ran the heap out while each parsed body stayed alive
// until its call ended; eight at once held the event loop past the liveness probe's 2 s.
import { postJson } from './post-json.mjs';
import { hostileBodies, UPDATE_BY_OFFSET_PATH } from '../../../bench/hostile-body-shapes.mjs';

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
      const status = await postJson(`${api}${UPDATE_BY_OFFSET_PATH}`, token, body, signal);
      if (status !== undefined) answers[status] = (answers[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, index) => loop(index)));
  return { bodyBytes: body.length, answers };
}
