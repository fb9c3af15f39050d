/**
 * The native receive (native/fill.c through receiveConnection.ts) against a raw TCP origin whose
 * every byte is written by hand: a content-length body lands in the sink's own pages whole,
 * wherever the wire splits it between the head's read and the native receive; each complete
 * page comes back hashed, with the hash xxhash-wasm gives; a reset, a short body or a stall
 * ends the exchange after exactly the bytes that came, with a retryable code; an abort during a
 * native receive wakes it and never closes the fd under it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { randomBytes } from "node:crypto"
import xxhash from "xxhash-wasm"
import type { OriginRequest } from "../../src/backend/http.js"
import { fillAddon, type FillAddon } from "../../src/backend/nativeReceive.js"
import { type BodySink, type DirectSink, Receiver, type ReceiveError } from "../../src/backend/receiveInto.js"
import { rawOrigin } from "./rawOrigin.js"

// On Linux the addon must be built (npm ci builds it); elsewhere there is no native receive to test.
const loaded = process.platform === "linux" ? fillAddon() : undefined
if (typeof loaded === "string") throw new Error(`these tests need the fill addon: ${loaded}`)
const addon = loaded as FillAddon

const receiverOf = (timeoutMs = 5_000) =>
  Effect.acquireRelease(
    Effect.sync(() => new Receiver(timeoutMs)),
    (r) => Effect.sync(() => r.close())
  )

const get = (port: number): OriginRequest => ({ method: "GET", protocol: "http:", hostname: "127.0.0.1", port, path: "/b/k", headers: {} })

const tick = () => new Promise((resolve) => setImmediate(resolve))

/**
 * A sink that gathers the body in pages of `page` bytes as a fill does: chunks (bytes read with
 * the head) are copied in, the rest is lent to the native receive; each page's hash is recorded
 * as the receive reported it (undefined: it came at least partly through a chunk).
 */
const pagedSink = (page: number) => {
  const pages: Array<{ bytes: Uint8Array; sum: bigint | undefined }> = []
  let cur: Uint8Array | undefined
  let fill = 0
  let lent = 0
  const full = (sum: bigint | undefined) => {
    pages.push({ bytes: cur!, sum })
    cur = undefined
    fill = 0
  }
  const direct: DirectSink = {
    target: (max) => {
      cur ??= new Uint8Array(page)
      lent++
      return { bytes: cur, from: fill, to: fill + Math.min(page - fill, max), unit: fill + Math.min(page - fill, max) === page }
    },
    filled: (n, sum) => {
      fill += n
      if (fill === page) full(sum)
      return undefined
    }
  }
  const sink: BodySink = Object.assign(
    (chunk: Uint8Array) => {
      let at = 0
      while (at < chunk.length) {
        cur ??= new Uint8Array(page)
        const n = Math.min(page - fill, chunk.length - at)
        cur.set(chunk.subarray(at, at + n), fill)
        fill += n
        at += n
        if (fill === page) full(undefined)
      }
      return undefined
    },
    { direct }
  )
  const body = () => Buffer.concat([...pages.map((p) => p.bytes), cur?.subarray(0, fill) ?? new Uint8Array(0)])
  return { sink, pages, body, lent: () => lent }
}

const exchange = (receiver: Receiver, port: number, sink: BodySink, signal?: AbortSignal) =>
  Effect.promise(() =>
    receiver.exchange(get(port), (status) => (status === 200 || status === 206 ? sink : undefined), signal).then(
      (res) => ({ ok: true as const, status: res.status }),
      (failure: unknown) => ({ ok: false as const, failure })
    )
  )

