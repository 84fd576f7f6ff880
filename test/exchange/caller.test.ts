// Who a call counts against: the principal, else the client address (behind trusted proxies, the
// right-most untrusted X-Forwarded-For hop).
import { describe, expect, it } from 'vitest';
import { addressKey, clientAddress, forwardedHopAddress } from '../../src/exchange/caller.js';

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

  it('reads hops a proxy wrote with a port: ip:port and [v6]:port (else every client counts as the proxy)', () => {
    expect(clientAddress('10.0.0.1', '203.0.113.5:41234', trusted)).toBe('203.0.113.5');
    expect(clientAddress('10.0.0.1', '198.51.100.7:1, 203.0.113.5:2, 10.0.0.2:3', trusted)).toBe('203.0.113.5');
    expect(clientAddress('10.0.0.1', '[2001:db8::7]:443', trusted)).toBe('2001:db8::7');
    expect(clientAddress('10.0.0.1', '[2001:db8::7]', trusted)).toBe('2001:db8::7');
    expect(clientAddress('10.0.0.1', '[::ffff:203.0.113.5]:80', trusted)).toBe('203.0.113.5');
  });

  it('names the accepted forms of a hop, and refuses the rest', () => {
    const accepted = {
      '203.0.113.5': '203.0.113.5',
      ' 203.0.113.5:8080 ': '203.0.113.5',
      '2001:db8::1': '2001:db8::1',
      '[2001:db8::1]': '2001:db8::1',
      '[2001:db8::1]:8080': '2001:db8::1',
      '::ffff:203.0.113.5': '203.0.113.5',
    };
    for (const [hop, address] of Object.entries(accepted)) expect(forwardedHopAddress(hop), hop).toBe(address);
    for (const hop of [
      '',
      'garbage',
      '203.0.113.5:',
      '203.0.113.5:port',
      '[203.0.113.5]',
      '[2001:db8::1',
      '[2001:db8::1]x',
      'unknown',
      '_hidden',
    ])
      expect(forwardedHopAddress(hop), hop).toBeUndefined();
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
    // Written in hex, as peers and proxies usually write it: still one IPv4 client each, the same key.
    expect(addressKey('64:ff9b::a01:203')).toBe('64:ff9b::10.1.2.3');
    expect(addressKey('64:ff9b::a01:204')).not.toBe(addressKey('64:ff9b::a01:203'));
    expect(addressKey('64:FF9B:0:0:0:0:0A01:0203')).toBe('64:ff9b::10.1.2.3');
    // IPv4-mapped, in either notation: the IPv4 address itself.
    expect(addressKey('::ffff:a01:203')).toBe('10.1.2.3');
    expect(addressKey('::ffff:10.1.2.3')).toBe('10.1.2.3');
    // Dotted notation elsewhere is only notation: an ordinary IPv6 address, counted by its /64.
    expect(addressKey('2001:db8::1.2.3.4')).toBe(addressKey('2001:db8::5'));
  });

  it('leaves what is no address as it is', () => {
    expect(addressKey('')).toBe('');
    expect(addressKey('garbage')).toBe('garbage');
  });
});
