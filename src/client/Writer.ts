/**
 * Writes through a Talon cluster: `put` streams a whole object to a worker over Talon's Put
 * (a PutRequest frame, then the raw bytes) and the worker writes it through to the origin;
 * `delete` sends Talon's Delete. Both go to the first live owner of the object's first block
 * (placement with no version, so every client picks the same worker for a name whatever its
 * version), on a connection of their own: a body of gigabytes never queues reads behind it.
 *
 * The body is streamed, never held whole. Its length is declared up front, so the last piece
 * is sent only once the source has proved it ends exactly there: a source that turns out
 * shorter or longer than declared makes the client drop the connection before the worker has
 * the whole body, and the worker then aborts the upload (the origin keeps nothing).
 *
 * `admit` (Talon's AdmitCachedBlock) rides the same one-shot exchange: a block header, the raw
 * block, one reply.
 *
 * A put or delete is sent once: after its first byte reaches a worker the outcome is
 * ambiguous, so only a worker that cannot be connected to is skipped for the next owner.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import { Data, Effect, Either } from "effect"
import type { BlockId, ObjectId } from "../core/ids.js"
import { objectIdToUri } from "../core/objectId.js"
import {
  DataErrorCode,
  dataErrorCodeName,
  decodeErrorPayload,
  encodeAdmitCachedBlockHeader,
  encodeDeleteFrame,
  encodePutFrame,
  Flags,
  FrameDecoder,
  MsgType,
  RESPONSE_CAPS
} from "../protocol/index.js"
import { ClientConfig } from "./ClientConfig.js"
import { InvalidRequest, NoWorkers, type TalonClientError } from "./errors.js"
import { MembershipCache } from "./MembershipCache.js"
import { StatCache } from "./StatCache.js"
import { type ObjectTarget, parseTarget } from "./target.js"
import { ZoneAffinity } from "./zones.js"

/** What a put sends: bytes, a file (read as it is sent), or a stream of exactly `length` bytes. */
export type PutBody =
  | Uint8Array
  | { readonly file: string }
  | { readonly stream: AsyncIterable<Uint8Array>; readonly length: number }

export interface PutResult {
  /** The version the origin committed (its ETag): reads of the object see it from now on. */
  readonly version: string
  readonly size: number
}

/** A worker or the origin refused a put or delete, or the body did not match its declared length. */
export class WriteFailed extends Data.TaggedError("WriteFailed")<{
  readonly object: string
  readonly operation: "put" | "delete" | "admit"
  /** The worker that answered, when one did. */
  readonly address?: string | undefined
  /** Talon's error code when the worker sent one. */
  readonly code?: DataErrorCode | undefined
  readonly detail: string
}> {
  override get message() {
    const who = this.address === undefined ? "" : ` (worker ${this.address}${this.code === undefined ? "" : `, ${dataErrorCodeName(this.code)}`})`
    return `${this.operation} ${this.object} failed${who}: ${this.detail}`
  }
}

/** Connecting failed: the next owner may be tried, nothing was sent. */
class Unreachable extends Error {}

interface Outcome {
  readonly ok: boolean
  readonly body: Buffer
  readonly code?: DataErrorCode
}

const SEND_PIECE = 1024 * 1024

