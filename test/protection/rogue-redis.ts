// A server that speaks the Redis protocol (RESP2) on a loopback port and misbehaves as a test asks:
// it records every command it is sent (AUTH's arguments included), answers the handshake a client
// makes (AUTH, CLIENT, INFO, PING) and then, as configured, streams one reply that never ends, or
// names itself as the master when asked as a sentinel, or stands in for a real master's sentinel that
// answers when the test lets it. No Redis needed for the rogue itself.
import net from 'node:net';

export interface RogueRedis {
  readonly port: number;
  /** Every command received, as its words (`['AUTH', 'user', 'password']`). */
  readonly commands: string[][];
  /** Connections accepted so far. */
  readonly connections: number;
  /** Connections open now that subscribed to +switch-master (a client's failover detector). */
  readonly switchSubscribers: number;
  /** As a sentinel: tells every subscriber that the master moved (to where `masterPort` names). */
  publishSwitchMaster(): void;
  /** Bytes of the endless replies written so far. */
  readonly streamedBytes: number;
  close(): Promise<void>;
}

export interface RogueBehaviour {
  /** After the handshake, answer every other command with a bulk string that never ends. */
  readonly endlessReply?: boolean;
  /** As a sentinel: `SENTINEL get-master-addr-by-name` names this server itself. */
  readonly namesItselfMaster?: boolean;
  /**
   * As a sentinel for a real master on this port: `SENTINEL get-master-addr-by-name` is answered
   * when `onMasterQuery` calls `answer` (at once when there is no hook), and SUBSCRIBE is accepted.
   */
  readonly masterPort?: number;
  readonly onMasterQuery?: (answer: () => void) => void;
}

const bulk = (text: string) => `$${Buffer.byteLength(text)}\r\n${text}\r\n`;
const INFO = bulk('# Server\r\nredis_version:7.2.0\r\nredis_mode:standalone\r\nloading:0\r\nrole:master\r\n');

/** Reads RESP arrays of bulk strings (what clients send) from `buffer`; returns the commands and what is left. */
function parseCommands(buffer: Buffer): { commands: string[][]; rest: Buffer } {
  const commands: string[][] = [];
  let at = 0;
  for (;;) {
    const start = at;
    if (buffer[at] !== 0x2a) break; // '*'
    const headEnd = buffer.indexOf('\r\n', at);
    if (headEnd === -1) break;
    const count = Number(buffer.toString('latin1', at + 1, headEnd));
    at = headEnd + 2;
    const words: string[] = [];
    let complete = true;
    for (let i = 0; i < count; i++) {
      const lengthEnd = buffer.indexOf('\r\n', at);
      if (buffer[at] !== 0x24 || lengthEnd === -1) {
        complete = false;
        break;
      }
      const length = Number(buffer.toString('latin1', at + 1, lengthEnd));
      if (buffer.length < lengthEnd + 2 + length + 2) {
        complete = false;
        break;
      }
      words.push(buffer.toString('utf8', lengthEnd + 2, lengthEnd + 2 + length));
      at = lengthEnd + 2 + length + 2;
    }
    if (!complete) {
      at = start;
      break;
    }
    commands.push(words);
  }
  return { commands, rest: buffer.subarray(at) };
}

export async function startRogueRedis(behaviour: RogueBehaviour): Promise<RogueRedis> {
  const commands: string[][] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  let streamedBytes = 0;
  const subscribers = new Set<net.Socket>();
  const chunk = Buffer.alloc(64 * 1024, 'x');

  /** Writes for as long as the socket takes it: the client reads as fast as it can. */
  function streamForever(socket: net.Socket): void {
    socket.write('$9999999999\r\n');
    const pump = () => {
      while (!socket.destroyed) {
        streamedBytes += chunk.length;
        if (!socket.write(chunk)) {
          socket.once('drain', pump);
          return;
        }
      }
    };
    pump();
  }

  function answerAsSentinel(socket: net.Socket, words: string[], masterPort: number): void {
    if (words[1]?.toLowerCase() !== 'get-master-addr-by-name') {
      socket.write('*0\r\n');
      return;
    }
    const answer = () => socket.write(`*2\r\n${bulk('127.0.0.1')}${bulk(String(masterPort))}`);
    if (behaviour.onMasterQuery === undefined) answer();
    else behaviour.onMasterQuery(answer);
  }

  const server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      subscribers.delete(socket);
    });
    socket.on('error', () => undefined);
    let buffered: Buffer = Buffer.alloc(0);
    let streaming = false;
    socket.on('data', (data: Buffer) => {
      const parsed = parseCommands(Buffer.concat([buffered, data]));
      buffered = parsed.rest;
      for (const words of parsed.commands) {
        commands.push(words);
        if (streaming) continue;
        const name = words[0]!.toUpperCase();
        if (name === 'AUTH' || name === 'CLIENT' || name === 'SELECT') socket.write('+OK\r\n');
        else if (name === 'INFO') socket.write(INFO);
        else if (name === 'SENTINEL' && behaviour.masterPort !== undefined) {
          answerAsSentinel(socket, words, behaviour.masterPort);
        } else if (name === 'SUBSCRIBE' && behaviour.masterPort !== undefined) {
          subscribers.add(socket);
          socket.write(`*3\r\n${bulk('subscribe')}${bulk(words[1] ?? '')}:1\r\n`);
        } else if (name === 'SENTINEL' && behaviour.namesItselfMaster === true) {
          const address = server.address() as net.AddressInfo;
          if (words[1]?.toLowerCase() === 'get-master-addr-by-name')
            socket.write(`*2\r\n${bulk('127.0.0.1')}${bulk(String(address.port))}`);
          else socket.write('*0\r\n');
        } else if (behaviour.endlessReply === true) {
          streaming = true;
          streamForever(socket);
        } else if (name === 'PING') socket.write('+PONG\r\n');
        else socket.write('-ERR unknown command\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    commands,
    get connections() {
      return connections;
    },
    get streamedBytes() {
      return streamedBytes;
    },
    get switchSubscribers() {
      return subscribers.size;
    },
    publishSwitchMaster() {
      const port = String(behaviour.masterPort);
      const message = bulk(`mymaster 127.0.0.1 ${port} 127.0.0.1 ${port}`);
      for (const socket of subscribers) socket.write(`*3\r\n${bulk('message')}${bulk('+switch-master')}${message}`);
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
