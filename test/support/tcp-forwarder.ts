/**
 * One address that moves, as a managed PostgreSQL's virtual IP or DNS name does on failover: a TCP
 * forwarder on a port of its own that passes each connection to the current target. `moveTo` points
 * it elsewhere and cuts every connection open now (a failover ends them: the old primary is gone);
 * `cut` cuts them without moving (the old primary dying before anything is promoted).
 */
import net from 'node:net';

export interface MovableAddress {
  port: number;
  /** Connections passed on so far. */
  readonly connections: number;
  moveTo(port: number): void;
  cut(): void;
  close(): Promise<void>;
}

export async function movableAddress(targetPort: number): Promise<MovableAddress> {
  let target = targetPort;
  let connections = 0;
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    connections++;
    const upstream = net.connect(target, '127.0.0.1');
    open.add(client);
    open.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const cut = () => {
    for (const socket of open) socket.destroy();
    open.clear();
  };
  return {
    port: (server.address() as net.AddressInfo).port,
    get connections() {
      return connections;
    },
    moveTo(port: number) {
      target = port;
      cut();
    },
    cut,
    close: () =>
      new Promise<void>((resolve) => {
        cut();
        server.close(() => resolve());
      }),
  };
}
