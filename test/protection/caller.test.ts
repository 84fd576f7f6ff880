// Who a call counts against: the principal, else the client address (behind trusted proxies, the
// right-most untrusted X-Forwarded-For hop).
import { describe, expect, it } from 'vitest';
import { addressKey, clientAddress } from '../../src/exchange/caller.js';

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

describe('addressKey', () => {
  it('keeps an IPv4 address whole', () => {
    expect(addressKey('203.0.113.9')).toBe('203.0.113.9');
  });

  it('counts an IPv6 address by its /64, however it is written', () => {
    const key = '2001:db8:0:1::/64';
    const written = [
      '2001:db8:0:1::1',
      '2001:db8:0:1:ffff:ffff:ffff:ffff',
      '2001:0db8:0000:0001:0:0:0:abcd',
      '2001:DB8:0:1::5%eth0',
    ];
    for (const address of written) {
      expect(addressKey(address), address).toBe(key);
    }
    expect(addressKey('2001:db8:0:2::1')).toBe('2001:db8:0:2::/64');
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('fe80::')).toBe('fe80:0:0:0::/64');
  });

  it('keeps an IPv6 address that embeds an IPv4 one whole (NAT64: one IPv4 client each)', () => {
    expect(addressKey('64:ff9b::203.0.113.9')).toBe('64:ff9b::203.0.113.9');
    expect(addressKey('64:ff9b::203.0.113.10')).not.toBe(addressKey('64:ff9b::203.0.113.9'));
  });

  it('leaves what is no address as it is', () => {
    expect(addressKey('')).toBe('');
    expect(addressKey('garbage')).toBe('garbage');
  });
});
