// oidc-provider 9 ships no type declarations; these cover what openid-provider.ts uses of it.
declare module 'oidc-provider' {
  import type { EventEmitter } from 'node:events';
  import type { IncomingMessage, ServerResponse } from 'node:http';

  /** The provider's configuration (its docs/README.md); the provider checks it when constructed. */
  export type Configuration = Record<string, unknown>;

  /** A Koa application: callback() is a node:http request listener that settles its own errors. */
  export default class Provider extends EventEmitter {
    constructor(issuer: string, configuration?: Configuration);
    callback(): (request: IncomingMessage, response: ServerResponse) => Promise<void>;
  }
}
