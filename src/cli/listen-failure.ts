// A listener that cannot open (a port in use, a privileged port, an address not on this machine)
// is a configuration problem: one line naming the key and where its value came from, exit 2.
import { originOf } from '../config/provenance.js';
import type { LoadedConfig } from '../config/load.js';
import { environmentVariable } from '../config/environment.js';
import { pathText } from '../config/schema-paths.js';

export class ListenFailure extends Error {
  constructor(message: string, options: { cause: unknown }) {
    super(message, options);
    this.name = 'ListenFailure';
  }
}

const LISTENERS = [
  { section: 'server', name: 'API' },
  { section: 'admin', name: 'admin' },
] as const;

/** The error to report for a failed listen: a ListenFailure when it is the configuration's doing, else the error. */
export function listenFailure(failure: unknown, { config, provenance }: LoadedConfig): Error {
  const error = failure instanceof Error ? failure : new Error(String(failure));
  const { code, port, address, syscall } = error as NodeJS.ErrnoException & { port?: number; address?: string };
  if (syscall !== 'listen' || port === undefined) return error;
  const listener = LISTENERS.find(({ section }) => config[section].port === port);
  if (listener === undefined) return error;
  const key = code === 'EADDRNOTAVAIL' ? [listener.section, 'host'] : [listener.section, 'port'];
  const origin = originOf(provenance, key);
  const source = origin === 'the default' ? `the default; set ${pathText(key)} or ${environmentVariable(key)}` : origin;
  const host = address ?? config[listener.section].host;
  const where = `${pathText(key)}: the ${listener.name} listener cannot listen on ${host}:${port}`;
  switch (code) {
    case 'EADDRINUSE':
      return new ListenFailure(`${where}: the port is already in use (${source})`, { cause: error });
    case 'EACCES':
      return new ListenFailure(`${where}: permission denied, a port below 1024 needs privileges (${source})`, {
        cause: error,
      });
    case 'EADDRNOTAVAIL':
      return new ListenFailure(`${where}: the address is not one of this machine's (${source})`, { cause: error });
    default:
      return error;
  }
}
