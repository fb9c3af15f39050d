/**
 * cold-bench's readers: N readers draining a shared list of pieces, each piece read by one of
 * the arms' strategies (one HTTP GET; 8 MiB parts with k in flight as the aws CLI does;
 * TalonClient `readStream` or `read`), every chunk checked against the expected bytes as it
 * arrives (plan.ts RangeCheck). A wrong or missing byte fails the run.
 */
import * as http from "node:http"
import { performance } from "node:perf_hooks"
import { Data, Effect, Stream } from "effect"
import type { TalonClientShape } from "../../src/client/TalonClient.js"
import { MiB, parts, type Piece, RangeCheck } from "./plan.js"

export class ColdBenchFailed extends Data.TaggedError("ColdBenchFailed")<{ readonly message: string; readonly staleSocket?: boolean }> {}

/** Requests sent again because the kept-alive socket they went out on had already been closed by the server. */
export const staleSocketRetries = { count: 0 }

/** Called with the time (performance.now()) a reader's first byte arrived. */
export type OnFirstByte = () => void

export type ReadPiece = (piece: Piece, firstByte: OnFirstByte) => Effect.Effect<void, ColdBenchFailed>

/** One ranged GET of `path` at `base`, each chunk checked; interrupting it destroys the request. */
export const httpRange = (agent: http.Agent, base: URL, path: string, expected: Uint8Array, piece: Piece, firstByte: OnFirstByte): Effect.Effect<void, ColdBenchFailed> =>
  Effect.async<void, ColdBenchFailed>((resume) => {
    const check = new RangeCheck(expected, piece)
    const what = `GET ${base.origin}${path} bytes ${piece.offset}+${piece.length}`
    let settled = false
    const done = (error?: string, staleSocket = false) => {
      if (settled) return
      settled = true
      resume(error === undefined ? Effect.void : Effect.fail(new ColdBenchFailed({ message: `${what}: ${error}`, staleSocket })))
    }
    const req = http.request(
      {
        host: base.hostname,
        port: base.port,
        path,
        method: "GET",
        agent,
        headers: { range: `bytes=${piece.offset}-${piece.offset + piece.length - 1}` }
      },
      (res) => {
        if (res.statusCode !== 206) {
          const body: Array<Buffer> = []
          res.on("data", (c: Buffer) => body.length < 16 && body.push(c))
          res.on("end", () => done(`HTTP ${res.statusCode}: ${Buffer.concat(body).toString("utf8").slice(0, 300)}`))
          return
        }
        let first = true
        res.on("data", (chunk: Buffer) => {
          if (first) {
            first = false
            firstByte()
          }
          const bad = check.push(chunk)
          if (bad !== undefined) {
            req.destroy()
            done(bad)
          }
        })
        res.on("end", () => done(check.finish()))
        res.on("error", (e) => done(e.message))
        res.on("aborted", () => done(`response aborted after ${check.received} bytes`))
      }
    )
    // A kept-alive socket the server closed while idle, picked before its FIN was seen: nothing
    // was answered, so sending again is safe; every HTTP client with a pool does the same.
    req.on("error", (e) => done(e.message, req.reusedSocket && (e as NodeJS.ErrnoException).code === "ECONNRESET" && check.received === 0))
    req.end()
    return Effect.sync(() => req.destroy())
  }).pipe(
    Effect.tapError((e) => Effect.sync(() => e.staleSocket === true && staleSocketRetries.count++)),
    Effect.retry({ times: 2, while: (e) => e.staleSocket === true })
  )

/** A piece as one GET. */
export const oneGet = (agent: http.Agent, base: URL, path: string, expected: Uint8Array): ReadPiece => (piece, firstByte) =>
  httpRange(agent, base, path, expected, piece, firstByte)

/** A piece as parts of `part` bytes, `inFlight` GETs at a time (the aws CLI: 8 MiB parts, 10 concurrent). */
export const partedGet = (agent: http.Agent, base: URL, path: string, expected: Uint8Array, inFlight: number, part = 8 * MiB): ReadPiece => (piece, firstByte) =>
  Effect.forEach(parts(piece, part), (p) => httpRange(agent, base, path, expected, p, firstByte), { concurrency: inFlight, discard: true })

const clientFailure = (what: string) => (e: { readonly _tag: string; readonly message?: string }) =>
  new ColdBenchFailed({ message: `${what}: ${e._tag}${e.message ? `: ${e.message}` : ""}` })

