// `ledger-gateway audit verify` as an auditor runs it (the built process), against a trail taken
// apart as someone with write access to its volume but not the signing key would: every removal
// fails it (every file, the newest, the trail's end, a file in the middle, the start), a trail cut
// where the gateway stopped without closing it is never reported complete, and the errors name the
// key. docs/audit.md "Verify" and "What the trail guarantees".
import { createPublicKey, generateKeyPairSync, hash, sign } from 'node:crypto';
import { readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { digestMessage, legacyKeyIdOf } from '../../src/audit/chain.js';
import { openTrailWriter, recordText } from '../../src/audit/trail-writer.js';
import { buildDist, runToExit } from '../helpers/process.js';
import { copyTrail, keyFiles, readTrail, records, trailDirectory, writeTrail, writerOptions } from './support.js';

const keys = keyFiles();
/** Each test starts the built process (a few times): slow on a loaded machine, bounded all the same. */
const PROCESS_TIMEOUT_MS = 120_000;

beforeAll(() => buildDist());

const verify = (...args: string[]) => runToExit(['dist/main.js', 'audit', 'verify', ...args], {}, 60_000);
const verifyWithKey = (directory: string) => verify('--public-key', keys.publicKeyFile, directory);

/** The trail files of a directory, oldest first (paths). */
const files = (directory: string) => readTrail(directory).map((file) => file.name);

/** A sealed trail of several files: the gateway wrote it and closed it. */
let sealed: string;
beforeAll(async () => {
  sealed = trailDirectory();
  await writeTrail(sealed, keys, 200);
  expect(files(sealed).length).toBeGreaterThan(4);
});

const keyId = (pem: string) =>
  hash('sha256', createPublicKey(pem).export({ type: 'spki', format: 'der' }), 'hex').slice(0, 16);

describe('audit verify on a whole trail', { timeout: PROCESS_TIMEOUT_MS }, () => {
  it('says OK, sealed, and names the key by the first 16 hex digits of the SHA-256 of its DER (exit 0)', async () => {
    const result = await verifyWithKey(sealed);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^OK: \d+ file\(s\), \d+ record\(s\), \d+ digest\(s\), seq 1\.\.\d+/);
    expect(result.stdout).toContain(`every digest signature valid (key ${keyId(keys.publicKeyPem)})`);
    expect(result.stdout).toMatch(/sealed at seq \d+ \(.*: the gateway closed it\)/);
    // The key id the digests name is the documented digest (docs/audit.md "Record format").
    const digests = records(sealed).filter((record) => record.kind === 'digest');
    expect(new Set(digests.map((digest) => digest.keyId))).toEqual(new Set([keyId(keys.publicKeyPem)]));
  });
});

describe('audit verify fails on any removal', { timeout: PROCESS_TIMEOUT_MS }, () => {
  it('every file removed: FAILED, exit 1', async () => {
    const copy = copyTrail(sealed);
    for (const file of files(copy)) rmSync(file);
    const result = await verifyWithKey(copy);
    expect(result).toMatchObject({ code: 1, stderr: expect.stringMatching(/^FAILED: no trail file/) });
  });

  it('every file emptied: FAILED, exit 1', async () => {
    const copy = copyTrail(sealed);
    for (const file of files(copy)) truncateSync(file, 0);
    const result = await verifyWithKey(copy);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^FAILED: .*audit-0000000000000001-\S+ line 1: the file holds no record \(emptied\)/);
  });

  it('the newest file removed: FAILED, the file named missing, exit 1', async () => {
    const copy = copyTrail(sealed);
    const newest = files(copy).at(-1)!;
    rmSync(newest);
    const result = await verifyWithKey(copy);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`the file ${newest.slice(newest.lastIndexOf('/') + 1)} is missing (removed)`);
    expect(result.stderr).toMatch(/\nWhat holds before it: seq 1\.\.\d+ \(key \w{16}\)/);
  });

  it('the newest file emptied: never OK (exit 3, it holds no record)', async () => {
    const copy = copyTrail(sealed);
    truncateSync(files(copy).at(-1)!, 0);
    const result = await verifyWithKey(copy);
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/^INCOMPLETE: audit-\S+ holds no record: it may have been cut/);
  });

  it("the trail's end cut (the newest file's seal and last record removed): INCOMPLETE with what holds, exit 3", async () => {
    const copy = copyTrail(sealed);
    const newest = files(copy).at(-1)!;
    const lines = readFileSync(newest, 'utf8').split('\n').slice(0, -1);
    const kept = lines.slice(0, -3); // the end record, its digest and one record before them
    writeFileSync(newest, `${kept.join('\n')}\n`);
    const parsed = kept.map((line) => JSON.parse(line) as { seq: number; kind: string });
    const lastSeq = parsed.at(-1)!.seq;
    const unsigned = parsed.length - 1 - parsed.map((record) => record.kind).lastIndexOf('digest');
    const result = await verifyWithKey(copy);
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(
      new RegExp(
        `^INCOMPLETE: the trail ends without a seal after record ${lastSeq} \\(audit-\\S+ line ${kept.length}\\): it may have been cut`,
      ),
    );
    expect(result.stderr).toMatch(new RegExp(`\\nWhat holds: .*seq 1\\.\\.${lastSeq}, every digest signature valid`));
    if (unsigned > 0)
      expect(result.stderr).toContain(`the last ${unsigned} record(s) are not covered by a signed digest`);
  });

  it('the seal alone removed (the end record and its digest): INCOMPLETE, exit 3', async () => {
    const copy = copyTrail(sealed);
    const newest = files(copy).at(-1)!;
    const lines = readFileSync(newest, 'utf8').split('\n').slice(0, -1);
    writeFileSync(newest, `${lines.slice(0, -2).join('\n')}\n`);
    expect((await verifyWithKey(copy)).code).toBe(3);
  });

  it('a file in the middle removed: FAILED, exit 1', async () => {
    const copy = copyTrail(sealed);
    const middle = files(copy)[2]!;
    rmSync(middle);
    const result = await verifyWithKey(copy);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`the file ${middle.slice(middle.lastIndexOf('/') + 1)} is missing (removed)`);
  });

  it('a file in the middle emptied: FAILED, exit 1', async () => {
    const copy = copyTrail(sealed);
    truncateSync(files(copy)[2]!, 0);
    const result = await verifyWithKey(copy);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/line 1: the file holds no record \(emptied\)/);
  });

  it('the start removed: FAILED, exit 1', async () => {
    const copy = copyTrail(sealed);
    rmSync(files(copy)[0]!);
    const result = await verifyWithKey(copy);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/the trail's start is missing: audit-\S+ names audit-0000000000000001-\S+ before it/);
    // Without the key too: removal is no matter of signatures.
    expect((await verify(copy)).code).toBe(1);
  });

  it('the newest file removed, without the key: FAILED too', async () => {
    const copy = copyTrail(sealed);
    rmSync(files(copy).at(-1)!);
    expect((await verify(copy)).code).toBe(1);
  });
});

