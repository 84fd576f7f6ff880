// What build is running: the package version, for ledger_gateway_build_info and the trace resource.
import { readFileSync } from 'node:fs';

function packageVersion(): string {
  try {
    // dist/telemetry/ and src/telemetry/ both sit two levels below the package root.
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: unknown;
    };
    return typeof manifest.version === 'string' ? manifest.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

export const BUILD_VERSION = packageVersion();

export const SERVICE_NAME = 'ledger-gateway';
