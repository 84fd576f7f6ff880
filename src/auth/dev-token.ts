#!/usr/bin/env node
// DEVELOPMENT ONLY: `npm run token -- --sub alice` prints a token signed by the development key
// (.dev/signing-key.json, shared with a gateway started by `npm start`). Refused unless the config
// is development mode: upstream.url "sandbox" and no auth.issuers.
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config/load.js';
import {
  DEVELOPMENT_ISSUER,
  developmentLifetimeSeconds,
  developmentParticipantId,
  isDevelopmentMode,
  loadOrCreateDevelopmentKey,
  mintDevelopmentToken,
} from './dev-mode.js';

const USAGE = `Usage: npm run token -- [--sub <user id>] [--ttl <seconds>] [--participant <id>] [--config <file>]

DEVELOPMENT ONLY. Prints a bearer token for the gateway in development mode (upstream.url
"sandbox", no auth.issuers), signed by the development key in .dev/.
  --sub <user id>       Ledger API user id (sub); default alice.
  --ttl <seconds>       Lifetime; default auth.maxTokenLifetimeSeconds (300).
  --participant <id>    Participant id in the audience; default auth.participantId or the sandbox's.
  --config <file>       Gateway config (also LEDGER_GATEWAY_CONFIG); default config/default.yaml if present.`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      sub: { type: 'string', default: 'alice' },
      ttl: { type: 'string' },
      participant: { type: 'string' },
      config: { type: 'string', short: 'c' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const file =
    values.config ??
    process.env.LEDGER_GATEWAY_CONFIG ??
    (existsSync('config/default.yaml') ? 'config/default.yaml' : undefined);
  const config = loadConfig(file);
  if (!isDevelopmentMode(config)) {
    throw new ConfigError(file ?? 'defaults + environment', [
      'development tokens exist only with upstream.url "sandbox" and no auth.issuers; ask your identity provider for a token',
    ]);
  }
  const maximum = config.auth.maxTokenLifetimeSeconds;
  const ttl = values.ttl === undefined ? developmentLifetimeSeconds(config) : Number(values.ttl);
  if (!Number.isInteger(ttl) || ttl <= 0) throw new Error('--ttl must be a positive number of seconds');
  if (maximum > 0 && ttl > maximum)
    throw new Error(
      `--ttl ${ttl} exceeds auth.maxTokenLifetimeSeconds (${maximum}): the gateway would refuse the token`,
    );
  if (values.sub === '') throw new Error('--sub must not be empty');

  const key = await loadOrCreateDevelopmentKey();
  const token = await mintDevelopmentToken(key, {
    subject: values.sub,
    participantId: values.participant ?? developmentParticipantId(config),
    lifetimeSeconds: ttl,
  });
  console.error(
    `DEVELOPMENT ONLY: token for "${values.sub}" from ${DEVELOPMENT_ISSUER}, valid ${ttl} s. Never use it against a real participant.`,
  );
  console.log(token);
}

main().catch((error: unknown) => {
  console.error(`token: ${(error as Error).message}`);
  process.exit(error instanceof ConfigError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') ? 2 : 1);
});
