// Package ids resolved to package names, so that a rule on "#my-app:Main:Iou" also holds for
// "<package-id>:Main:Iou". The participant answers through its package vetting list (POST
// /v2/package-vetting/list with packageMetadataFilter.packageIds: any authenticated user may call it,
// Canton `PackageServiceAuthorization.scala`), whose VettedPackage names each package. A package id
// names one package forever, so a name is cached without expiry (bounded, least recently used); an
// id the participant does not know is remembered for `unknownRetryMs`. Failing closed is the
// caller's: an id that cannot be resolved leaves the name unknown and the call refused.
import { LRUCache } from 'lru-cache';
import { request, type Dispatcher } from 'undici';

/** Asks the participant for a package id's name: undefined when it knows none; throws when it cannot answer. */
export type PackageLookup = (packageId: string, authorization: string | undefined) => Promise<string | undefined>;

export interface PackageNameResolver {
  /** The cached name; '' when known to be unknown; undefined when not cached. */
  cached(packageId: string): string | undefined;
  /** The name, or undefined when the participant knows none; rejects when it cannot be asked. */
  resolve(packageId: string, authorization?: string): Promise<string | undefined>;
}

export interface PackageNameResolverOptions {
  readonly lookup: PackageLookup;
  readonly cacheEntries: number;
  readonly unknownRetryMs: number;
}

const UNKNOWN = '';

export function createPackageNameResolver(options: PackageNameResolverOptions): PackageNameResolver {
  const names = new LRUCache<string, string>({ max: options.cacheEntries });
  const unknown = new LRUCache<string, true>({ max: options.cacheEntries, ttl: options.unknownRetryMs });
  // One question per package id at a time, however many calls wait for it.
  const asking = new Map<string, Promise<string | undefined>>();
  return {
    cached(packageId) {
      return names.get(packageId) ?? (unknown.has(packageId) ? UNKNOWN : undefined);
    },
    resolve(packageId, authorization) {
      const known = names.get(packageId);
      if (known !== undefined) return Promise.resolve(known);
      if (unknown.has(packageId)) return Promise.resolve(undefined);
      let pending = asking.get(packageId);
      if (pending === undefined) {
        pending = options
          .lookup(packageId, authorization)
          .then((name) => {
            if (name === undefined) unknown.set(packageId, true);
            else names.set(packageId, name);
            return name;
          })
          .finally(() => asking.delete(packageId));
        asking.set(packageId, pending);
      }
      return pending;
    },
  };
}

export interface VettedPackageLookupOptions {
  /** The participant's JSON API base URL. */
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly dispatcher?: Dispatcher;
}

/** Most bytes of an answer read: a page of one package's vetting across synchronizers is far smaller. */
const MAX_ANSWER_BYTES = 1024 * 1024;

type VettedAnswer = { vettedPackages?: { packages?: { packageId?: unknown; packageName?: unknown }[] }[] };

/** The lookup through the participant's POST /v2/package-vetting/list (Canton 3.4.12 and 3.5). */
export function vettedPackageLookup(options: VettedPackageLookupOptions): PackageLookup {
  const url = new URL('/v2/package-vetting/list', options.baseUrl);
  return async (packageId, authorization) => {
    const answer = await request(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(authorization === undefined ? {} : { authorization }),
      },
      body: JSON.stringify({ packageMetadataFilter: { packageIds: [packageId] }, pageSize: 100 }),
      signal: AbortSignal.timeout(options.timeoutMs),
      ...(options.dispatcher === undefined ? {} : { dispatcher: options.dispatcher }),
    });
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of answer.body as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      if (bytes > MAX_ANSWER_BYTES) {
        answer.body.destroy();
        throw new Error(`the participant's vetting list answer is over ${MAX_ANSWER_BYTES} bytes`);
      }
      chunks.push(chunk);
    }
    if (answer.statusCode !== 200) throw new Error(`the participant answered ${answer.statusCode} to the vetting list`);
    const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as VettedAnswer;
    for (const vetted of parsed.vettedPackages ?? [])
      for (const entry of vetted.packages ?? [])
        if (entry.packageId === packageId && typeof entry.packageName === 'string' && entry.packageName !== '')
          return entry.packageName;
    return undefined;
  };
}
