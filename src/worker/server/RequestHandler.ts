/**
 * One decoded request frame → one reply. What each message type gets is listed for clients in
 * docs/protocol-data-plane.md; in short: ranges of every kind (2, 6, 8-11) are answered with a
 * GetRange frame of exactly `len` bytes (offset+len past the object's end → "range out of
 * bounds"); 6 and 9 only from resident bytes (else CacheMiss), 10 and 11 from the version named
 * (filled under If-Match, else VersionMismatch), 2 and 8 from the current version. Control
 * frames carry StatObject, ListObjects and Load; AdmitCachedBlock (7) stores one whole block
 * whose raw body the serve loop reads after the frame (a bad header: typed InvalidRequest and
 * the connection closes); Put (a PutRequest, then its raw body outside the frame) and Delete
 * write through to the origin (Writes.ts), answered with a GetRange frame carrying the committed
 * version (Put) or nothing (Delete), or refused as "worker is read-only" where this process does
 * not write; Ping echoed.
 * With per-tenant rate limits on, every range read is charged to its tenant (8, 9, 11) or to the
 * unattributed tenant before it is served, and refused with Talon's typed `RateLimited`. Before
 * the worker is ready every request gets "worker is not ready". Errors of types 0-5 are UTF-8
 * messages in a frame of the request's type with the ERROR flag; errors of types 6-11 are
 * Talon's typed envelope (TLE1 + code + message) in a GetRange frame.
 */
import {
  DataErrorCode,
  decodeCachedRangeRequest,
  decodeControl,
  decodeTenantScopedCachedRange,
  decodeTenantScopedRange,
  decodeWith,
  decodeRangeRequest,
  encodeTypedErrorFrame,
  encodeTypedErrorPayload,
  Flags,
  msgTypeName,
  type CachedBlockPutRequest,
  type CachedRangeRequest,
  encodeControlFrame,
  encodeErrorFrame,
  encodeFrame,
  MsgType,
  readObjectId,
  formatLoadAck,
  type ControlMessage,
  type Frame
} from "../../protocol/index.js"
import type { ObjectId } from "../../core/ids.js"
import { Either } from "effect"
import { describeUnknown, ReadFailed } from "../errors.js"
import type { WorkerStats } from "../metrics.js"
import type { MissPathShape } from "../miss/MissPath.js"
import { objectKey } from "../miss/VersionCache.js"
import type { ReadyState } from "../membership/Readiness.js"
import type { ReadOutcome, ReadPathImpl } from "../ReadPath.js"
import type { AwaitBody, Reply } from "./Reply.js"
import type { HitPublisher } from "./HitPublisher.js"
import { Loads } from "./Loads.js"
import { ObjectIdCache } from "./ObjectIdCache.js"
import { admissionFor } from "./Admissions.js"
import { invalidObject, invalidTenant, tenantName } from "./requestChecks.js"
import { rateLimitedMessage, type TenantLimiter } from "../tenants/TenantLimiter.js"
import type { PutStarted, Writes } from "./Writes.js"

export type { AwaitBody, Reply } from "./Reply.js"

const EMPTY = new Uint8Array(0)

export class RequestHandler {
  /** Recently seen ObjectIds by their wire bytes (the hit path skips decoding them). */
  private readonly ids = new ObjectIdCache()
  /** The same for GetCachedRange and GetPinnedRange bodies (one layout): ObjectId and version bytes. */
  private readonly pinnedIds = new ObjectIdCache()
  /** Publishes served hits to the plane's hit table, when the plane has one. */
  hits: HitPublisher | undefined = undefined
  /** Control `Load`s: fills through the read path's geometry and the miss path, a bounded number at once. */
  readonly loads: Loads
  /** Per-tenant rate limits, when the worker has them on. */
  limiter: TenantLimiter | undefined = undefined
  /** Put and Delete through to the origin, when this process writes. */
  writes: Writes | undefined = undefined
  /** Stores an admitted block (Admissions.ts), where this process owns a block store. */
  admitter: ((r: CachedBlockPutRequest, body: Uint8Array) => Promise<void>) | undefined = undefined
  /** Answers a data-port ListObjects (Listing.ts), where this process holds the origin's client. */
  lister: ((prefix: string) => Promise<ControlMessage>) | undefined = undefined

