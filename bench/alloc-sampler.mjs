// Loaded into a process under test with `node --import ./bench/alloc-sampler.mjs` (bench/alloc-profile.mjs
// does this): V8's sampling heap profiler, counting every sampled allocation whether or not the
// object is still alive when sampling stops (by default V8 keeps only the survivors, which says
// nothing about what a request allocates). SIGUSR2 starts sampling; the next SIGUSR2 stops it and
// writes the profile to $ALLOC_PROFILE_OUT. Never loaded by the gateway itself.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

const out = process.env.ALLOC_PROFILE_OUT;
const samplingInterval = Number(process.env.ALLOC_SAMPLING_INTERVAL ?? 1024); // bytes, on average, between samples
const session = new Session();
session.connect();
let sampling = false;

process.on('SIGUSR2', () => {
  const step = sampling
    ? session.post('HeapProfiler.stopSampling').then(({ profile }) => writeFileSync(out, JSON.stringify(profile)))
    : session.post('HeapProfiler.enable').then(() =>
        session.post('HeapProfiler.startSampling', {
          samplingInterval,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        }),
      );
  sampling = !sampling;
  step.catch((error) => process.stderr.write(`alloc-sampler: ${error.message}\n`));
});
