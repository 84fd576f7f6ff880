// A refusal answered while the client is still sending its body closes the connection (the rest is
// not read as a next request). Closing a socket whose peer still sends makes the kernel answer those
// bytes with a reset (RFC 9293 section 3.10.7.4; Linux resets on close with unread data), and a
// client that has not yet read the answer loses it: it sees "connection reset" instead of the coded
// refusal (a 503 with Retry-After it would have honoured). So, as nginx's lingering_close does, the
// answer and a FIN are sent, what still comes is read and thrown away until the body ends or the
// client closes, and only then, or at the bounds nginx uses by default, is the socket closed.
// Each byte read so lingers as garbage until V8 collects it (about 64 MiB of it before a collection):
// a burst of refusals (512 at once) added 60 MiB to the peak, so only a few connections linger at once.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/** nginx's lingering_time: the longest a refused body is read and thrown away. */
const LINGER_MS = 30_000;
/** nginx's lingering_timeout: a lingering connection that read nothing over one such interval is closed. */
const LINGER_IDLE_MS = 5_000;

/** Connections lingering at once; a refusal past it closes at once, as before lingering existed. */
export const MAX_LINGERING = 16;

const lingering = new WeakSet<Socket>();
let lingeringNow = 0;

/**
 * Makes the close that follows the answer to `request` (still arriving) a lingering one. Node's HTTP
 * server closes a connection after its last answer with `socket.destroySoon()`: this socket's own
 * replaces it with a half-close that reads on, bounded.
 */
export function lingerAfterAnswer(request: IncomingMessage): void {
  const socket = request.socket as Socket & { destroySoon?: () => void };
  if (request.complete || socket.destroyed || lingering.has(socket) || lingeringNow >= MAX_LINGERING) return;
  lingering.add(socket);
  lingeringNow += 1;
  socket.once('close', () => (lingeringNow -= 1));
  socket.destroySoon = () => {
    const close = () => socket.destroy();
    if (socket.destroyed || request.readableEnded) return close();
    const total = setTimeout(close, LINGER_MS);
    // Read by Node's parser (not always as 'data' events): bytesRead tells whether anything came.
    let bytesRead = socket.bytesRead;
    const idle = setInterval(() => {
      if (socket.bytesRead === bytesRead) close();
      bytesRead = socket.bytesRead;
    }, LINGER_IDLE_MS);
    socket.once('close', () => {
      clearTimeout(total);
      clearInterval(idle);
    });
    socket.once('end', close); // the client closed its side: nothing more will come
    request.once('end', close); // the body ended: nothing is left unread
    request.resume(); // read and thrown away (a reader that refused it may have stopped reading)
    socket.end(); // the answer, then a FIN
  };
}
