import { it } from 'vitest';
import { startRedisServer } from './redis-server.js';
it('probe', async () => {
  const s = await startRedisServer();
  console.log('started', s.url);
  const t = performance.now();
  const p = s.stop();
  setTimeout(() => console.log('pending...'), 3000);
  await p;
  console.log('stopped', performance.now() - t);
}, 10000);
