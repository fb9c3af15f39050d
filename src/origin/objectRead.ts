/** GET/HEAD of one object, with conditions and a single range, streamed with backpressure. */
import { pipeline } from "node:stream"
import { evaluateConditions, ifRangeHolds } from "./conditions.js"
import { header, sendEmpty, type Ctx } from "./context.js"
import { Meter } from "./faults.js"
import { contentRange, parseRange } from "./ranges.js"
import type { OpenObject } from "./store.js"

export type ReadFailure = "precondition-failed" | "unsatisfiable" | "multiple-ranges"

export interface ReadDialect {
  /** Provider-specific headers on every successful read (blob type, storage class, …). */
  readonly objectHeaders: (obj: OpenObject) => Record<string, string>
  readonly fail: (ctx: Ctx, failure: ReadFailure, obj: OpenObject, range: string | undefined) => void
}

const READ_CHUNK = 64 * 1024

export const serveObject = async (
  ctx: Ctx,
  obj: OpenObject,
  rangeHeader: string | undefined,
  dialect: ReadDialect
): Promise<void> => {
  const close = () => obj.handle.close().catch(() => undefined)
  const lastModified = obj.lastModified.getTime()
  const validators = { ETag: obj.etag, "Last-Modified": obj.lastModified.toUTCString() }
  const outcome = evaluateConditions(
    {
      ifMatch: header(ctx, "if-match"),
      ifNoneMatch: header(ctx, "if-none-match"),
      ifModifiedSince: header(ctx, "if-modified-since"),
      ifUnmodifiedSince: header(ctx, "if-unmodified-since")
    },
    obj.etag,
    lastModified,
    true
  )
  if (outcome !== "proceed") {
    await close()
    if (outcome === "not-modified") sendEmpty(ctx, 304, { ...validators, ...dialect.objectHeaders(obj) })
    else dialect.fail(ctx, "precondition-failed", obj, rangeHeader)
    return
  }

  let range = parseRange(rangeHeader, obj.size)
  if (range._tag !== "Full" && !ifRangeHolds(header(ctx, "if-range"), obj.etag, lastModified)) range = { _tag: "Full" }
  if (range._tag === "Multiple" || range._tag === "Unsatisfiable") {
    await close()
    dialect.fail(ctx, range._tag === "Multiple" ? "multiple-ranges" : "unsatisfiable", obj, rangeHeader)
    return
  }

  const start = range._tag === "Partial" ? range.start : 0
  const end = range._tag === "Partial" ? range.end : obj.size - 1
  const length = end - start + 1
  const headers: Record<string, string | number> = {
    ...dialect.objectHeaders(obj),
    ...validators,
    "Accept-Ranges": "bytes",
    "Content-Type": "application/octet-stream",
    "Content-Length": length
  }
  if (range._tag === "Partial") headers["Content-Range"] = contentRange(start, end, obj.size)
  ctx.res.writeHead(range._tag === "Partial" ? 206 : 200, headers)

  if (ctx.method === "HEAD" || length === 0) {
    await close()
    ctx.res.end()
    return
  }
  const stats = ctx.state.stats
  const meter = new Meter(ctx.state.faults.applies(ctx.kind) ? ctx.state.faults.faults.bandwidthBytesPerSec : 0, (n) => {
    stats.bytesServed += n
  })
  const body = obj.handle.createReadStream({ start, end, highWaterMark: READ_CHUNK, autoClose: true })
  // A reader that disconnects mid-body is normal; pipeline tears every stage down and
  // closes the file either way.
  pipeline(body, meter, ctx.res, () => undefined)
}
