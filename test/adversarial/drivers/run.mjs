#!/usr/bin/env node
// Runs one red-team driver in a process of its own (its CPU then never slows the caller whose rate
// is measured): `node run.mjs <name> '<options as JSON>'`. It stops after options.durationMs, or on
// SIGTERM, and prints one line: {"driver":name,"result":...}.
import { DRIVERS } from './index.mjs';

const [name, json = '{}'] = process.argv.slice(2);
const driver = DRIVERS[name];
if (driver === undefined) {
  console.error(`unknown driver ${name}; known: ${Object.keys(DRIVERS).join(', ')}`);
  process.exit(2);
}
const options = JSON.parse(json);
const controller = new AbortController();
process.once('SIGTERM', () => controller.abort());
if (options.durationMs !== undefined) setTimeout(() => controller.abort(), options.durationMs).unref();
const result = await driver.run(options, controller.signal);
console.log(JSON.stringify({ driver: name, result }));
