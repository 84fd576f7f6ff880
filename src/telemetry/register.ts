// The process's tracing bootstrap, loaded before anything else:
//   node --import ./dist/telemetry/register.js dist/main.js --config <file>
// main.ts then finds the running SDK (activeTracing) and tells the app.
import { startTracing } from './tracing.js';

startTracing();