export class Writer extends Effect.Service<Writer>()("talon/client/Writer", {
  effect: Effect.gen(function* () {
    const options = yield* ClientConfig
    const membership = yield* MembershipCache
    const stats = yield* StatCache
    const zones = yield* ZoneAffinity

    /** Owners of the object's first block, in placement order. */
    const owners = (object: ObjectId) =>
      Effect.map(membership.get(false), (m) => {
        const block: BlockId = { object, offset: 0, blockSize: options.blockSize, version: "" }
        return m.placement.rank(block, Math.max(options.replicas, 1)).map((id) => m.addresses.get(id) ?? id)
      })

    const exchange = (
      object: ObjectId,
      operation: "put" | "delete" | "admit",
      send: (socket: net.Socket, signal: AbortSignal) => Promise<void>,
      to: Effect.Effect<ReadonlyArray<string>, TalonClientError> = owners(object)
    ): Effect.Effect<Buffer, TalonClientError | WriteFailed> =>
      Effect.gen(function* () {
        const uri = objectIdToUri(object)
        const addresses = yield* to
        if (addresses.length === 0) return yield* Effect.fail(new NoWorkers({ coordinator: options.coordinator }))
        const tried: Array<string> = []
        for (const address of addresses) {
          const result = yield* Effect.either(
            Effect.tryPromise({
              try: (signal) => roundTrip(address, options.connectTimeoutMs, options.requestTimeoutMs, signal, send),
              catch: (e) => e
            })
          )
          if (Either.isRight(result)) {
            const outcome = result.right
            if (outcome.ok) return outcome.body
            const error = decodeErrorPayload(outcome.body)
            return yield* Effect.fail(new WriteFailed({ object: uri, operation, address, code: error.code, detail: error.message }))
          }
          const e = result.left
          if (e instanceof Unreachable) {
            tried.push(`${address}: ${e.message}`)
            continue
          }
          return yield* Effect.fail(
            new WriteFailed({ object: uri, operation, address, detail: e instanceof Error ? e.message : String(e) })
          )
        }
        return yield* Effect.fail(new WriteFailed({ object: uri, operation, detail: `no owner could be reached (${tried.join("; ")})` }))
      })

    const put = (target: ObjectTarget, body: PutBody): Effect.Effect<PutResult, TalonClientError | WriteFailed> =>
      Effect.gen(function* () {
        const object = yield* parseTarget(target)
        const source = yield* sourceOf(body)
        const reply = yield* exchange(object, "put", async (socket, signal) => {
          await write(socket, encodePutFrame(1, { object, bodyLen: source.length }))
          await sendBody(socket, source, signal)
        }).pipe(Effect.ensuring(Effect.sync(() => stats.forget(object))))
        return { version: reply.toString("utf8"), size: source.length }
      })

    const remove = (target: ObjectTarget): Effect.Effect<void, TalonClientError | WriteFailed> =>
      Effect.gen(function* () {
        const object = yield* parseTarget(target)
        yield* exchange(object, "delete", (socket) => write(socket, encodeDeleteFrame(1, { object }))).pipe(
          Effect.ensuring(Effect.sync(() => stats.forget(object)))
        )
      })

    /**
     * Talon's AdmitCachedBlock: block `blockIndex` of `version`, whole, to the first owner that
     * can be connected to, in the order reads try them (in-zone first), like Talon's client,
     * which admits to the primary only. An admission seeds the cache, it is not a copy for
     * durability: one owner holding the block serves every read and readCached, which ask
     * each owner in turn. A refusal (wrong length or geometry) would be the same on any
     * owner, so it fails at once with the worker's code.
     */
    const admit = (
      target: ObjectTarget,
      blockIndex: number,
      version: string,
      bytes: Uint8Array,
      objectSize: number
    ): Effect.Effect<void, TalonClientError | WriteFailed> =>
      Effect.gen(function* () {
        const object = yield* parseTarget(target)
        const bs = options.blockSize
        if (!Number.isSafeInteger(blockIndex) || blockIndex < 0 || !Number.isSafeInteger(objectSize) || objectSize < 0) {
          return yield* new InvalidRequest({ detail: `blockIndex and objectSize must be non-negative integers (got ${blockIndex}, ${objectSize})` })
        }
        if (version.length === 0) return yield* new InvalidRequest({ detail: "an admission needs the version (ETag) its bytes are of" })
        const offset = blockIndex * bs
        const want = Math.min(bs, objectSize - offset)
        if (want <= 0 || bytes.length !== want) {
          return yield* new InvalidRequest({
            detail: want <= 0
              ? `block ${blockIndex} starts at ${offset}, past the end of a ${objectSize}-byte object`
              : `block ${blockIndex} of a ${objectSize}-byte object is ${want} bytes with ${bs}-byte blocks, got ${bytes.length}`
          })
        }
        const block: BlockId = { object, offset, blockSize: bs, version }
        const to = Effect.map(membership.get(false), (m) =>
          zones.order(m.placement.rank(block, Math.max(options.replicas, 1)), (id) => m.zones.get(id)).map((id) => m.addresses.get(id) ?? id)
        )
        yield* exchange(
          object,
          "admit",
          async (socket) => {
            await write(socket, encodeAdmitCachedBlockHeader(1, { block, objectLen: objectSize, bodyLen: bytes.length }))
            await write(socket, bytes)
          },
          to
        )
      })

    return { put, delete: remove, admit }
  })
}) {}

interface Source {
  readonly length: number
  readonly open: () => AsyncIterable<Uint8Array>
}

