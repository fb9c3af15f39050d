/**
 * Balanced scheduling of `--loops N` (`--loops-accept dealt`, and the fallback without the native
 * plane): the owner listens on the data port itself and deals each connection to the serving loop
 * holding the fewest open connections (ties: the one dealt to longest ago), passing the socket's
 * handle over the loop's IPC channel (HandedSockets.ts takes it). Node sends a loop's next handle
 * only once the loop acknowledged the last, so a burst of connects waits in line here: seconds at
 * 1024 connects on a busy box, which is why loops accept for themselves by default (ReusePort.ts).
 *
 * Why not node:cluster's round-robin: its primary hands the next queued connection to whichever
 * loop acknowledged its last one first, so a burst of connects (a client opening 64 at once) goes
 * mostly to the loop that is quicker to answer at that moment: measured 47/17 on two loops, and
 * as connections live for the whole run, the loop with 47 served each at ~0.4× the rate of the
 * other's (bench/dataplane-loops-probe.ts): the latency tail of `--loops 2`. Dealing by open count
 * keeps the split within one connection whatever the timing. The kernel's SO_REUSEPORT hash
 * spreads them only as evenly as chance (64 connections: ±4 per loop typically).
 *
 * Connections are accepted by this process's libuv, one per loop turn; the owner does no serving,
 * so its turns are short.
 */
import type { Worker as ClusterWorker } from "node:cluster"
import * as net from "node:net"
import { Effect, type Scope } from "effect"
import { parseHostPort } from "../../transport/address.js"
import { connectionMessage } from "./protocol.js"

interface Dealt {
  readonly worker: ClusterWorker
  open: number
  /** When it was last dealt a connection (a sequence number). */
  last: number
}

/** Connections accepted while no loop serves wait for one, up to this many (then they are refused). */
const MAX_WAITING = 4096

export class HandOff {
  readonly #loops = new Map<number, Dealt>()
  readonly #waiting: Array<net.Socket> = []
  #seq = 0

  constructor(
    readonly host: string,
    readonly port: number
  ) {}

  /** Loop `w` takes connections from now on. */
  serving(w: ClusterWorker): void {
    if (!this.#loops.has(w.id)) this.#loops.set(w.id, { worker: w, open: 0, last: 0 })
    for (const s of this.#waiting.splice(0)) this.deal(s)
  }

  /** Loop `id` exited: its connections went with it. */
  gone(id: number): void {
    this.#loops.delete(id)
  }

  /** One of loop `id`'s connections closed. */
  closed(id: number): void {
    const d = this.#loops.get(id)
    if (d !== undefined && d.open > 0) d.open--
  }

  /** Open connections per serving loop (by cluster worker id), as dealt minus reported closed. */
  open(): ReadonlyMap<number, number> {
    return new Map([...this.#loops].map(([id, d]) => [id, d.open]))
  }

  deal(socket: net.Socket): void {
    let best: Dealt | undefined
    for (const d of this.#loops.values()) {
      if (!d.worker.isConnected()) continue
      if (best === undefined || d.open < best.open || (d.open === best.open && d.last < best.last)) best = d
    }
    if (best === undefined) {
      if (this.#waiting.length < MAX_WAITING) this.#waiting.push(socket)
      else socket.destroy()
      return
    }
    const handle = (socket as unknown as { _handle?: unknown })._handle
    if (handle === undefined || handle === null) return void socket.destroy()
    const d = best
    d.open++
    d.last = ++this.#seq
    try {
      // Once sent, the loop holds its own copy of the fd: this process's copy closes (no FIN: the loop's stays open).
      d.worker.send(connectionMessage("take"), handle as net.Socket, (err: Error | null) => {
        if (err !== null) d.open--
        socket.destroy()
      })
    } catch {
      d.open--
      socket.destroy()
    }
  }

  /** Connections accepted but not yet dealt are refused (the worker is stopping). */
  drop(): void {
    for (const s of this.#waiting.splice(0)) s.destroy()
  }
}

/** Listens on `address` (`host:0`: a free port) and deals every accepted connection; stops listening with the scope. */
export const listen = (address: string): Effect.Effect<HandOff, string, Scope.Scope> =>
  Effect.gen(function* () {
    const hp = parseHostPort(address, { allowPortZero: true })
    if (hp === undefined) return yield* Effect.fail(`--data-addr ${address}: expected host:port`)
    let dealer: HandOff | undefined
    // Paused: the loop that takes a connection must be its first and only reader.
    const server = net.createServer({ pauseOnConnect: true, noDelay: true, allowHalfOpen: true }, (s) => {
      s.on("error", () => {})
      if (dealer === undefined) s.destroy()
      else dealer.deal(s)
    })
    yield* Effect.acquireRelease(
      Effect.async<void, string>((resume) => {
        server.once("error", (e) => resume(Effect.fail(`cannot listen on ${address}: ${e.message}`)))
        // exclusive: this process's own socket, not one node:cluster would share with its children.
        server.listen({ host: hp.host, port: hp.port, backlog: 4096, exclusive: true }, () => resume(Effect.void))
      }),
      () =>
        Effect.async<void>((resume) => {
          dealer?.drop()
          // Dealt connections belong to the loops: close() waits for none of them.
          server.close(() => resume(Effect.void))
        })
    )
    const bound = server.address() as net.AddressInfo
    dealer = new HandOff(bound.address, bound.port)
    return dealer
  })
