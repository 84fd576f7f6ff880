// A real OpenID provider (npm oidc-provider 9) on 127.0.0.1 port 0, issuing JWT access tokens by
// the client-credentials grant with a Canton audience (resource indicators, RFC 8707). Its signing
// keys rotate by swapping in a provider configured with the new key set on the same port and
// issuer, as a rolling restart of a real identity provider does.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';
import type { JWK } from 'jose';

export const CLIENT_ID = 'ledger-client';
export const CLIENT_SECRET = 'ledger-client-secret-for-tests-only';
export const LEDGER_SCOPE = 'daml_ledger_api';

/** oidc-provider's storage interface over a Map (its built-in one warns on every construction). */
class MapAdapter {
  private static readonly store = new Map<string, Record<string, unknown>>();
  constructor(private readonly model: string) {}
  private key(id: string): string {
    return `${this.model}:${id}`;
  }
  async upsert(id: string, payload: Record<string, unknown>): Promise<void> {
    MapAdapter.store.set(this.key(id), payload);
  }
  async find(id: string): Promise<Record<string, unknown> | undefined> {
    return MapAdapter.store.get(this.key(id));
  }
  async findByUid(): Promise<undefined> {
    return undefined;
  }
  async findByUserCode(): Promise<undefined> {
    return undefined;
  }
  async consume(id: string): Promise<void> {
    const entry = MapAdapter.store.get(this.key(id));
    if (entry !== undefined) entry.consumed = Math.floor(Date.now() / 1000);
  }
  async destroy(id: string): Promise<void> {
    MapAdapter.store.delete(this.key(id));
  }
  async revokeByGrantId(): Promise<void> {}
}

export interface OpenIdProvider {
  readonly issuer: string;
  /** From the provider's discovery document. */
  readonly jwksUri: string;
  /** Requests its JWKS endpoint answered. */
  readonly jwksRequests: number;
  /** Requests that reached its token endpoint. */
  readonly tokenRequests: number;
  /** From the provider's discovery document. */
  readonly tokenEndpoint: string;
  /** A client-credentials access token for `audience`. */
  accessToken(): Promise<string>;
  /** Serve these signing keys from now on (the first one signs). */
  rotate(privateJwks: readonly JWK[]): void;
  /** Down: every connection is reset (the provider is unreachable). */
  setDown(down: boolean): void;
  close(): Promise<void>;
}

export async function startOpenIdProvider(options: {
  audience: string;
  privateJwks: readonly JWK[];
  accessTokenTtlSeconds?: number;
}): Promise<OpenIdProvider> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const ttl = options.accessTokenTtlSeconds ?? 120;
  let down = false;
  let jwksRequests = 0;
  let tokenRequests = 0;

  const build = (keys: readonly JWK[]) => {
    const signingAlg = keys[0]!.alg ?? 'RS256';
    const provider = new Provider(issuer, {
      adapter: MapAdapter,
      clients: [
        {
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          grant_types: ['client_credentials'],
          redirect_uris: [],
          response_types: [],
          token_endpoint_auth_method: 'client_secret_post',
          id_token_signed_response_alg: signingAlg,
        },
      ],
      jwks: { keys: keys.map((key) => ({ ...key })) },
      scopes: [LEDGER_SCOPE],
      ttl: { ClientCredentials: ttl },
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => options.audience,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx: unknown, resource: string) => {
            if (resource !== options.audience) throw new Error(`unknown resource ${resource}`);
            return {
              scope: LEDGER_SCOPE,
              audience: options.audience,
              accessTokenTTL: ttl,
              accessTokenFormat: 'jwt',
              jwt: { sign: { alg: signingAlg } },
            };
          },
        },
      },
    });
    provider.on('server_error', (_ctx: unknown, error: Error) => {
      console.error('oidc-provider server_error', error);
    });
    return provider.callback();
  };

  let handle = build(options.privateJwks);
  server.on('request', (request, response) => {
    if (down) {
      request.socket.destroy();
      return;
    }
    if (request.url?.startsWith('/jwks')) jwksRequests += 1;
    if (request.url?.startsWith('/token')) tokenRequests += 1;
    void handle(request, response);
  });

  const discovery = (await (await fetch(`${issuer}/.well-known/openid-configuration`)).json()) as {
    jwks_uri: string;
    token_endpoint: string;
  };

  return {
    issuer,
    jwksUri: discovery.jwks_uri,
    get jwksRequests() {
      return jwksRequests;
    },
    get tokenRequests() {
      return tokenRequests;
    },
    tokenEndpoint: discovery.token_endpoint,
    async accessToken() {
      const response = await fetch(discovery.token_endpoint, {
        method: 'POST',
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          scope: LEDGER_SCOPE,
          resource: options.audience,
        }),
      });
      const body = (await response.json()) as { access_token?: string; error?: string; error_description?: string };
      if (body.access_token === undefined)
        throw new Error(`token endpoint: ${response.status} ${body.error} ${body.error_description}`);
      return body.access_token;
    },
    rotate(privateJwks) {
      handle = build(privateJwks);
    },
    setDown(next) {
      down = next;
      if (next) server.closeAllConnections();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
