// The identity development mode and the embedded sandbox share: the participant id a development
// token's audience names and the user its first token is for. The sandbox (a development upstream)
// seeds itself from here, so that the gateway's own code never imports the sandbox.
import { createHash } from 'node:crypto';

const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

/** The sandbox participant's id, in Canton's shape (`PAR::<uid>::1220<hex>`). */
export const DEVELOPMENT_PARTICIPANT_ID = `PAR::sandbox::1220${sha256Hex('sandbox-participant')}`;

/** The Ledger API user of the token printed at start. */
export const DEVELOPMENT_USER_ID = 'alice';
