// Who a call counts against: the principal, else the client address (behind trusted proxies, the
// right-most untrusted X-Forwarded-For hop).
import { describe, expect, it } from 'vitest';
import { clientAddress } from '../../src/protection/caller.js';

const trusted = (address: string) => address === '10.0.0.1' || address === '10.0.0.2';

describe('clientAddress', () => {
  it('is the peer when the peer is not a trusted proxy, whatever X-Forwarded-For says', () => {
    expect(clientAddress('203.0.113.9', '198.51.100.1', trusted)).toBe('203.0.113.9');
    expect(clientAddress('::ffff:203.0.113.9', undefined, trusted)).toBe('203.0.113.9');
  });

  it('behind trusted proxies, is the right-most hop that is not one', () => {
    expect(clientAddress('10.0.0.1', '198.51.100.7, 203.0.113.5, 10.0.0.2', trusted)).toBe('203.0.113.5');
    expect(clientAddress('10.0.0.1', ['198.51.100.7', '203.0.113.5'], trusted)).toBe('203.0.113.5');
  });

  it('stops at a hop that is not an address, and falls back to the last address it could follow', () => {
    expect(clientAddress('10.0.0.1', 'garbage', trusted)).toBe('10.0.0.1');
    expect(clientAddress('10.0.0.1', '203.0.113.5, garbage, 10.0.0.2', trusted)).toBe('10.0.0.2');
  });
});