  constructor(
    private readonly reader: ReadPathImpl,
    private readonly miss: MissPathShape,
    private readonly ready: ReadyState,
    private readonly stats: WorkerStats
  ) {
    this.loads = new Loads(reader, miss)
  }

  handle(frame: Frame): Reply | Promise<Reply> {
    const started = performance.now()
    return this.timed(started, this.answer(frame))
  }

  private answer(frame: Frame): Reply | Promise<Reply> {
    const reply = this.dispatch(frame)
    if (!(reply instanceof Promise)) return reply
    // A reply promise must always settle with a reply, or the connection's reply order would stall.
    const { type, requestId } = frame.header
    return reply.catch((e: unknown) => this.error(type, requestId, `internal error: ${describeUnknown(e)}`, DataErrorCode.Internal))
  }

  /** Records the request's latency once its reply is ready (talon_worker_request_duration_seconds). */
  private timed(started: number, reply: Reply | Promise<Reply>): Reply | Promise<Reply> {
    if (!(reply instanceof Promise)) {
      this.stats.requestLatency.observe((performance.now() - started) / 1000)
      return reply
    }
    return reply.then((r) => {
      this.stats.requestLatency.observe((performance.now() - started) / 1000)
      return r
    })
  }

  /**
   * One frame read in place: type and id from its header, body at `buf[start, end)`. `buf` is
   * the serve loop's read buffer and is overwritten by the next read, so nothing may keep the
   * body: a GetRange (or GetCachedRange) of a known object and version is answered from it
   * directly (the hit path allocates no frame, header or payload view); those two types are
   * otherwise decoded before this returns, and every other type gets a copy.
   */
  handleAt(type: number, requestId: number, buf: Buffer, start: number, end: number): Reply | Promise<Reply> | AwaitBody {
    if (type === MsgType.AdmitCachedBlock) return this.admission(requestId, buf.subarray(start, end))
    const started = performance.now()
    return this.timed(started, this.answerAt(type, requestId, buf, start, end))
  }

  private answerAt(type: number, requestId: number, buf: Buffer, start: number, end: number): Reply | Promise<Reply> {
    if (type === MsgType.GetRange && this.ready.ready) {
      const known = this.ids.matchAt(buf, start, end)
      if (known !== undefined && known.problem === undefined) {
        if (this.limiter !== undefined) {
          const wait = this.limiter.admit(undefined, this.ids.len)
          if (wait > 0) return this.limited(requestId, wait)
        }
        const outcome = this.reader.read(known.object, this.ids.offset, this.ids.len, known.key)
        if (!(outcome instanceof Promise)) {
          if (this.hits !== undefined && outcome._tag === "RangeReply") this.hits.offer(known, outcome)
          return this.fromOutcome(type, requestId, outcome)
        }
        return outcome.then(
          (o) => this.fromOutcome(type, requestId, o),
          (e: unknown) => this.error(type, requestId, `internal error: ${describeUnknown(e)}`)
        )
      }
    }
    if ((type === MsgType.GetPinnedRange || type === MsgType.GetCachedRange) && this.ready.ready) {
      const known = this.pinnedIds.matchAt(buf, start, end)
      if (known !== undefined && known.problem === undefined && known.version !== undefined) {
        if (this.limiter !== undefined) {
          const wait = this.limiter.admit(undefined, this.pinnedIds.len)
          if (wait > 0) return this.limited(requestId, wait)
        }
        const { offset, len } = this.pinnedIds
        const outcome =
          type === MsgType.GetPinnedRange
            ? this.reader.readVersion(known.object, known.version, offset, len, known.key)
            : this.reader.readCached(known.object, known.version, offset, len, known.key)
        if (!(outcome instanceof Promise) && this.hits !== undefined && outcome._tag === "RangeReply") this.hits.offer(known, outcome)
        return this.range(type, requestId, outcome)
      }
    }
    const view = buf.subarray(start, end)
    // GetRange, GetCachedRange and GetPinnedRange bodies are decoded before this returns (remember() copies what it keeps).
    const payload = type === MsgType.GetRange || type === MsgType.GetCachedRange || type === MsgType.GetPinnedRange ? view : Buffer.from(view)
    return this.answer({ header: { type: type as MsgType, flags: 0, requestId, length: end - start }, payload })
  }

