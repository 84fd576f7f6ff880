// One JSON POST of a driver, on a connection of its own: resolves with its status once its answer is
// read (0: no answer; undefined: aborted by `signal`).
import http from 'node:http';

export function postJson(url, token, body, signal) {
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
        response.resume();
        response.on('end', () => resolve(response.statusCode));
        response.on('error', () => resolve(0));
      },
    );
    request.on('error', () => resolve(signal?.aborted ? undefined : 0));
    signal?.addEventListener('abort', () => request.destroy(), { once: true });
    request.end(body);
  });
}
