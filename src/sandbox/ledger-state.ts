// Read-only participant state: ledger end, connected synchronizers, parties, packages and the
// authenticated user (spec schemas GetLedgerEndResponse, GetConnectedSynchronizersResponse,
// ListKnownPartiesResponse, ListPackagesResponse, GetUserResponse).

import type { FastifyInstance } from 'fastify';
import { userIdFromAuthorization } from './bearer.js';
import { unauthenticated } from './errors.js';
import type { SandboxState } from './state.js';

const NO_METADATA = { resourceVersion: '0', annotations: {} };

export function registerLedgerStateRoutes(app: FastifyInstance, state: SandboxState): void {
  app.get('/v2/state/ledger-end', async () => ({ offset: state.ledgerEnd }));

  app.get('/v2/state/connected-synchronizers', async () => ({
    connectedSynchronizers: state.synchronizers.map((sync) => ({
      synchronizerAlias: sync.synchronizerAlias,
      synchronizerId: sync.synchronizerId,
      permission: 'PARTICIPANT_PERMISSION_SUBMISSION',
    })),
  }));

  app.get('/v2/parties', async () => ({
    partyDetails: state.parties.map((party) => ({
      party,
      isLocal: true,
      localMetadata: NO_METADATA,
      identityProviderId: '',
    })),
    nextPageToken: '',
  }));

  app.get('/v2/packages', async () => ({ packageIds: [...state.packages.keys()] }));

  // The user is the token's `sub`, unverified (the sandbox trusts its gateway). A `sub` the sandbox
  // does not know is answered as a user without primary party rather than refused.
  app.get('/v2/authenticated-user', async (request) => {
    const userId = userIdFromAuthorization(request.headers.authorization);
    if (userId === undefined) throw unauthenticated();
    const known = state.users.get(userId);
    return {
      user: {
        id: userId,
        primaryParty: known?.primaryParty ?? '',
        isDeactivated: false,
        metadata: NO_METADATA,
        identityProviderId: '',
      },
    };
  });
}
