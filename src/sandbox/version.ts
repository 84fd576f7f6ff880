// GET /v2/version: the participant's release and feature descriptor (`ApiVersionService.scala`). Public, no body.

import type { FastifyInstance } from 'fastify';

export function versionResponse(version: string) {
  return {
    version,
    features: {
      experimental: { staticTime: { supported: false }, commandInspectionService: { supported: true } },
      userManagement: { supported: true, maxRightsPerUser: 1000, maxUsersPageSize: 1000 },
      partyManagement: { maxPartiesPageSize: 10000 },
      offsetCheckpoint: { maxOffsetCheckpointEmissionDelay: { seconds: 75, nanos: 0, unknownFields: { fields: {} } } },
      packageFeature: { maxVettedPackagesPageSize: 100 },
    },
  };
}

export function registerVersionRoute(app: FastifyInstance, version: string): void {
  const body = versionResponse(version);
  app.get('/v2/version', async () => body);
}
