/**
 * `--loops N` with SO_REUSEPORT (the default where the native plane loads): every serving loop
 * opens its own listening socket on the data port and its native plane accepts from it, every
 * pending connection per loop turn (native/listen.c, the plane's batch accept). No connection
 * waits on another process: with the owner dealing (HandOff.ts) a connect burst queued behind
 * Node's one-handle-at-a-time IPC hand-off (a send waits for the loop's ack of the last), seconds
 * at 1024 connects. The kernel spreads connections over the loops' sockets by a hash of their
 * addresses: as even as chance (64 connections on two loops: 32 ± 4 typically), not by count.
 *
 * The owner holds one more socket on the port, bound and never listening: it learns the real
 * port when given port 0 and keeps the port while loops die and restart (a listening socket that
 * closes leaves the group; the others keep taking every new connection). Connections already
 * queued on a dying loop's socket are reset with it, as are its open ones, unless the host sets
 * net.ipv4.tcp_migrate_req=1 (Linux ≥ 5.14): the kernel then moves queued ones to another loop.
 */
import * as SocketServer from "@effect/platform/SocketServer"
import type * as Socket from "@effect/platform/Socket"
import { Data, Duration, Effect, Exit, Layer, Runtime, Scope } from "effect"
import * as dns from "node:dns"
import type * as net from "node:net"
import { DataPlane } from "../plane/DataPlane.js"
import { loadNativeAddon, type NativeAddon } from "../plane/NativeAddon.js"
import { parseHostPort } from "../../transport/address.js"
import { serveConnections } from "../server/serveConnections.js"
import { connectionMessage } from "./protocol.js"

export class ReusePortError extends Data.TaggedError("ReusePortError")<{ readonly address: string; readonly detail: string }> {
  override get message() {
    return `cannot open a SO_REUSEPORT socket on ${this.address}: ${this.detail}`
  }
}

/** Listening sockets per loop: the same backlog the one-loop worker asks for. */
const BACKLOG = 4096
/** After an accept error, the pause before accepting again. */
const RETRY = Duration.millis(100)

/** The addon, when the native plane could use it (else the owner deals connections instead). */
export const reusePortAddon = (): NativeAddon | undefined => {
  const load = loadNativeAddon()
  return load._tag === "Loaded" ? load.addon : undefined
}

const format = (host: string, port: number) => `${host.includes(":") ? `[${host}]` : host}:${port}`

/** A SO_REUSEPORT socket on `host` (numeric) and `port`; listening when backlog > 0. */
const open = (addon: NativeAddon, host: string, port: number, backlog: number) =>
  Effect.suspend(() => {
    const fd = addon.reusePortSocket(host, port, backlog)
    return fd < 0 ? Effect.fail(new ReusePortError({ address: format(host, port), detail: addon.errnoName(fd) })) : Effect.succeed(fd)
  })

/**
 * The owner's reservation of `address` (`host:0`: a free port): a bound, never-listening
 * SO_REUSEPORT socket, closed with the scope. Gives the numeric host and real port the loops bind.
 */
export const reserve = (addon: NativeAddon, address: string): Effect.Effect<{ readonly host: string; readonly port: number }, ReusePortError, Scope.Scope> =>
  Effect.gen(function* () {
    const hp = parseHostPort(address, { allowPortZero: true })
    if (hp === undefined) return yield* Effect.fail(new ReusePortError({ address, detail: "expected host:port" }))
    // The addon binds numeric addresses only; a name is resolved once here and the loops get its address.
    const host = yield* Effect.async<string, ReusePortError>((resume) =>
      dns.lookup(hp.host, (err, ip) => resume(err === null ? Effect.succeed(ip) : Effect.fail(new ReusePortError({ address, detail: err.message }))))
    )
    const fd = yield* Effect.acquireRelease(open(addon, host, hp.port, 0), (fd) => Effect.sync(() => addon.closeFd(fd)))
    const port = addon.localPort(fd)
    if (port < 0) return yield* Effect.fail(new ReusePortError({ address, detail: `getsockname: ${addon.errnoName(port)}` }))
    return { host, port }
  })

const tellOwner = () => {
  if (process.send !== undefined && process.connected) process.send(connectionMessage("serving"), undefined, undefined, () => {})
}

/**
 * A serving loop's socket server over its own SO_REUSEPORT listener on `address` (numeric host,
 * the owner's reserved port). The socket is opened when the data server starts serving, not
 * before, so the kernel never queues a connection on a loop that does not accept yet; it closes
 * when serving stops. Tells the owner "serving" once it listens.
 */
export const layer = (address: { readonly host: string; readonly port: number }): Layer.Layer<SocketServer.SocketServer, never, DataPlane> =>
  Layer.effect(
    SocketServer.SocketServer,
    Effect.gen(function* () {
      const plane = yield* DataPlane
      const addon = reusePortAddon()
      const adopt = plane.adoptListener
      if (addon === undefined || adopt === undefined) {
        return yield* Effect.dieMessage(`worker loop: --loops-accept reuseport needs the native data plane (this loop's is ${plane.name})`)
      }
      // The native plane reads its connections itself: they stay paused, libuv never reads them.
      const pause = plane.read !== undefined
      const run = <R, E, _>(handler: (socket: Socket.Socket) => Effect.Effect<_, E, R>) =>
        Effect.gen(function* () {
          const { serve, scope } = yield* serveConnections(handler)
          const accept = (s: net.Socket) => {
            s.setNoDelay(true)
            if (!pause) s.resume()
            serve(s)
          }
          const fd = yield* open(addon, address.host, address.port, BACKLOG).pipe(Effect.orDie)
          const runFork = Runtime.runFork(yield* Effect.runtime<never>())
          let stop: (() => void) | undefined
          let closed = false
          // No libuv watches this socket: after an accept error (EMFILE: out of fds) this loop keeps it
          // and accepts again a moment later, its queue waiting meanwhile, rather than leave it unserved.
          const onFailed = (negErrno: number) => {
            stop = undefined
            runFork(
              Effect.logWarning(`accept on ${format(address.host, address.port)} failed (${addon.errnoName(negErrno)}); accepting again in ${RETRY}`).pipe(
                Effect.zipRight(Effect.sleep(RETRY)),
                Effect.zipRight(Effect.sync(() => void (closed || (stop = adopt(fd, accept, onFailed)))))
              )
            )
          }
          stop = adopt(fd, accept, onFailed)
          if (stop === undefined) {
            addon.closeFd(fd)
            return yield* Effect.dieMessage(`worker loop: the native plane cannot accept on its listening socket ${format(address.host, address.port)}`)
          }
          tellOwner()
          return yield* Effect.async<never>(() =>
            Effect.suspend(() => {
              // Closed first: from here the kernel gives new connections to the other loops.
              closed = true
              stop?.()
              addon.closeFd(fd)
              return Scope.close(scope, Exit.void)
            })
          )
        })
      return SocketServer.SocketServer.of({ address: { _tag: "TcpAddress", hostname: address.host, port: address.port }, run })
    })
  )
