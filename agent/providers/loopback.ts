import { isIP } from 'node:net';

/**
 * Whether a host names this machine's loopback interface: `localhost`, an IPv4 address in 127.0.0.0/8
 * or `::1`, with or without IPv6 brackets, in any case. The one place providers ask "may credentials or
 * values go here in plaintext, or without TLS verification": only when they never leave the node.
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  // Every spelling of ::1 (0:0:0:0:0:0:0:1, ::0001) as the URL parser writes it.
  return isIP(host) === 6 && new URL(`http://[${host}]/`).hostname === '[::1]';
}