/** A piece through TalonClient's `readStream` (the sequential reader's call). */
export const clientStream = (client: TalonClientShape, target: string, expected: Uint8Array): ReadPiece => (piece, firstByte) =>
  Effect.suspend(() => {
    const check = new RangeCheck(expected, piece)
    let first = true
    const what = `TalonClient.readStream ${target} ${piece.offset}+${piece.length}`
    return client.readStream(target, piece.offset, piece.length).pipe(
      Stream.mapError(clientFailure(what)),
      Stream.runForEach((chunk) => {
        if (first) {
          first = false
          firstByte()
        }
        const bad = check.push(chunk)
        return bad === undefined ? Effect.void : Effect.fail(new ColdBenchFailed({ message: `${what}: ${bad}` }))
      }),
      Effect.flatMap(() => {
        const short = check.finish()
        return short === undefined ? Effect.void : Effect.fail(new ColdBenchFailed({ message: `${what}: ${short}` }))
      })
    )
  })

/** A piece through TalonClient's `read` (one buffer; the random reader's call). */
export const clientRead = (client: TalonClientShape, target: string, expected: Uint8Array): ReadPiece => (piece, firstByte) =>
  client.read(target, piece.offset, piece.length).pipe(
    Effect.mapError(clientFailure(`TalonClient.read ${target} ${piece.offset}+${piece.length}`)),
    Effect.flatMap((bytes) => {
      firstByte()
      const check = new RangeCheck(expected, piece)
      const bad = check.push(bytes) ?? check.finish()
      return bad === undefined ? Effect.void : Effect.fail(new ColdBenchFailed({ message: `TalonClient.read ${target}: ${bad}` }))
    })
  )

/**
 * A piece through TalonClient's `readInto`, in calls of at most `call` bytes into one buffer the
 * reader reuses (a data loader's pattern: its batches live in memory it owns), so the reader
 * hands the GC no fresh memory per byte.
 */
export const clientInto = (client: TalonClientShape, target: string, expected: Uint8Array, call = 8 * MiB): ReadPiece => {
  const free: Array<Uint8Array> = []
  return (piece, firstByte) =>
    Effect.suspend(() => {
      const buf = free.pop() ?? new Uint8Array(call)
      const check = new RangeCheck(expected, piece)
      const what = `TalonClient.readInto ${target} ${piece.offset}+${piece.length}`
      let first = true
      return Effect.forEach(
        parts(piece, call),
        (p) =>
          client.readInto(target, p.offset, buf.subarray(0, p.length)).pipe(
            Effect.mapError(clientFailure(what)),
            Effect.flatMap((bytes) => {
              if (first) {
                first = false
                firstByte()
              }
              const bad = check.push(bytes)
              return bad === undefined ? Effect.void : Effect.fail(new ColdBenchFailed({ message: `${what}: ${bad}` }))
            })
          ),
        { discard: true }
      ).pipe(
        Effect.flatMap(() => {
          const short = check.finish()
          return short === undefined ? Effect.void : Effect.fail(new ColdBenchFailed({ message: `${what}: ${short}` }))
        }),
        Effect.ensuring(Effect.sync(() => free.push(buf)))
      )
    })
}

export interface ReadersOutcome {
  readonly seconds: number
  readonly bytes: number
  /** The slowest reader's first byte after the start, ms. */
  readonly firstByteMs: number
}

/** `readers` readers drain `pieces` in order, each taking the next piece when it finishes one. */
export const runReaders = (pieces: ReadonlyArray<Piece>, readers: number, read: ReadPiece): Effect.Effect<ReadersOutcome, ColdBenchFailed> =>
  Effect.suspend(() => {
    let next = 0
    const t0 = performance.now()
    const firsts: Array<number> = []
    const reader = (i: number) =>
      Effect.whileLoop({
        while: () => next < pieces.length,
        body: () => {
          const piece = pieces[next++]!
          return read(piece, () => {
            if (firsts[i] === undefined) firsts[i] = performance.now() - t0
          })
        },
        step: () => undefined
      })
    return Effect.forEach(Array.from({ length: readers }, (_, i) => i), reader, { concurrency: "unbounded", discard: true }).pipe(
      Effect.map(() => ({
        seconds: (performance.now() - t0) / 1000,
        bytes: pieces.reduce((n, p) => n + p.length, 0),
        firstByteMs: firsts.reduce((m, x) => Math.max(m, x ?? 0), 0)
      }))
    )
  })
