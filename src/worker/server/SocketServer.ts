/**
 * The data listener's socket server: @effect/platform's `SocketServer` (`address`, and `run(handler)`
 * forking one fiber per accepted connection, the platform `Socket` as its argument and the Node
 * socket as `NodeSocket.NetSocket` in its context, exactly as `NodeSocketServer` does), so the data
 * server runs over either. Ours differs in two ways the data plane needs:
 *
 * - `adopt`: the native plane may drain the listening fd itself, every pending connection per
 *   loop turn (libuv accepts one per turn: a burst of new connections behind 1024 busy ones
 *   waited seconds). `NodeSocketServer` keeps its `net.Server` private, so it cannot offer this.
 * - `Connection`: the one place a connection's fd is read, for planes that make syscalls on it.
 * - Shutdown: connections accepted after `run` ended (queued for a next `run`) are destroyed when
 *   the server closes; NodeSocketServer leaves them open, and its `server.close` then waits until
 *   those clients hang up.
 *
 * - `runDirect` (read with `runDirectOf`): connections handed to a plain callback, without the
 *   fiber per connection that `run` forks; the data server serves this way (serveConnections.ts).
 *
 * Either way nothing is per request: the hot loop stays plain callbacks, and the server costs no
 * CPU per request (docs/decisions/measured-in-code.md).
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as Socket from "@effect/platform/Socket"
import * as SocketServer from "@effect/platform/SocketServer"
import { Effect, Exit, Layer, Scope } from "effect"
import * as net from "node:net"
import { type ControlTlsFiles, controlTlsServer } from "../../transport/controlTls.js"
import { type ConnectionServing, serveConnections, serveConnectionsDirect } from "./serveConnections.js"

/**
 * An accepted connection as the data plane sees it: the Node socket and its kernel fd.
 * libuv exposes a TCP handle's fd on Unix (`handle.fd`); Node has no public accessor, so this
 * is the only place the project reads it.
 */
export class Connection {
  constructor(readonly socket: net.Socket) {}

  /** The connected socket's fd, or undefined when it has none (closed, or not a TCP socket). */
  get fd(): number | undefined {
    return handleFd(this.socket)
  }

  /**
   * The connection a socket server's handler runs for, from the `NetSocket` that both this
   * server and NodeSocketServer put in the handler's context (their `run` does not type it).
   */
  static readonly current: Effect.Effect<Connection> = Effect.flatMap(Effect.serviceOption(NodeSocket.NetSocket), (socket) =>
    socket._tag === "Some"
      ? Effect.succeed(new Connection(socket.value))
      : Effect.dieMessage("the socket server gave its handler no Node socket (NodeSocket.NetSocket): use a Node socket server")
  )
}

const handleFd = (handle: net.Socket | net.Server): number | undefined => {
  const fd = (handle as unknown as { _handle?: { fd?: number } | null })._handle?.fd
  return typeof fd === "number" && fd >= 0 ? fd : undefined
}

/** A listening server's own fd (undefined for a cluster worker's server, whose primary accepts). */
export const listeningFd = (server: net.Server): number | undefined => handleFd(server)

/**
 * Takes over accepting on a listening fd; `onSocket` gets paused sockets. Returns how to stop, or
 * undefined when it cannot. `onFailed` hears of an accept error (EMFILE...) that made it stop.
 */
export type Adopt = (listenFd: number, onSocket: (socket: net.Socket) => void, onFailed?: (negErrno: number) => void) => (() => void) | undefined

export interface ListenOptions {
  readonly host: string
  readonly port: number
  readonly backlog?: number
  /** Sockets arrive paused (a plane that reads the fd itself must be the only reader). */
  readonly pauseOnConnect?: boolean
  readonly adopt?: Adopt
  /** Serve TLS with these files (the control plane's server: mTLS with a CA, certificates re-read on change). */
  readonly tls?: {
    readonly files: ControlTlsFiles
    /** A peer refused (handshake, certificate or trust domain), and why. */
    readonly refused: (peer: string, why: string) => void
    readonly reloaded: (outcome: string) => void
  }
}

const DirectRun = Symbol.for("talon/worker/SocketServer/runDirect")

