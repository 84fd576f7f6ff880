// A raw HTTP client for the auth tests: sends repeated headers as given (fetch would merge them).
import http from 'node:http';

export interface RawResponse {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly text: string;
  json(): unknown;
}

export function rawRequest(
  baseUrl: string,
  path: string,
  options: { method?: string; headers?: string[]; body?: string } = {},
): Promise<RawResponse> {
  const url = new URL(path, baseUrl);
  return new Promise((resolve, reject) => {
    // A raw header list gets no Host from Node: add it as any client would.
    const headers = ['host', url.host, ...(options.headers ?? [])];
    if (options.body !== undefined)
      headers.push('content-type', 'application/json', 'content-length', String(Buffer.byteLength(options.body)));
    const request = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: options.method ?? 'GET',
        headers,
        agent: false,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            text,
            json: () => JSON.parse(text) as unknown,
          });
        });
      },
    );
    request.on('error', reject);
    request.end(options.body);
  });
}
