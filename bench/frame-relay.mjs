// The keep-alive's frame relay (src/proxy/websocket-frames.ts FrameRelay) against the library way to
// see frames on a tunnel: terminating the WebSocket with ws's own reader and writing every message
// again with its writer. Both take the same stream of a participant's update frames (1 KiB text
// frames, a few long ones, pings) in 64 KiB chunks; rounds alternate (paired), CPU time per MiB.
//   npm run build && node bench/frame-relay.mjs [--mib 64] [--rounds 7]
import { parseArgs } from 'node:util';
import * as ws from 'ws';
import { FrameRelay } from '../dist/proxy/websocket-frames.js';

const { values } = parseArgs({
  options: { mib: { type: 'string', default: '64' }, rounds: { type: 'string', default: '7' } },
});
const MIB = Number(values.mib);
const ROUNDS = Number(values.rounds);
const { Sender, Receiver } = ws;

function frame(opcode, payload) {
  return Buffer.concat(Sender.frame(payload, { fin: true, opcode, mask: false, readOnly: true, rsv1: false }));
}

/** A participant's stream: mostly 1 KiB updates, every 100th a 64 KiB one, every 1000th a ping. */
function stream(bytes) {
  const frames = [];
  let total = 0;
  for (let i = 0; total < bytes; i++) {
    const next =
      i % 1000 === 999 ? frame(9, Buffer.from('ping')) : frame(1, Buffer.alloc(i % 100 === 99 ? 65_536 : 1_024, 0x61));
    frames.push(next);
    total += next.length;
  }
  const whole = Buffer.concat(frames);
  const chunks = [];
  for (let at = 0; at < whole.length; at += 65_536) chunks.push(whole.subarray(at, at + 65_536));
  return { chunks, bytes: whole.length };
}

function relay(chunks) {
  const frames = new FrameRelay(Buffer.from('ledger-gateway keep-alive 12345678'));
  let out = 0;
  for (const chunk of chunks) for (const part of frames.pass(chunk)) out += part.length;
  return out;
}

/** ws's reader decodes each message; its writer frames it again (what a terminating proxy does). */
function reframe(chunks) {
  const receiver = new Receiver({ isServer: false, skipUTF8Validation: false });
  let out = 0;
  receiver.on('message', (data, isBinary) => {
    for (const part of Sender.frame(data, { fin: true, opcode: isBinary ? 2 : 1, mask: false, readOnly: true }))
      out += part.length;
  });
  receiver.on('ping', (data) => {
    for (const part of Sender.frame(data, { fin: true, opcode: 9, mask: false, readOnly: true })) out += part.length;
  });
  for (const chunk of chunks) receiver.write(chunk);
  return out;
}

function cpuSeconds(run, chunks) {
  const start = process.cpuUsage();
  const out = run(chunks);
  const used = process.cpuUsage(start);
  if (out === 0) throw new Error('nothing passed');
  return (used.user + used.system) / 1e6;
}

const { chunks, bytes } = stream(MIB * 1024 * 1024);
const mib = bytes / (1024 * 1024);
cpuSeconds(relay, chunks); // warm-up, both
cpuSeconds(reframe, chunks);
const relayed = [];
const reframed = [];
for (let round = 0; round < ROUNDS; round++) {
  relayed.push(cpuSeconds(relay, chunks));
  reframed.push(cpuSeconds(reframe, chunks));
}
const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
const perMib = (seconds) => ((seconds / mib) * 1e3).toFixed(3);
console.log(`stream: ${mib.toFixed(1)} MiB in ${chunks.length} chunks, ${ROUNDS} paired rounds`);
console.log(`FrameRelay (pass through, pongs judged):  ${perMib(median(relayed))} ms CPU per MiB`);
console.log(`ws Receiver + Sender (decode, re-frame):  ${perMib(median(reframed))} ms CPU per MiB`);
console.log(`ratio ws / FrameRelay: ${(median(reframed) / median(relayed)).toFixed(1)}x`);