  /** A Put frame's header at `buf[start, end)`: its body, which follows on the stream, goes to the returned sink. */
  handlePut(requestId: number, buf: Buffer, start: number, end: number): Reply | PutStarted {
    if (this.writes === undefined) {
      this.stats.errors++
      return {
        _tag: "Frame",
        bytes: encodeErrorFrame(MsgType.Put, requestId, "worker is read-only: Put is not supported on the data plane"),
        closeAfter: true
      }
    }
    return this.writes.put(requestId, buf.subarray(start, end))
  }

  private dispatch(frame: Frame): Reply | Promise<Reply> {
    const { type, requestId } = frame.header
    switch (type) {
      case MsgType.Ping:
        this.stats.pings++
        return this.frame(encodeFrame(MsgType.Ping, requestId, EMPTY))
      case MsgType.GetRange: {
        if (!this.ready.ready) return this.error(type, requestId, "worker is not ready")
        const known = this.ids.match(frame.payload)
        if (known !== undefined) {
          if (known.problem !== undefined) return this.error(type, requestId, known.problem)
          const wait = this.limiter?.admit(undefined, this.ids.len) ?? 0
          if (wait > 0) return this.limited(requestId, wait)
          return this.range(type, requestId, this.reader.read(known.object, this.ids.offset, this.ids.len, known.key))
        }
        const req = decodeRangeRequest(frame.payload)
        if (Either.isLeft(req)) return this.error(type, requestId, `malformed GetRange body: ${req.left.message}`)
        const { object, offset, len } = req.right
        const bad = invalidObject(object)
        const key = objectKey(object)
        this.ids.remember(frame.payload, object, key, bad)
        if (bad !== undefined) return this.error(type, requestId, bad)
        const wait = this.limiter?.admit(undefined, len) ?? 0
        if (wait > 0) return this.limited(requestId, wait)
        return this.range(type, requestId, this.reader.read(object, offset, len, key))
      }
      case MsgType.Get: {
        if (!this.ready.ready) return this.error(type, requestId, "worker is not ready")
        const decoded = decodeWith(frame.payload, "Get body (ObjectId)", readObjectId)
        if (Either.isLeft(decoded)) return this.error(type, requestId, `malformed Get body: ${decoded.left.message}`)
        const object = decoded.right
        const bad = invalidObject(object)
        if (bad !== undefined) return this.error(type, requestId, bad)
        return this.whole(type, requestId, object)
      }
      case MsgType.GetCachedRange:
      case MsgType.GetCachedRangeTenant:
      case MsgType.GetPinnedRange:
      case MsgType.GetPinnedRangeTenant:
        return this.cached(type, requestId, frame.payload)
      case MsgType.GetRangeTenant: {
        if (!this.ready.ready) return this.error(type, requestId, "worker is not ready", DataErrorCode.Unavailable)
        const scoped = decodeTenantScopedRange(frame.payload)
        if (Either.isLeft(scoped)) return this.error(type, requestId, `malformed GetRangeTenant body: ${scoped.left.message}`)
        const bad = invalidTenant(scoped.right.tenant) ?? invalidObject(scoped.right.request.object)
        if (bad !== undefined) return this.error(type, requestId, bad)
        const { object, offset, len } = scoped.right.request
        const wait = this.limiter?.admit(tenantName(scoped.right.tenant), len) ?? 0
        if (wait > 0) return this.limited(requestId, wait)
        return this.range(type, requestId, this.reader.read(object, offset, len))
      }
      case MsgType.AdmitCachedBlock:
        // Only the serve loop (handleAt) can read the raw body that follows; a frame alone cannot be admitted.
        this.stats.errors++
        return { _tag: "Frame", bytes: encodeTypedErrorFrame(requestId, DataErrorCode.InvalidRequest, "AdmitCachedBlock needs its raw block body after the frame"), closeAfter: true }
      case MsgType.Control:
        return this.control(requestId, frame.payload)
      case MsgType.Put:
        this.stats.errors++
        return {
          _tag: "Frame",
          bytes: encodeErrorFrame(type, requestId, "worker is read-only: Put is not supported on the data plane"),
          closeAfter: true
        }
      case MsgType.Delete:
        if (this.writes !== undefined) return this.writes.delete(requestId, frame.payload)
        return this.error(type, requestId, "worker is read-only: Delete is not supported on the data plane")
      default:
        return this.error(type, requestId, `message type ${type} is not served by a worker`)
    }
  }

