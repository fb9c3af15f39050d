/**
 * Talon's write-through on the data port: `Put` (type 3) streams the object body that follows
 * its frame to the origin and `Delete` (type 5) removes the object there; both then take the
 * object's blocks out of this worker's cache and forget its version, so the next read asks the
 * origin which version is current and never serves the overwritten or deleted bytes.
 *
 * A Put is answered only once the origin has accepted the whole body, with a GetRange frame
 * whose body is the committed version (the origin's ETag); a Delete with an empty GetRange
 * frame. Errors are Talon's typed envelope in an ERROR-flagged GetRange frame, which Talon's
 * client reads (it decodes typed and plain bodies alike).
 *
 * The body is never held whole: the serve loop hands each read's share of it to a `BodySink`
 * (one copy out of the read buffer), which feeds the origin request with backpressure: past
 * its high-water mark the loop stops reading the connection until the origin has taken more.
 * A body cut short (the peer ends or drops the connection, or stalls past the read timeout)
 * aborts the origin request mid-body, and the origin keeps no partial object.
 */
import { Readable } from "node:stream"
import { Effect, Either, Runtime } from "effect"
import { type BackendStoreShape, uploadStream } from "../../backend/BackendStore.js"
import type { ObjectId } from "../../core/ids.js"
import { validateObjectId } from "../../core/objectId.js"
import {
  DataErrorCode,
  decodeDeleteRequest,
  decodePutRequest,
  encodeFrame,
  encodeTypedErrorFrame,
  MsgType
} from "../../protocol/index.js"
import { describeUnknown } from "../errors.js"
import type { ReadyState } from "../membership/Readiness.js"
import type { WorkerStats } from "../metrics.js"
import type { VersionCache } from "../miss/VersionCache.js"
import { objectKey } from "../miss/VersionCache.js"
import type { DiskStore } from "../store/DiskStore.js"
import type { Reply } from "./RequestHandler.js"

/** Bytes of a Put body buffered toward the origin before the connection stops being read. */
const UPLOAD_HIGH_WATER = 4 * 1024 * 1024

/** Where the serve loop sends the raw body bytes that follow a Put frame. */
export interface BodySink {
  /** Bytes of the body still to come. */
  readonly left: number
  /** Copies `b[start, end)` (at most `left` bytes) into the upload; false when the loop should stop reading until `onDrain`. */
  readonly write: (b: Buffer, start: number, end: number) => boolean
  /** Set by the serve loop: called when the upload wants more bytes. */
  onDrain: (() => void) | undefined
  /** The body will not be completed (connection ended, dropped or timed out): the upload is aborted. */
  readonly abort: (why: string) => void
}

/** A Put whose header was accepted: its body goes to `sink`, and `reply` settles once the origin answered. */
export interface PutStarted {
  readonly _tag: "PutStarted"
  readonly sink: BodySink
  readonly reply: Promise<Reply>
}

class Upload extends Readable implements BodySink {
  left: number
  received = 0
  aborted: string | undefined = undefined
  onDrain: (() => void) | undefined = undefined

  constructor(readonly length: number) {
    super({ highWaterMark: UPLOAD_HIGH_WATER })
    this.left = length
    if (length === 0) this.push(null)
  }

  override _read(): void {
    this.onDrain?.()
  }

  write(b: Buffer, start: number, end: number): boolean {
    const n = Math.min(end - start, this.left)
    if (n <= 0 || this.aborted !== undefined) return true
    // The read buffer is reused by the next read: the upload keeps a copy.
    const chunk = Buffer.allocUnsafe(n)
    b.copy(chunk, 0, start, start + n)
    this.left -= n
    this.received += n
    const more = this.push(chunk)
    if (this.left === 0) this.push(null)
    return more
  }

  abort(why: string): void {
    if (this.left === 0 || this.aborted !== undefined) return
    this.aborted = why
    this.destroy(new Error(why))
  }
}

export class Writes {
  constructor(
    private readonly backend: BackendStoreShape,
    private readonly versions: VersionCache,
    private readonly store: DiskStore | undefined,
    private readonly ready: ReadyState,
    private readonly stats: WorkerStats,
    private readonly maxPutBytes: number,
    private readonly runtime: Runtime.Runtime<never>
  ) {}

