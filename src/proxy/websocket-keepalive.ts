// Keep-alive pings on both legs of a WebSocket tunnel (websocket.keepAliveSeconds). Canton's v2
// streams send no WebSocket keep-alive (pekko-http's `periodic-keep-alive-max-idle` is off) and
// pekko closes a connection idle for its `idle-timeout` (60 s), as do load balancers on the way
// (an AWS ALB's 60 s): a quiet subscription is cut. The gateway pings the client (unmasked, as its
// server) and the participant (masked, as its client), each between two frames of the stream going
// that way (websocket-frames.ts FrameRelay), and drops the pongs that answer its pings, so that
// neither side sees a frame it did not ask for and every frame of the stream passes unchanged.
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { FrameRelay, pingFrame } from './websocket-frames.js';

/** One direction of a tunnel: its bytes from one side to the other, until stop(). */
export interface TunnelDirection {
  stop(): void;
}

/**
 * Sends what `source` reads to `destination` (`end`: ending it when the source ends, as pipe does):
 * piped as it is without `frames`, else through the relay, which drops the pongs to the gateway's
 * pings. Written synchronously as each chunk is read, so the relay's `atBoundary` describes what
 * the destination has been given.
 */
export function forward(source: Duplex, destination: Duplex, end: boolean, frames?: FrameRelay): TunnelDirection {
  if (frames === undefined) {
    source.pipe(destination, { end });
    return { stop: () => source.unpipe(destination) };
  }
  const resume = () => source.resume();
  const onData = (chunk: Buffer) => {
    let flowing = true;
    for (const part of frames.pass(chunk)) flowing = destination.write(part) && flowing;
    if (!flowing) source.pause();
  };
  const onEnd = () => destination.end();
  source.on('data', onData);
  destination.on('drain', resume);
  if (end) source.once('end', onEnd);
  return {
    stop() {
      source.off('data', onData);
      source.off('end', onEnd);
      destination.off('drain', resume);
    },
  };
}

export interface TunnelLegs {
  readonly client: Duplex;
  readonly participant: Duplex;
  /** What the client sent with its upgrade, already passed on to the participant. */
  readonly clientHead: Buffer;
  /** What the participant sent with its 101, already passed on to the client. */
  readonly participantHead: Buffer;
}

export interface TunnelKeepAlive {
  /** The client's frames on their way to the participant (its pongs to the gateway dropped). */
  readonly fromClient: FrameRelay;
  /** The participant's frames on their way to the client (its pongs to the gateway dropped). */
  readonly fromParticipant: FrameRelay;
  stop(): void;
}

/**
 * Every `intervalMs`, a ping to each side whose stream is between two frames and whose connection
 * has nothing waiting to be written (a busy stream needs none). A side that sent no byte in the
 * interval after its ping, while the gateway was reading from it, is gone: `onSilent` (the tunnel
 * closes, as the gateway's idle timeout would close it, sooner). No ping once a close frame passed.
 */
export function keepTunnelAlive(
  legs: TunnelLegs,
  intervalMs: number,
  onSilent: (side: 'client' | 'participant') => void,
): TunnelKeepAlive {
  // One payload per tunnel: a pong carrying it answers this gateway's ping and goes no further.
  const payload = Buffer.concat([Buffer.from('ledger-gateway keep-alive '), randomBytes(8)]);
  const fromClient = new FrameRelay(payload);
  const fromParticipant = new FrameRelay(payload);
  fromClient.observe(legs.clientHead);
  fromParticipant.observe(legs.participantHead);
  // The bytes read from a side when the gateway last pinged it; undefined: no ping unanswered.
  let clientAtPing: number | undefined;
  let participantAtPing: number | undefined;
  const silent = (side: Duplex, relay: FrameRelay, atPing: number | undefined) =>
    atPing !== undefined && relay.received === atPing && !side.isPaused();

  const timer = setInterval(() => {
    if (silent(legs.client, fromClient, clientAtPing)) return onSilent('client');
    if (silent(legs.participant, fromParticipant, participantAtPing)) return onSilent('participant');
    clientAtPing = participantAtPing = undefined;
    if (fromClient.sawClose || fromParticipant.sawClose) return;
    if (fromParticipant.atBoundary && legs.client.writable && legs.client.writableLength === 0) {
      legs.client.write(pingFrame(payload));
      clientAtPing = fromClient.received;
    }
    if (fromClient.atBoundary && legs.participant.writable && legs.participant.writableLength === 0) {
      legs.participant.write(pingFrame(payload, randomBytes(4)));
      participantAtPing = fromParticipant.received;
    }
  }, intervalMs);
  timer.unref();
  return { fromClient, fromParticipant, stop: () => clearInterval(timer) };
}
