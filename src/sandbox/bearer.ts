// The sandbox trusts its gateway: it reads the user id (`sub`) from the bearer token without
// verifying it. Tokens are never logged or stored beyond the request.

export function userIdFromAuthorization(header: string | undefined): string | undefined {
  if (header === undefined || !header.startsWith('Bearer ')) return undefined;
  const payload = header.slice('Bearer '.length).trim().split('.')[1];
  if (payload === undefined) return undefined;
  try {
    const claims: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    if (typeof claims !== 'object' || claims === null) return undefined;
    const sub = (claims as { sub?: unknown }).sub;
    return typeof sub === 'string' && sub !== '' ? sub : undefined;
  } catch {
    return undefined;
  }
}
