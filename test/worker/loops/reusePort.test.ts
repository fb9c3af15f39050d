/**
 * The SO_REUSEPORT sockets of `--loops N` (native/listen.c through ReusePort.ts): the owner's
 * reservation gives the real port of `host:0` and keeps every other listener off it; listeners of
 * the group each take a share of new connections; closing them all frees the port.
 */
import { Effect, Exit, Scope } from "effect"
import * as net from "node:net"
import { describe, expect, it } from "vitest"
import { reserve, reusePortAddon } from "../../../src/worker/loops/ReusePort.js"

const addon = reusePortAddon()

const listenExclusive = (port: number) =>
  new Promise<net.Server>((resolve, reject) => {
    const s = net.createServer()
    s.once("error", reject)
    s.listen({ host: "127.0.0.1", port, exclusive: true }, () => resolve(s))
  })

/** A Node server over a listening fd of the group, counting the connections it took and echoing a byte. */
const serveFd = (fd: number) =>
  new Promise<{ server: net.Server; took: () => number }>((resolve, reject) => {
    let took = 0
    const server = net.createServer((c) => {
      took++
      c.on("error", () => {})
      c.on("data", (b) => c.end(b))
    })
    server.once("error", reject)
    server.listen({ fd }, () => resolve({ server, took: () => took }))
  })

const roundTrip = (port: number, byte: number) =>
  new Promise<number>((resolve, reject) => {
    const c = net.connect({ host: "127.0.0.1", port }, () => c.write(Buffer.of(byte)))
    c.once("data", (b) => resolve(b[0]!))
    c.once("error", reject)
  })

describe.runIf(addon !== undefined)("SO_REUSEPORT listeners", () => {
  it("a reserved port 0 is real and refused to others; the group's listeners share connections; stopping frees the port", async () => {
    const a = addon!
    const scope = Effect.runSync(Scope.make())
    const { host, port } = await Effect.runPromise(reserve(a, "127.0.0.1:0").pipe(Scope.extend(scope)))
    expect(host).toBe("127.0.0.1")
    expect(port).toBeGreaterThan(0)
    // The reservation is bound, not listening: it takes no connection, and no socket without SO_REUSEPORT gets the port.
    await expect(roundTrip(port, 1)).rejects.toThrow(/ECONNREFUSED/)
    await expect(listenExclusive(port)).rejects.toThrow(/EADDRINUSE/)

    const fds = [a.reusePortSocket(host, port, 128), a.reusePortSocket(host, port, 128)]
    expect(fds.every((fd) => fd >= 0)).toBe(true)
    const servers = await Promise.all(fds.map(serveFd))
    const echoes = await Promise.all(Array.from({ length: 48 }, (_, i) => roundTrip(port, i)))
    expect(echoes).toEqual(Array.from({ length: 48 }, (_, i) => i))
    // The kernel's hash: some on each (all 48 on one: 2 in 2^48).
    const took = servers.map((s) => s.took())
    expect(took[0]! + took[1]!).toBe(48)
    expect(took.every((n) => n > 0)).toBe(true)

    // One listener gone: the other takes every new connection.
    await new Promise((resolve) => servers[0]!.server.close(resolve))
    expect(await Promise.all(Array.from({ length: 8 }, (_, i) => roundTrip(port, 100 + i)))).toEqual(Array.from({ length: 8 }, (_, i) => 100 + i))
    expect(servers[1]!.took()).toBe(took[1]! + 8)

    await new Promise((resolve) => servers[1]!.server.close(resolve))
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await new Promise((resolve) => void listenExclusive(port).then((s) => s.close(resolve)))
  })

  it("an address the addon cannot bind is an error naming it", async () => {
    const exit = await Effect.runPromiseExit(Effect.scoped(reserve(addon!, "no-such-host.invalid:0")))
    expect(Exit.isFailure(exit)).toBe(true)
    const bad = addon!.reusePortSocket("not-an-ip", 0, 0)
    expect(addon!.errnoName(bad)).toBe("EINVAL")
  })
})
