// One WebSocket update stream (Canton `Endpoints.scala`): the token both as the `jwt.token.` subprotocol (what
// Canton clients send) and as an Authorization header (what HAProxy's jwt_verify reads), one request
// frame asking the sandbox for N synthetic transactions, then count frames until the server closes.
import WebSocket from 'ws';
import { STREAM_PATH, streamRequestFrame } from './requests.mjs';

export function measureStream({ baseUrl, token, messages, timeoutMs = 120_000 }) {
  return new Promise((resolve, reject) => {
    const url = `${baseUrl.replace(/^http/, 'ws')}${STREAM_PATH}`;
    const started = performance.now();
    let opened;
    let received = 0;
    let bytes = 0;
    let settled = false;
    const socket = new WebSocket(url, [`jwt.token.${token}`, 'daml.ws.auth'], {
      headers: { authorization: `Bearer ${token}` },
      perMessageDeflate: false,
    });
    const finish = (error, value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (error) reject(error);
      else resolve(value);
    };
    const timer = setTimeout(() => {
      socket.terminate();
      finish(new Error(`stream timed out after ${received} of ${messages} messages`));
    }, timeoutMs);
    socket.once('unexpected-response', (_request, response) =>
      finish(new Error(`upgrade refused: HTTP ${response.statusCode}`)),
    );
    socket.once('error', (error) => finish(error));
    socket.once('open', () => {
      opened = performance.now();
      socket.send(streamRequestFrame(messages));
    });
    socket.on('message', (data) => {
      received++;
      bytes += data.length;
    });
    socket.once('close', (code) => {
      const ended = performance.now();
      if (received !== messages) {
        finish(new Error(`stream closed (${code}) after ${received} of ${messages} messages`));
        return;
      }
      const seconds = (ended - started) / 1000;
      finish(undefined, {
        messages: received,
        bytes,
        seconds,
        handshakeMs: opened - started,
        messagesPerSecond: received / seconds,
      });
    });
  });
}