describe.skipIf(loaded === undefined)("native receive", () => {
  it.live("a body split anywhere between the head's read and the native receive lands whole, each full page hashed", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const origin = yield* rawOrigin
        const receiver = yield* receiverOf()
        const wasm = yield* Effect.promise(() => xxhash())
        const before = addon.counters().receives
        let hashed = 0
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(
              fc.integer({ min: 1, max: 400_000 }),
              fc.integer({ min: 1, max: 100_000 }),
              fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 0, maxLength: 4 }),
              fc.constantFrom(4096, 65_536, 100_003),
              async (size, withHead, cuts, page) => {
                const body = randomBytes(size)
                const head = Buffer.from(`HTTP/1.1 206 Partial Content\r\ncontent-length: ${size}\r\n\r\n`)
                // Some body bytes ride with the head (JS copies them), the rest comes in later writes.
                const first = Math.min(size, withHead)
                const parts: Array<Buffer> = [Buffer.concat([head, body.subarray(0, first)])]
                let at = first
                for (const cut of cuts) {
                  const to = Math.min(size, at + cut * 97)
                  parts.push(body.subarray(at, to))
                  at = to
                }
                parts.push(body.subarray(at))
                origin.respond = (socket) =>
                  void (async () => {
                    for (const part of parts) {
                      if (part.length > 0) socket.write(part)
                      await tick()
                    }
                  })()
                const s = pagedSink(page)
                const got = await Effect.runPromise(exchange(receiver, origin.port, s.sink))
                expect(got.ok).toBe(true)
                expect(s.body().equals(body)).toBe(true)
                for (const p of s.pages) {
                  if (p.sum === undefined) continue
                  hashed++
                  expect(p.sum).toBe(wasm.h64Raw(p.bytes))
                }
              }
            ),
            { numRuns: 40 }
          )
        )
        // The bodies went natively (most runs have bytes beyond the head's read), on one kept-alive connection.
        expect(addon.counters().receives).toBeGreaterThan(before)
        expect(hashed).toBeGreaterThan(0)
        expect(origin.connections).toBe(1)
      })
    )
  )

  it.live("a reset, a short body or a stall during a native receive fails retryably after exactly the bytes that came", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const origin = yield* rawOrigin
        const receiver = yield* receiverOf(150)
        const body = randomBytes(300_000)
        const headAnd = (n: number) => Buffer.concat([Buffer.from(`HTTP/1.1 206 Partial Content\r\ncontent-length: ${body.length}\r\n\r\n`), body.subarray(0, n)])
        const outcomes: Record<string, string> = {}
        for (const how of ["reset", "close", "stall"] as const) {
          origin.respond = (socket) =>
            void (async () => {
              socket.write(headAnd(1000))
              await tick()
              socket.write(body.subarray(1000, 120_000), () => {
                if (how === "reset") socket.resetAndDestroy()
                else if (how === "close") socket.end()
              })
            })()
          const s = pagedSink(65_536)
          const got = yield* exchange(receiver, origin.port, s.sink)
          expect(got.ok).toBe(false)
          const received = s.body()
          expect(received.equals(body.subarray(0, received.length))).toBe(true)
          expect(received.length).toBeLessThanOrEqual(120_000)
          if (how !== "reset") expect(received.length).toBe(120_000)
          expect(s.lent()).toBeGreaterThan(0)
          outcomes[how] = (!got.ok && (got.failure as ReceiveError).code) || ""
        }
        expect(["ECONNRESET", "ERR_STREAM_PREMATURE_CLOSE"]).toContain(outcomes.reset)
        expect(outcomes.close).toBe("ERR_STREAM_PREMATURE_CLOSE")
        expect(outcomes.stall).toBe("ETIMEDOUT")
        expect(addon.counters().inFlight).toBe(0)
      })
    )
  )

  it.live("an abort during a native receive wakes it; the fd is closed only after it returned; the next exchange is right", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const origin = yield* rawOrigin
        const receiver = yield* receiverOf()
        const body = randomBytes(200_000)
        let stall = true
        let headSent: () => void = () => {}
        origin.respond = (socket) => {
          socket.write(Buffer.concat([Buffer.from(`HTTP/1.1 206 Partial Content\r\ncontent-length: ${body.length}\r\n\r\n`), body.subarray(0, 10)]))
          if (stall) headSent()
          else socket.write(body.subarray(10))
        }
        const controller = new AbortController()
        const sent = new Promise<void>((resolve) => (headSent = resolve))
        const s = pagedSink(65_536)
        const pending = Effect.runPromise(exchange(receiver, origin.port, s.sink, controller.signal))
        yield* Effect.promise(() => sent)
        // The head is parsed and the receive started once a page has been lent.
        while (s.lent() === 0) yield* Effect.promise(tick)
        expect(addon.counters().inFlight).toBe(1)
        controller.abort(new Error("the reader went away"))
        const aborted = yield* Effect.promise(() => pending)
        expect(!aborted.ok && (aborted.failure as Error).message).toBe("the reader went away")
        while (addon.counters().inFlight > 0) yield* Effect.promise(tick)
        stall = false
        const again = pagedSink(65_536)
        const got = yield* exchange(receiver, origin.port, again.sink)
        expect(got.ok).toBe(true)
        expect(again.body().equals(body)).toBe(true)
        expect(origin.connections).toBe(2)
      })
    )
  )
})