const sourceOf = (body: PutBody): Effect.Effect<Source, InvalidRequest> => {
  if (body instanceof Uint8Array) {
    return Effect.succeed({
      length: body.length,
      open: async function* () {
        for (let at = 0; at < body.length; at += SEND_PIECE) yield body.subarray(at, at + SEND_PIECE)
      }
    })
  }
  if ("file" in body) {
    return Effect.tryPromise({
      try: () => fs.promises.stat(body.file),
      catch: (e) => new InvalidRequest({ detail: `cannot read ${body.file}: ${e instanceof Error ? e.message : String(e)}` })
    }).pipe(
      Effect.flatMap((st) =>
        st.isFile()
          ? Effect.succeed({ length: st.size, open: () => fs.createReadStream(body.file, { highWaterMark: SEND_PIECE }) })
          : Effect.fail(new InvalidRequest({ detail: `${body.file} is not a regular file` }))
      )
    )
  }
  if (!Number.isSafeInteger(body.length) || body.length < 0) {
    return Effect.fail(new InvalidRequest({ detail: `a streamed put needs its length as a non-negative integer, got ${body.length}` }))
  }
  return Effect.succeed({ length: body.length, open: () => body.stream })
}

const write = (socket: net.Socket, bytes: Uint8Array): Promise<void> =>
  new Promise((resolve, reject) => {
    socket.write(bytes, (e) => (e ? reject(e) : resolve()))
  })

/**
 * Sends exactly `source.length` bytes, holding back the last piece until the source has ended,
 * so a source of another length never delivers a whole body: the caller's error destroys the
 * connection first.
 */
const sendBody = async (socket: net.Socket, source: Source, signal: AbortSignal): Promise<void> => {
  let sent = 0
  let pending: Uint8Array | undefined
  for await (const chunk of source.open()) {
    if (signal.aborted) throw new Error("interrupted")
    if (chunk.length === 0) continue
    if (sent + (pending?.length ?? 0) + chunk.length > source.length) {
      throw new Error(`the body is longer than the ${source.length} bytes declared; nothing was written`)
    }
    if (pending !== undefined) {
      sent += pending.length
      if (!socket.write(pending)) await drained(socket)
    }
    pending = chunk
  }
  const total = sent + (pending?.length ?? 0)
  if (total !== source.length) throw new Error(`the body ended after ${total} of the ${source.length} bytes declared; nothing was written`)
  if (pending !== undefined) await write(socket, pending)
}

const drained = (socket: net.Socket): Promise<void> =>
  new Promise((resolve, reject) => {
    const done = (e?: Error) => {
      socket.off("drain", onDrain)
      socket.off("close", onClose)
      if (e) reject(e)
      else resolve()
    }
    const onDrain = () => done()
    const onClose = () => done(new Error("the worker closed the connection mid-body"))
    socket.once("drain", onDrain)
    socket.once("close", onClose)
  })

/** One request on a fresh connection: connect, `send`, then the one reply frame. Rejects with Unreachable when no connection was made. */
const roundTrip = (
  address: string,
  connectMs: number,
  replyMs: number,
  signal: AbortSignal,
  send: (socket: net.Socket, signal: AbortSignal) => Promise<void>
): Promise<Outcome> =>
  new Promise<Outcome>((resolve, reject) => {
    const sep = address.lastIndexOf(":")
    const host = address.slice(0, sep).replace(/^\[|\]$/g, "")
    const socket = net.connect({ host, port: Number(address.slice(sep + 1)) })
    const decoder = new FrameDecoder(RESPONSE_CAPS)
    let connected = false
    let settled = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const finish = (f: () => void) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      signal.removeEventListener("abort", onAbort)
      socket.destroy()
      f()
    }
    const onAbort = () => finish(() => reject(new Error("interrupted")))
    signal.addEventListener("abort", onAbort)
    timer = setTimeout(() => finish(() => reject(new Unreachable(`no connection within ${connectMs} ms`))), connectMs)
    socket.once("connect", () => {
      connected = true
      clearTimeout(timer)
      send(socket, signal).then(
        () => {
          if (settled) return
          timer = setTimeout(() => finish(() => reject(new Error(`no reply within ${replyMs} ms of the last byte`))), replyMs)
        },
        (e: unknown) => finish(() => reject(e instanceof Error ? e : new Error(String(e))))
      )
    })
    socket.on("data", (chunk: Buffer) => {
      decoder.push(chunk)
      const f = decoder.next()
      if (f === undefined) return
      if ("_tag" in f) return finish(() => reject(new Error(`unreadable reply from the worker: ${f.message}`)))
      if (f.header.type !== MsgType.GetRange) {
        // A worker that refuses writes answers in the request's own type.
        const text = f.payload.toString("utf8")
        return finish(() => resolve({ ok: false, body: Buffer.from(text), code: DataErrorCode.InvalidRequest }))
      }
      finish(() => resolve({ ok: (f.header.flags & Flags.Error) === 0, body: f.payload }))
    })
    socket.on("error", (e) => finish(() => reject(connected ? e : new Unreachable(e.message))))
    socket.on("close", () => finish(() => reject(new Error("the worker closed the connection before replying"))))
  })
