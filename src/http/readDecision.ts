/**
 * Conditions and the Range header against an object's validators, decided before any byte
 * is read: the origin stub answers from a file, the gateway from a cached stat.
 */
import { conditionHeaders, evaluateConditions, ifRangeHolds } from "./conditions.js"
import { header, type HttpCtx } from "./context.js"
import { contentRange, parseRange } from "./ranges.js"

export type ReadFailure = "precondition-failed" | "unsatisfiable" | "multiple-ranges"

/** What a read is judged by: the object's validators and size. */
export interface ReadValidators {
  readonly etag: string
  readonly lastModified: Date
  /** `lastModified` as an HTTP date, when the caller has it already. */
  readonly lastModifiedHttp?: string | undefined
  readonly size: number
}

/**
 * The outcome of conditions and the Range header against an object, before any byte is
 * read. Shared with the gateway, which answers from a cached stat instead of a file.
 */
export type ReadDecision =
  | { readonly _tag: "NotModified"; readonly headers: Record<string, string | number> }
  | { readonly _tag: "Fail"; readonly failure: ReadFailure }
  | {
      readonly _tag: "Serve"
      readonly partial: boolean
      /** Inclusive byte bounds; `end` is `start - 1` for an empty object. */
      readonly start: number
      readonly end: number
      readonly length: number
      /** Validators, Accept-Ranges, Content-Type, Content-Length and (partial) Content-Range. */
      readonly headers: Record<string, string | number>
    }

export const decideRead = (ctx: HttpCtx, obj: ReadValidators, rangeHeader: string | undefined): ReadDecision => {
  const lastModified = obj.lastModified.getTime()
  const lastModifiedHttp = obj.lastModifiedHttp ?? obj.lastModified.toUTCString()
  const h = ctx.req.headers
  // Most reads carry no condition: four lookups instead of building and judging an empty set.
  if (h["if-match"] !== undefined || h["if-none-match"] !== undefined || h["if-modified-since"] !== undefined || h["if-unmodified-since"] !== undefined) {
    const outcome = evaluateConditions(conditionHeaders((name) => header(ctx, name)), obj.etag, lastModified, true)
    if (outcome === "not-modified") return { _tag: "NotModified", headers: { ETag: obj.etag, "Last-Modified": lastModifiedHttp } }
    if (outcome === "precondition-failed") return { _tag: "Fail", failure: "precondition-failed" }
  }

  let range = parseRange(rangeHeader, obj.size)
  if (range._tag !== "Full" && h["if-range"] !== undefined && !ifRangeHolds(header(ctx, "if-range"), obj.etag, lastModified)) range = { _tag: "Full" }
  if (range._tag === "Multiple") return { _tag: "Fail", failure: "multiple-ranges" }
  if (range._tag === "Unsatisfiable") return { _tag: "Fail", failure: "unsatisfiable" }

  const partial = range._tag === "Partial"
  const start = range._tag === "Partial" ? range.start : 0
  const end = range._tag === "Partial" ? range.end : obj.size - 1
  const length = end - start + 1
  // One literal (no spreads): this object is the response head on every read.
  const headers: Record<string, string | number> = {
    ETag: obj.etag,
    "Last-Modified": lastModifiedHttp,
    "Accept-Ranges": "bytes",
    "Content-Type": "application/octet-stream",
    "Content-Length": length
  }
  if (partial) headers["Content-Range"] = contentRange(start, end, obj.size)
  return { _tag: "Serve", partial, start, end, length, headers }
}