  private admission(requestId: number, header: Uint8Array): Reply | AwaitBody {
    return admissionFor(requestId, header, {
      ready: this.ready.ready,
      admit: this.admitter,
      blockSize: this.reader.geometry.blockSize,
      refused: () => this.stats.errors++
    })
  }

  /** Returns what a reply holds (pinned blocks); call once the reply is sent, failed or dropped. */
  done(reply: Reply): void {
    if (reply._tag === "File") this.reader.release(reply.range)
  }

  private frame(bytes: Uint8Array): Reply {
    return { _tag: "Frame", bytes, closeAfter: false }
  }

  /** A legacy UTF-8 error for types 0-5; Talon's typed error (code, default InvalidRequest) for 6-9. */
  private error(type: MsgType, requestId: number, message: string, code: DataErrorCode = DataErrorCode.InvalidRequest): Reply {
    this.stats.errors++
    const bytes = type >= MsgType.GetCachedRange ? encodeTypedErrorFrame(requestId, code, message) : encodeErrorFrame(type, requestId, message)
    return { _tag: "Frame", bytes, closeAfter: false }
  }

  /**
   * Talon's refusal: a typed RateLimited error naming the meter and when to retry (not a request
   * error). Range reads get it in a GetRange frame as Talon sends it; a Get in a frame of its own type.
   */
  private limited(requestId: number, waitMs: number, type: MsgType = MsgType.GetRange): Reply {
    const message = rateLimitedMessage(this.limiter!.lastMetric, waitMs)
    const bytes =
      type === MsgType.Get
        ? encodeFrame(type, requestId, encodeTypedErrorPayload(DataErrorCode.RateLimited, message), Flags.Error)
        : encodeTypedErrorFrame(requestId, DataErrorCode.RateLimited, message)
    return { _tag: "Frame", bytes, closeAfter: false }
  }

  /** Types 6 and 9 (cache-only, `readCached`) and 10 and 11 (pinned, `readVersion`): one body layout per tenant-ness. */
  private cached(type: MsgType, requestId: number, payload: Uint8Array): Reply | Promise<Reply> {
    if (!this.ready.ready) return this.error(type, requestId, "worker is not ready", DataErrorCode.Unavailable)
    let req: CachedRangeRequest
    let tenant: string | undefined
    const cacheOnly = type === MsgType.GetCachedRange || type === MsgType.GetCachedRangeTenant
    const read = (r: CachedRangeRequest, key?: string) =>
      cacheOnly ? this.reader.readCached(r.object, r.version, r.offset, r.len, key) : this.reader.readVersion(r.object, r.version, r.offset, r.len, key)
    if (type === MsgType.GetCachedRange || type === MsgType.GetPinnedRange) {
      const d = decodeCachedRangeRequest(payload)
      if (Either.isLeft(d)) return this.error(type, requestId, `malformed ${msgTypeName(type)} body: ${d.left.message}`)
      req = d.right
      const key = objectKey(req.object)
      const bad = invalidObject(req.object)
      this.pinnedIds.remember(payload, req.object, key, bad, req.version)
      if (bad !== undefined) return this.error(type, requestId, bad)
      const wait = this.limiter?.admit(undefined, req.len) ?? 0
      if (wait > 0) return this.limited(requestId, wait)
      return this.range(type, requestId, read(req, key))
    } else {
      const d = decodeTenantScopedCachedRange(payload)
      if (Either.isLeft(d)) return this.error(type, requestId, `malformed ${msgTypeName(type)} body: ${d.left.message}`)
      const bad = invalidTenant(d.right.tenant)
      if (bad !== undefined) return this.error(type, requestId, bad)
      req = d.right.request
      tenant = tenantName(d.right.tenant)
    }
    const bad = invalidObject(req.object)
    if (bad !== undefined) return this.error(type, requestId, bad)
    const wait = this.limiter?.admit(tenant, req.len) ?? 0
    if (wait > 0) return this.limited(requestId, wait)
    return this.range(type, requestId, read(req))
  }