  /**
   * A Put frame's header at `body`. A refusal before the body (not ready, bad object, over the
   * size limit, malformed header) is a Reply that closes the connection: the raw body that
   * follows cannot be read as frames, and sending gigabytes only to discard them helps nobody.
   */
  put(requestId: number, body: Uint8Array): Reply | PutStarted {
    const decoded = decodePutRequest(body)
    if (Either.isLeft(decoded)) return this.refuse(requestId, `malformed Put header: ${decoded.left.message}`, true)
    const { object, bodyLen } = decoded.right
    const refusal = this.refusal(object)
    if (refusal !== undefined) return this.refuse(requestId, refusal.message, true, refusal.code)
    if (bodyLen > this.maxPutBytes) {
      return this.refuse(
        requestId,
        `Put body of ${bodyLen} bytes for ${uri(object)} is over this worker's limit of ${this.maxPutBytes} bytes (--max-put-size); nothing was written`,
        true
      )
    }
    const upload = new Upload(bodyLen)
    const reply = Runtime.runPromise(this.runtime)(
      Effect.either(uploadStream(this.backend, object, bodyLen, upload)).pipe(
        Effect.map((result): Reply => {
          if (upload.aborted !== undefined) {
            return this.error(
              requestId,
              `Put of ${uri(object)} ended after ${upload.received} of ${bodyLen} body bytes (${upload.aborted}); the origin kept nothing`,
              DataErrorCode.InvalidRequest
            )
          }
          if (Either.isLeft(result)) {
            upload.destroy()
            return this.error(requestId, `Put of ${uri(object)}: ${result.left.message}`, DataErrorCode.Origin)
          }
          this.forget(object)
          return { _tag: "Frame", bytes: encodeFrame(MsgType.GetRange, requestId, Buffer.from(result.right.version, "utf8")), closeAfter: false }
        })
      )
    ).catch((e: unknown) => this.error(requestId, `Put of ${uri(object)} failed: ${describeUnknown(e)}`, DataErrorCode.Internal))
    return { _tag: "PutStarted", sink: upload, reply }
  }

  /** A Delete frame: removed at the origin (already gone is success, as S3 answers), then dropped here. */
  async delete(requestId: number, body: Uint8Array): Promise<Reply> {
    const decoded = decodeDeleteRequest(body)
    if (Either.isLeft(decoded)) return this.error(requestId, `malformed Delete body: ${decoded.left.message}`, DataErrorCode.InvalidRequest)
    const object = decoded.right.object
    const refusal = this.refusal(object)
    if (refusal !== undefined) return this.error(requestId, refusal.message, refusal.code)
    const result = await Runtime.runPromise(this.runtime)(Effect.either(this.backend.delete(object)))
    if (Either.isLeft(result)) return this.error(requestId, `Delete of ${uri(object)}: ${result.left.message}`, DataErrorCode.Origin)
    this.forget(object)
    return { _tag: "Frame", bytes: encodeFrame(MsgType.GetRange, requestId, EMPTY), closeAfter: false }
  }

  /** After the origin changed the object: no block of it stays, and its version is asked again on the next read. */
  private forget(object: ObjectId): void {
    this.versions.invalidate(objectKey(object))
    this.store?.dropObject(object)
  }

  private refusal(object: ObjectId): { readonly message: string; readonly code: DataErrorCode } | undefined {
    if (this.maxPutBytes === 0) {
      return { message: "this worker does not write to the origin (--max-put-size 0): send Put and Delete to another worker", code: DataErrorCode.InvalidRequest }
    }
    if (!this.ready.ready) return { message: "worker is not ready", code: DataErrorCode.Unavailable }
    const checked = validateObjectId(object)
    return Either.isLeft(checked) ? { message: checked.left.message, code: DataErrorCode.InvalidRequest } : undefined
  }

  private refuse(requestId: number, message: string, closeAfter: boolean, code: DataErrorCode = DataErrorCode.InvalidRequest): Reply {
    this.stats.errors++
    return { _tag: "Frame", bytes: encodeTypedErrorFrame(requestId, code, message), closeAfter }
  }

  private error(requestId: number, message: string, code: DataErrorCode): Reply {
    return this.refuse(requestId, message, false, code)
  }
}

const EMPTY = new Uint8Array(0)

const uri = (o: ObjectId): string => `${o.backend === 2 ? "az" : o.backend === 1 ? "gs" : "s3"}://${o.bucket}/${o.objectPath}`