describe('audit verify: a trail the gateway did not close', { timeout: PROCESS_TIMEOUT_MS }, () => {
  it('killed (not closed): INCOMPLETE, exit 3; restarted and closed: OK, the unsealed file named', async () => {
    const directory = trailDirectory();
    await writeTrail(directory, keys, 40, {}, false); // as a killed process leaves it
    const cut = await verifyWithKey(directory);
    expect(cut.code).toBe(3);
    expect(cut.stderr).toMatch(/^INCOMPLETE: the trail ends without a seal after record \d+/);
    await writeTrail(directory, keys, 10);
    const whole = await verifyWithKey(directory);
    expect(whole.code).toBe(0);
    expect(whole.stdout).toMatch(/1 file\(s\) end unsealed where the gateway stopped without closing them/);
  });

  it('the oldest files removed by the gateway itself (retention): OK, and it says where the trail starts', async () => {
    const directory = trailDirectory();
    await writeTrail(directory, keys, 400, { maxTrailBytes: 16 * 1024 });
    const trail = records(directory);
    expect(trail[0]).toMatchObject({ kind: 'file', previousFile: expect.stringMatching(/^audit-/) });
    const retention = trail.filter((record) => record.kind === 'retention');
    expect(retention.length).toBeGreaterThan(0);
    const result = await verifyWithKey(directory);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/it starts after audit-\S+, removed by the gateway's retention/);
    // One more removed by hand is not the gateway's: FAILED.
    rmSync(files(directory)[0]!);
    expect((await verifyWithKey(directory)).code).toBe(1);
  });
});

describe('audit verify: keys', { timeout: PROCESS_TIMEOUT_MS }, () => {
  it('a digest by another key: FAILED, naming both keys', async () => {
    const other = keyFiles();
    const result = await verify('--public-key', other.publicKeyFile, sealed);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      new RegExp(`the digest names key ${keyId(keys.publicKeyPem)}, not key ${keyId(other.publicKeyPem)}`),
    );
  });

  it('an unparseable or RSA --public-key: one clear line, exit 2, no OpenSSL error', async () => {
    const dir = trailDirectory();
    const garbage = join(dir, 'garbage.pem');
    writeFileSync(garbage, 'not a key\n');
    const bad = await verify('--public-key', garbage, sealed);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(
      `cannot verify: --public-key ${garbage} is not a PEM public key (expected "-----BEGIN PUBLIC KEY-----", Ed25519)\n`,
    );
    const rsa = join(dir, 'rsa.pem');
    const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(rsa, publicKey.export({ type: 'spki', format: 'pem' }));
    const wrongKind = await verify('--public-key', rsa, sealed);
    expect(wrongKind).toMatchObject({
      code: 2,
      stderr: `cannot verify: --public-key ${rsa} is an rsa key, not Ed25519\n`,
    });
    const missing = await verify('--public-key', join(dir, 'none.pem'), sealed);
    expect(missing.code).toBe(2);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('a trail whose digests name the key as earlier versions did still verifies', async () => {
    const directory = trailDirectory();
    const privateKey = readFileSync(keys.privateKeyFile);
    const legacy = legacyKeyIdOf(createPublicKey(keys.publicKeyPem));
    expect(legacy).not.toBe(keyId(keys.publicKeyPem));
    const writer = await openTrailWriter(
      writerOptions(directory, keys, {
        signer: {
          keyId: legacy,
          sign: (seq, time, prev) => sign(null, digestMessage(seq, time, prev), privateKey).toString('base64'),
        },
      }),
    );
    await writer.append(recordText({ kind: 'intent', time: new Date().toISOString(), id: 'old' }));
    await writer.close();
    expect((await verifyWithKey(directory)).code).toBe(0);
  });
});