  private range(type: MsgType, requestId: number, outcome: ReadOutcome | Promise<ReadOutcome>): Reply | Promise<Reply> {
    if (outcome instanceof Promise) return outcome.then((o) => this.fromOutcome(type, requestId, o))
    return this.fromOutcome(type, requestId, outcome)
  }

  private fromOutcome(type: MsgType, requestId: number, o: ReadOutcome): Reply {
    if (o._tag === "ReadFailed") return this.error(type, requestId, o.reason, o.code ?? DataErrorCode.Internal)
    // Every kind of range request is answered with a GetRange frame (as Talon's worker does).
    const replyType = type >= MsgType.GetCachedRange ? MsgType.GetRange : type
    return { _tag: "File", type: replyType, requestId, segments: o.segments, range: o }
  }

  private async whole(type: MsgType, requestId: number, object: ObjectId): Promise<Reply> {
    try {
      const st = await this.miss.stat(object, objectKey(object))
      const wait = this.limiter?.admit(undefined, st.size) ?? 0
      if (wait > 0) return this.limited(requestId, wait, type)
      return this.fromOutcome(type, requestId, await this.reader.read(object, 0, st.size))
    } catch (e) {
      return this.error(type, requestId, e instanceof ReadFailed ? e.reason : describeUnknown(e))
    }
  }

  private async control(requestId: number, payload: Uint8Array): Promise<Reply> {
    const decoded = decodeControl(payload)
    if (Either.isLeft(decoded)) {
      return this.ack(requestId, `bad control message: ${decoded.left.message}`)
    }
    const message = decoded.right.message
    if (message._tag === "Load") return this.load(requestId, message)
    if (message._tag === "ListObjects") return this.list(requestId, message.prefix)
    if (message._tag !== "StatObject") {
      return this.ack(requestId, `a worker answers only StatObject, ListObjects and Load on the data plane, got ${message._tag}`)
    }
    const bad = invalidObject(message.object)
    if (bad !== undefined) return this.ack(requestId, bad)
    try {
      const st = await this.miss.stat(message.object, objectKey(message.object))
      const reply: ControlMessage = { _tag: "ObjectStat", size: st.size, version: st.version }
      return this.frame(encodeControlFrame(requestId, reply))
    } catch (e) {
      return this.ack(requestId, e instanceof ReadFailed ? e.reason : describeUnknown(e))
    }
  }

  private async list(requestId: number, prefix: string): Promise<Reply> {
    if (!this.ready.ready) return this.ack(requestId, "worker is not ready")
    if (this.lister === undefined) return this.ack(requestId, "this serving process cannot list the origin; ask the worker's primary port or a coordinator")
    const reply = await this.lister(prefix)
    if (reply._tag === "Ack" && !reply.ok) this.stats.errors++
    return this.frame(encodeControlFrame(requestId, reply))
  }

  private async load(requestId: number, message: ControlMessage & { readonly _tag: "Load" }): Promise<Reply> {
    if (!this.ready.ready) return this.ack(requestId, "worker is not ready")
    const bad = invalidObject(message.object)
    if (bad !== undefined) return this.ack(requestId, bad)
    try {
      const counts = await this.loads.load(message.object, message.offset, message.len)
      return this.frame(encodeControlFrame(requestId, { _tag: "Ack", ok: true, detail: formatLoadAck(counts) }))
    } catch (e) {
      return this.ack(requestId, e instanceof ReadFailed ? e.reason : describeUnknown(e))
    }
  }

  private ack(requestId: number, detail: string): Reply {
    this.stats.errors++
    return this.frame(encodeControlFrame(requestId, { _tag: "Ack", ok: false, detail }))
  }
}
