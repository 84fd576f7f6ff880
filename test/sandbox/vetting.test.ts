import { describe, expect, it } from 'vitest';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import { expectCantonError, getWithJsonBody, postJson, readJson, withSandbox } from './helpers.js';

const GLOBAL = SANDBOX_SEED.synchronizers.global.synchronizerId;
const PRIVATE = SANDBOX_SEED.synchronizers.private.synchronizerId;
const { base, iouV1, extras, extrasDependency } = SANDBOX_SEED.packages;

const vet = (...refs: object[]) => ({ operation: { Vet: { value: { packages: refs } } } });
const unvet = (...refs: object[]) => ({ operation: { Unvet: { value: { packages: refs } } } });
const prior = (value: number) => ({ serial: { Prior: { value } } });

async function globalSerial(url: string): Promise<number> {
  const listed = await readJson(
    await postJson(`${url}/v2/package-vetting/list`, { topologyStateFilter: { synchronizerIds: [GLOBAL] } }),
  );
  return listed.vettedPackages[0].topologySerial;
}

describe('sandbox package vetting', () => {
  it('vets a package with its dependency in one request and increments the topology serial', async () => {
    await withSandbox(async ({ url }) => {
      const response = await postJson(`${url}/v2/package-vetting/update`, {
        changes: [
          vet(
            { packageId: extras.packageId },
            { packageName: extrasDependency.packageName, packageVersion: extrasDependency.packageVersion },
          ),
        ],
        synchronizerId: GLOBAL,
        expectedTopologySerial: prior(1),
      });
      expect(response.status).toBe(200);
      const body = await readJson(response);
      expect(body.pastVettedPackages).toMatchObject({
        participantId: SANDBOX_SEED.participantId,
        synchronizerId: GLOBAL,
        topologySerial: 1,
      });
      expect(body.newVettedPackages.topologySerial).toBe(2);
      expect(body.newVettedPackages.packages.map((p: { packageId: string }) => p.packageId)).toEqual([
        ...SANDBOX_SEED.initialVetting.global.packageIds,
        extras.packageId,
        extrasDependency.packageId,
      ]);
      expect(body.newVettedPackages.packages.at(-1)).toEqual({
        packageId: extrasDependency.packageId,
        validFromInclusive: null,
        validUntilExclusive: null,
        packageName: extrasDependency.packageName,
        packageVersion: extrasDependency.packageVersion,
      });
      expect(await globalSerial(url)).toBe(2);

      const unvetted = await readJson(
        await postJson(`${url}/v2/package-vetting/update`, {
          changes: [unvet({ packageId: extras.packageId }, { packageName: 'no-such-package' })],
          synchronizerId: GLOBAL,
          expectedTopologySerial: prior(2),
        }),
      );
      expect(unvetted.newVettedPackages.topologySerial).toBe(3);
      expect(unvetted.newVettedPackages.packages.map((p: { packageId: string }) => p.packageId)).not.toContain(
        extras.packageId,
      );
    });
  });

  it('keeps the state unchanged on dryRun but answers the would-be state', async () => {
    await withSandbox(async ({ url }) => {
      const response = await postJson(`${url}/v2/package-vetting/update`, {
        changes: [unvet({ packageId: iouV1.packageId })],
        synchronizerId: GLOBAL,
        dryRun: true,
      });
      expect(response.status).toBe(200);
      const body = await readJson(response);
      expect(body.pastVettedPackages.topologySerial).toBe(1);
      expect(body.newVettedPackages.topologySerial).toBe(2);
      expect(await globalSerial(url)).toBe(1);
    });
  });

  it('does not bump the serial when nothing changes', async () => {
    await withSandbox(async ({ url }) => {
      const body = await readJson(
        await postJson(`${url}/v2/package-vetting/update`, {
          changes: [vet({ packageId: base.packageId })],
          synchronizerId: GLOBAL,
        }),
      );
      expect(body.newVettedPackages.topologySerial).toBe(1);
    });
  });

  it('creates the first vetting state on a synchronizer without one (NoPrior)', async () => {
    await withSandbox(async ({ url }) => {
      const response = await postJson(`${url}/v2/package-vetting/update`, {
        changes: [vet({ packageId: base.packageId })],
        synchronizerId: PRIVATE,
        expectedTopologySerial: { serial: { NoPrior: {} } },
      });
      expect(response.status).toBe(200);
      const body = await readJson(response);
      expect(body.pastVettedPackages).toBeNull();
      expect(body.newVettedPackages).toMatchObject({ synchronizerId: PRIVATE, topologySerial: 1 });
    });
  });

  it('rejects a wrong expected serial with TOPOLOGY_SERIAL_MISMATCH, on dryRun too', async () => {
    await withSandbox(async ({ url }) => {
      for (const dryRun of [false, true]) {
        const body = await expectCantonError(
          await postJson(`${url}/v2/package-vetting/update`, {
            changes: [vet({ packageId: base.packageId })],
            synchronizerId: GLOBAL,
            dryRun,
            expectedTopologySerial: prior(5),
          }),
          { status: 400, code: 'TOPOLOGY_SERIAL_MISMATCH', category: 9 },
        );
        expect(body['cause']).toBe('The given serial Some(5) did not match the actual serial Some(1).');
        expect(body['context']['definite_answer']).toBeUndefined();
      }
      const noPrior = await expectCantonError(
        await postJson(`${url}/v2/package-vetting/update`, {
          changes: [vet({ packageId: base.packageId })],
          synchronizerId: GLOBAL,
          expectedTopologySerial: { serial: { NoPrior: {} } },
        }),
        { status: 400, code: 'TOPOLOGY_SERIAL_MISMATCH', category: 9 },
      );
      expect(noPrior['cause']).toBe('The given serial None did not match the actual serial Some(1).');
      const none = await expectCantonError(
        await postJson(`${url}/v2/package-vetting/update`, {
          changes: [vet({ packageId: base.packageId })],
          synchronizerId: PRIVATE,
          expectedTopologySerial: prior(1),
        }),
        { status: 400, code: 'TOPOLOGY_SERIAL_MISMATCH', category: 9 },
      );
      expect(none['cause']).toBe('The given serial Some(1) did not match the actual serial None.');
      expect(await globalSerial(url)).toBe(1);
    });
  });

  it('cannot autodetect the synchronizer when both are connected and none is named', async () => {
    await withSandbox(async ({ url }) => {
      const body = await expectCantonError(
        await postJson(`${url}/v2/package-vetting/update`, { changes: [vet({ packageId: base.packageId })] }),
        { status: 400, code: 'PACKAGE_SERVICE_CANNOT_AUTODETECT_SYNCHRONIZER', category: 9 },
      );
      expect(body['cause']).toBe(
        `Cannot autodetect synchronizer: currently connected synchronizers ${GLOBAL}, ${PRIVATE}`,
      );
    });
  });

  it('refuses to vet a package whose dependency stays unvetted, on dryRun too', async () => {
    await withSandbox(async ({ url }) => {
      for (const dryRun of [false, true]) {
        const body = await expectCantonError(
          await postJson(`${url}/v2/package-vetting/update`, {
            changes: [vet({ packageId: SANDBOX_SEED.packageWithUnvettedDependency.packageId })],
            synchronizerId: GLOBAL,
            dryRun,
          }),
          { status: 400, code: 'TOPOLOGY_DEPENDENCIES_NOT_VETTED', category: 9 },
        );
        expect(body['cause']).toBe('Package vetting failed due to dependencies not being vetted');
        expect(body['context']['unvetted']).toBe(`Set(${extrasDependency.packageId})`);
      }
      const forced = await postJson(`${url}/v2/package-vetting/update`, {
        changes: [vet({ packageId: extras.packageId })],
        synchronizerId: GLOBAL,
        updateVettedPackagesForceFlags: ['UPDATE_VETTED_PACKAGES_FORCE_FLAG_ALLOW_UNVETTED_DEPENDENCIES'],
      });
      expect(forced.status).toBe(200);
    });
  });

  it('rejects references that match no package (404) or several (400)', async () => {
    await withSandbox(async ({ url }) => {
      const unknownId = 'f'.repeat(64);
      const unresolved = await expectCantonError(
        await postJson(`${url}/v2/package-vetting/update`, {
          changes: [vet({ packageId: unknownId })],
          synchronizerId: GLOBAL,
        }),
        { status: 404, code: 'UNRESOLVED_VETTING_REFERENCE', category: 11 },
      );
      expect(unresolved['cause']).toBe(
        `The vetted package reference package-id: '${unknownId}' does not match any package in the package store. Reason: No packages with package ID ${unknownId}`,
      );
      await expectCantonError(
        await postJson(`${url}/v2/package-vetting/update`, {
          changes: [vet({ packageName: 'sandbox-iou', packageVersion: '9.9.9' })],
          synchronizerId: GLOBAL,
        }),
        { status: 404, code: 'UNRESOLVED_VETTING_REFERENCE', category: 11 },
      );
      await expectCantonError(
        await postJson(`${url}/v2/package-vetting/update`, {
          changes: [vet({ packageName: 'sandbox-iou' })],
          synchronizerId: GLOBAL,
        }),
        { status: 400, code: 'AMBIGUOUS_VETTING_REFERENCE', category: 9 },
      );
    });
  });

  it('answers PROTO_DESERIALIZATION_FAILURE for an Empty or missing operation and a non-positive Prior', async () => {
    await withSandbox(async ({ url }) => {
      const bodies = [
        { changes: [{ operation: { Empty: {} } }], synchronizerId: GLOBAL },
        { changes: [{}], synchronizerId: GLOBAL },
        { changes: [vet({ packageId: base.packageId })], synchronizerId: GLOBAL, expectedTopologySerial: prior(0) },
        { changes: [vet({ packageId: base.packageId })], synchronizerId: GLOBAL, expectedTopologySerial: prior(-3) },
        { changes: [vet({ packageVersion: '1.0.0' })], synchronizerId: GLOBAL },
      ];
      for (const body of bodies) {
        const error = await expectCantonError(await postJson(`${url}/v2/package-vetting/update`, body), {
          status: 400,
          code: 'PROTO_DESERIALIZATION_FAILURE',
          category: 8,
        });
        expect(error['cause']).toBe('Deserialization of protobuf message failed');
      }
      expect(await globalSerial(url)).toBe(1);
    });
  });

  it('serves the deprecated routes, including GET with a JSON body', async () => {
    await withSandbox(async ({ url }) => {
      const update = await postJson(`${url}/v2/package-vetting`, {
        changes: [vet({ packageId: base.packageId })],
        synchronizerId: PRIVATE,
      });
      expect(update.status).toBe(200);

      const onlyPrivate = await getWithJsonBody(`${url}/v2/package-vetting`, {
        topologyStateFilter: { synchronizerIds: [PRIVATE] },
      });
      expect(onlyPrivate.status).toBe(200);
      const body = await readJson(onlyPrivate);
      expect(body.nextPageToken).toBe('');
      expect(body.vettedPackages).toHaveLength(1);
      expect(body.vettedPackages[0]).toMatchObject({
        synchronizerId: PRIVATE,
        topologySerial: 1,
        packages: [{ packageId: base.packageId }],
      });

      const filtered = await readJson(
        await getWithJsonBody(`${url}/v2/package-vetting`, {
          packageMetadataFilter: { packageNamePrefixes: ['sandbox-io'] },
        }),
      );
      expect(filtered.vettedPackages.map((v: { synchronizerId: string }) => v.synchronizerId)).toEqual(
        [GLOBAL, PRIVATE].sort(),
      );
      const globalPackages = filtered.vettedPackages.find(
        (v: { synchronizerId: string }) => v.synchronizerId === GLOBAL,
      ).packages;
      expect(globalPackages.map((p: { packageName: string }) => p.packageName)).toEqual(['sandbox-iou', 'sandbox-iou']);

      const everything = await readJson(await fetch(`${url}/v2/package-vetting`));
      expect(everything.vettedPackages).toHaveLength(2);
    });
  });
});