/**
 * What this server offers beyond @effect/platform's `run`: connections handed to a plain callback,
 * no fiber per connection (serveConnections.ts, `serveConnectionsDirect`). Runs until interrupted;
 * interrupting it destroys every connection it handed out.
 */
export type RunDirect = (onSocket: (socket: net.Socket) => void) => Effect.Effect<never, SocketServer.SocketServerError>

/** The server's direct run, when it is one of ours (NodeSocketServer, or a serving loop's handed sockets, have none). */
export const runDirectOf = (server: SocketServer.SocketServer["Type"]): RunDirect | undefined =>
  (server as unknown as { readonly [DirectRun]?: RunDirect })[DirectRun]

/** Listens now; the server closes (and every connection it still holds is destroyed) with the scope. */
export const make = (options: ListenOptions): Effect.Effect<SocketServer.SocketServer["Type"], SocketServer.SocketServerError, Scope.Scope> =>
  Effect.gen(function* () {
    const pending: Array<net.Socket> = []
    let onConnection: (socket: net.Socket) => void = (socket) => void pending.push(socket)
    // allowHalfOpen: a client that half-closes after its last request still gets every reply.
    const tls = options.tls
    const secure =
      tls === undefined
        ? undefined
        : yield* Effect.try({
            try: () =>
              controlTlsServer(
                tls.files,
                (s) => {
                  s.setNoDelay(true)
                  onConnection(s)
                },
                tls.refused,
                tls.reloaded
              ),
            catch: (cause) => new SocketServer.SocketServerError({ reason: "Open", cause })
          })
    const server =
      secure?.server ??
      net.createServer({ noDelay: true, allowHalfOpen: true, pauseOnConnect: options.pauseOnConnect === true }, (s) => onConnection(s))
    let failed: ((cause: Error) => void) | undefined
    server.on("error", (cause) => failed?.(cause))
    let stopAdopting: (() => void) | undefined
    yield* Effect.acquireRelease(
      Effect.async<void, SocketServer.SocketServerError>((resume) => {
        failed = (cause) => resume(Effect.fail(new SocketServer.SocketServerError({ reason: "Open", cause })))
        server.listen({ host: options.host, port: options.port, backlog: options.backlog ?? 511 }, () => {
          failed = undefined
          const fd = listeningFd(server)
          if (options.adopt !== undefined && secure === undefined && fd !== undefined) stopAdopting = options.adopt(fd, (s) => onConnection(s))
          resume(Effect.void)
        })
      }),
      () =>
        Effect.async<void>((resume) => {
          stopAdopting?.()
          // Nothing serves a connection from here on; close() waits for every one to be gone.
          onConnection = (s) => void s.destroy()
          for (const s of pending.splice(0)) s.destroy()
          // Connections still in their TLS handshake would hold close() open.
          secure?.stop()
          server.close(() => resume(Effect.void))
        })
    )

    const runWith = <R>(serving: Effect.Effect<ConnectionServing, never, R>) =>
      Effect.gen(function* () {
        const { serve, scope } = yield* serving
        return yield* Effect.async<never, SocketServer.SocketServerError>((resume) => {
          onConnection = serve
          for (const s of pending.splice(0)) serve(s)
          failed = (cause) => resume(Effect.fail(new SocketServer.SocketServerError({ reason: "Unknown", cause })))
          return Effect.suspend(() => {
            onConnection = (s) => void pending.push(s)
            failed = undefined
            return Scope.close(scope, Exit.void)
          })
        })
      })

    const run = <R, E, _>(handler: (socket: Socket.Socket) => Effect.Effect<_, E, R>) => runWith(serveConnections(handler))
    const runDirect: RunDirect = (onSocket) => runWith(serveConnectionsDirect(onSocket))

    const bound = server.address() as net.AddressInfo
    return Object.assign(
      SocketServer.SocketServer.of({
        address: { _tag: "TcpAddress", hostname: bound.address, port: bound.port },
        run
      }),
      { [DirectRun]: runDirect }
    )
  })

export const layer = (options: ListenOptions): Layer.Layer<SocketServer.SocketServer, SocketServer.SocketServerError> =>
  Layer.scoped(SocketServer.SocketServer, make(options))
