// One JSON POST of a driver, on a connection of its own: resolves with its status once its answer is
// read (0: no answer; undefined: aborted by `signal`).
import http from 'node:http';

export async function postJson(url, token, body, signal) {
  return (await postJsonAnswer(url, token, body, signal)).status;
}

/**
 * The same, resolving with the answer's status, its Retry-After header and the `code` of a refusal in
 * Canton's shape (each undefined when there is none).
 */
function codeOf(text) {
  try {
    return JSON.parse(text).code;
  } catch {
    return undefined;
  }
}

export function postJsonAnswer(url, token, body, signal) {
  return new Promise((resolve) => {
    const request = http.request(
      url,
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
        const retryAfter = response.headers['retry-after'];
        let text = '';
        response.on('data', (chunk) => (text = text.length < 4_096 ? text + chunk.toString() : text));
        response.on('end', () => resolve({ status: response.statusCode, retryAfter, code: codeOf(text) }));
        response.on('error', () => resolve({ status: 0, retryAfter }));
      },
    );
    request.on('error', () => resolve({ status: signal?.aborted ? undefined : 0, retryAfter: undefined }));
    signal?.addEventListener('abort', () => request.destroy(), { once: true });
    request.end(body);
  });
}
