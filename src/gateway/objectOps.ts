/**
 * The object operations both front ends share: a read (stat, conditions, one range,
 * bytes through the route with backpressure) and the commit of a write or delete at
 * the origin. Provider differences (error shapes, headers) come in a `Dialect`.
 */
import { Effect, Either, type Tracer } from "effect"
import type { BackendError, ObjectStat } from "../backend/BackendStore.js"
import { quoteEtag } from "../backend/etag.js"
import type { ObjectId } from "../core/ids.js"
import { metadataHeaders } from "../core/userMetadata.js"
import { objectIdFromPath, objectIdToPath } from "../core/objectId.js"
import { sendEmpty } from "../http/context.js"
import { decideRead, type ReadFailure, type ReadValidators } from "../http/readDecision.js"
import type { Payload } from "../client/SlabPool.js"
import { Aborted, type GwCtx, type RequestAbort, run, writePayload } from "./context.js"
import { type ByteReader, RouteError } from "./Route.js"
import type { BodyAsk } from "./bodyStart.js"
import { serveLocal } from "./localBody.js"
import { serveRemote } from "./remoteBody.js"
import { ROUTE_ATTRIBUTE } from "./spans.js"

/** `readHeaders` of a dialect that adds none (the read's own headers are then used as they are). */
export const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({})

export interface Dialect {
  /** Provider-specific headers on every successful read. */
  readonly readHeaders: Readonly<Record<string, string>>
  /** The header prefix user metadata is returned under (`x-amz-meta-`, `x-ms-meta-`). */
  readonly metaPrefix: string
  /** A provider-shaped error document (no body for HEAD). */
  readonly error: (ctx: GwCtx, status: number, code: string, message: string, headers?: Record<string, string | number>) => void
  readonly readFailure: (ctx: GwCtx, failure: ReadFailure, key: string, size: number, range: string | undefined) => void
  /** 404 for an object, telling a missing bucket/container from a missing key. */
  readonly notFound: (ctx: GwCtx, object: ObjectId) => Promise<void>
  readonly codes: {
    readonly busy: string
    readonly unavailable: string
    readonly timeout: string
    readonly internal: string
    readonly notImplemented: string
    readonly precondition: string
  }
}

export const COMMIT_STATE = "x-talon-commit-state"

const respondable = (ctx: GwCtx) => !ctx.res.headersSent && !ctx.res.destroyed

export const answerAborted = (ctx: GwCtx, d: Dialect, headers: Record<string, string | number> = {}): void => {
  if (!respondable(ctx)) return
  d.error(ctx, 503, d.codes.timeout, `The gateway could not answer within ${ctx.g.options.responseTimeoutMs} ms; retry the request.`, headers)
}

/** A failed origin call before anything was written: the provider-shaped answer. */
export const answerBackendError = async (
  ctx: GwCtx,
  d: Dialect,
  e: BackendError | Aborted,
  object: ObjectId | undefined
): Promise<void> => {
  if (!respondable(ctx)) return
  if (e instanceof Aborted) return answerAborted(ctx, d)
  if (e._tag === "BackendNotFound" && object !== undefined) return d.notFound(ctx, object)
  if (e._tag === "BackendRequestError" && (e.status === 401 || e.status === 403)) {
    return d.error(ctx, 500, d.codes.internal, `The origin refused the gateway's own credentials (${e.detail}); fix TALON_S3_*/TALON_AZURE_* on the gateway.`)
  }
  if (e._tag === "BackendRequestError" && e.status === 412) {
    return d.error(ctx, 412, d.codes.precondition, "At least one of the pre-conditions you specified did not hold")
  }
  const answered = originAnswer(e, d)
  if (answered !== undefined) return d.error(ctx, answered.status, answered.code, answered.message)
  ctx.g.counters.errors++
  return d.error(ctx, 503, d.codes.unavailable, `The origin is unavailable: ${e.message}`)
}

/**
 * An origin that answered with an HTTP status decided: its status and code go back to the
 * client as they were (a 400 for a bad key is the client's to fix, not a reason to retry).
 * Only a failure without a status (unreachable, timed out) is the gateway's 503.
 */
export const originAnswer = (
  e: BackendError,
  d: Dialect
): { readonly status: number; readonly code: string; readonly message: string } | undefined => {
  if (e._tag === "BackendRangeError") return { status: 416, code: "InvalidRange", message: e.message }
  if (e._tag !== "BackendRequestError" || e.status === undefined || e.status < 400) return undefined
  // statusError's detail is "<Code>: <message>" when the origin sent an error document.
  const m = /^([A-Z][A-Za-z0-9]+): (.*)$/s.exec(e.detail)
  const code = m?.[1] ?? fallbackCode(e.status, d)
  const message = m?.[2] ?? `The origin refused ${e.operation} with HTTP ${e.status} (${e.detail}).`
  return { status: e.status, code, message }
}

const fallbackCode = (status: number, d: Dialect): string => {
  const s3 = d.codes.busy === "SlowDown"
  if (status === 400) return s3 ? "InvalidRequest" : "InvalidInput"
  if (status === 405) return s3 ? "MethodNotAllowed" : "UnsupportedHttpVerb"
  if (status === 409) return s3 ? "OperationAborted" : "Conflict"
  if (status === 429 || status === 503) return d.codes.busy
  return status >= 500 ? d.codes.internal : s3 ? "InvalidRequest" : "InvalidInput"
}

/** Whether the cluster can hold `object` (its id round-trips), remembered per path: reads repeat the same few objects. */
const cacheable = new Map<string, boolean>()
export const cacheableId = (object: ObjectId): boolean => {
  const path = objectIdToPath(object)
  let ok = cacheable.get(path)
  if (ok === undefined) {
    ok = Either.isRight(objectIdFromPath(path))
    if (cacheable.size >= 10_000) cacheable.clear()
    cacheable.set(path, ok)
  }
  return ok
}

/**
 * A dialect's read headers plus the stat's user metadata, made once per stat and dialect (the
 * stat is cached, so repeated reads of an object with metadata build no header map for it).
 */
const withMetadata = new WeakMap<ObjectStat, { readonly prefix: string; readonly headers: Readonly<Record<string, string>> }>()
const readHeadersOf = (d: Dialect, stat: ObjectStat): Readonly<Record<string, string>> => {
  if (stat.metadata === undefined) return d.readHeaders
  const made = withMetadata.get(stat)
  if (made !== undefined && made.prefix === d.metaPrefix) return made.headers
  const headers = { ...d.readHeaders, ...metadataHeaders(stat.metadata, d.metaPrefix) }
  withMetadata.set(stat, { prefix: d.metaPrefix, headers })
  return headers
}

/** The validators of a stat (quoted ETag, HTTP date), made once per stat rather than per read. */
const validators = new WeakMap<ObjectStat, ReadValidators>()
const validatorsOf = (stat: ObjectStat): ReadValidators => {
  let v = validators.get(stat)
  if (v === undefined) {
    const lastModified = stat.lastModified ?? new Date(0)
    v = { etag: quoteEtag(stat.version), lastModified, lastModifiedHttp: lastModified.toUTCString(), size: stat.size }
    validators.set(stat, v)
  }
  return v
}

const nextOrAbort = (reader: ByteReader, aborts: RequestAbort): Promise<Payload | undefined> =>
  aborts.aborted
    ? Promise.reject(new Aborted())
    : new Promise((resolve, reject) => {
        aborts.onAbort = () => reject(new Aborted())
        reader.next().then(
          (v) => {
            aborts.onAbort = undefined
            resolve(v)
          },
          (e: unknown) => {
            aborts.onAbort = undefined
            reject(e)
          }
        )
      })

/** Fresh stats a GET may take when the object changes before its first bytes are in. */
const READ_RESTATS = 2

/** GET / HEAD of one object with conditions and one range, through the route. */
export const serveRead = async (ctx: GwCtx, d: Dialect, object: ObjectId, rangeHeader: string | undefined): Promise<void> => {
  const g = ctx.g
  for (let attempt = 0; ; attempt++) {
    let stat = attempt === 0 ? g.stats.peek(object) : undefined
    if (stat === undefined) {
      const lookup = g.stats.stat(object, attempt > 0)
      const st = await run(ctx, ctx.span === undefined ? lookup : Effect.withSpan(lookup, "talon.gateway.stat", statSpan(ctx.span, object, "origin")))
      if (Either.isLeft(st)) return answerBackendError(ctx, d, st.left, object)
      stat = st.right
    } else if (ctx.span !== undefined) {
      // Answered from the gateway's stat cache: an instant span, so every traced read shows where its stat came from.
      g.spans!.end(g.spans!.start("talon.gateway.stat", ctx.span, "internal", statSpan(ctx.span, object, "cache").attributes))
    }
    const decision = decideRead(ctx, validatorsOf(stat), rangeHeader)
    if (decision._tag === "NotModified") return sendEmpty(ctx, 304, { ...decision.headers, ...d.readHeaders })
    if (decision._tag === "Fail") return d.readFailure(ctx, decision.failure, object.objectPath, stat.size, rangeHeader)
    const extra = readHeadersOf(d, stat)
    const head = extra === NO_HEADERS ? decision.headers : { ...extra, ...decision.headers }
    if (ctx.method === "HEAD" || decision.length === 0) {
      ctx.res.writeHead(decision.partial ? 206 : 200, head)
      ctx.res.end()
      return
    }
    const cacheable = cacheableId(object) && !g.stats.recentlyWritten(object)
    const ask: BodyAsk = { status: decision.partial ? 206 : 200, head, object, stat, start: decision.start, length: decision.length, cacheable }
    if (g.local !== undefined && cacheable && g.route.name === "cache") {
      if (await serveLocal(ctx, g.local, ask)) {
        // The co-located worker's blocks by sendfile: the request span only.
        ctx.span?.attribute(ROUTE_ATTRIBUTE, "cache")
        return
      }
    }
    if (g.remote !== undefined && cacheable) {
      const relayed = await serveRemote(ctx, g.remote, ask)
      if (relayed instanceof RouteError) {
        g.counters.errors++
        return d.error(ctx, 503, d.codes.unavailable, `Neither the cache nor the origin could serve the object: ${relayed.detail}`)
      }
      if (relayed) {
        // The workers' bodies relayed by splice: the request span only.
        ctx.span?.attribute(ROUTE_ATTRIBUTE, "cache")
        return
      }
    }
    const route = cacheable ? g.route.name : "origin"
    const readSpan = ctx.span === undefined ? undefined : startReadSpan(ctx, ctx.span, route, decision.start, decision.length)
    const reader = g.route.open({ object, stat, offset: decision.start, length: decision.length, cacheable })
    let first: Payload | undefined
    try {
      first = await nextOrAbort(reader, ctx.aborts)
    } catch (e) {
      if (readSpan !== undefined) g.spans!.end(readSpan, e instanceof Aborted ? "aborted" : (e as RouteError).message)
      reader.close()
      if (e instanceof Aborted) return answerAborted(ctx, d)
      const err = e as RouteError
      // The object changed since it was stat'ed: ask the origin again (a bounded number of times).
      if ((err.kind === "changed" || err.kind === "range") && attempt < READ_RESTATS) {
        g.stats.invalidate(object)
        continue
      }
      if (err.kind === "not-found") {
        g.stats.invalidate(object)
        return d.notFound(ctx, object)
      }
      g.counters.errors++
      return d.error(ctx, 503, d.codes.unavailable, `Neither the cache nor the origin could serve the object: ${err.detail}`)
    }
    return streamBody(ctx, decision.partial ? 206 : 200, head, reader, first, readSpan)
  }
}

const statSpan = (parent: Tracer.Span, object: ObjectId, source: "origin" | "cache") => ({
  parent,
  kind: "client" as const,
  attributes: { "talon.object": object.objectPath, "talon.stat.source": source }
})

/** `talon.gateway.read`: the body's bytes through the route, from the first piece asked for to the last one written. */
const startReadSpan = (ctx: GwCtx, parent: Tracer.Span, route: "cache" | "origin", offset: number, length: number): Tracer.Span => {
  parent.attribute(ROUTE_ATTRIBUTE, route)
  return ctx.g.spans!.start("talon.gateway.read", parent, "internal", { [ROUTE_ATTRIBUTE]: route, "talon.offset": offset, "talon.length": length })
}

/**
 * Writes the head, then every run of bytes as the socket takes it (the next run is
 * awaited only once the socket took the last); a failure after the head aborts the
 * connection.
 */
const streamBody = async (
  ctx: GwCtx,
  status: number,
  head: Record<string, string | number>,
  reader: ByteReader,
  first: Payload | undefined,
  span: Tracer.Span | undefined
): Promise<void> => {
  const { res, g } = ctx
  if (!respondable(ctx)) {
    first?.release()
    if (span !== undefined) g.spans!.end(span, "client gone before the head")
    return reader.close()
  }
  res.writeHead(status, head)
  let bytes = first
  let failure: string | undefined
  try {
    while (bytes !== undefined) {
      g.counters.bytesOut += bytes.length
      const taken = writePayload(res, bytes)
      if (taken !== true && !(await taken)) {
        failure = "client gone"
        return
      }
      bytes = await reader.next()
    }
    res.end()
  } catch (e) {
    // The head promised bytes that cannot come: a short body tells the client, never wrong bytes.
    g.counters.aborted++
    failure = e instanceof Error ? e.message : String(e)
    res.destroy()
  } finally {
    reader.close()
    if (span !== undefined) g.spans!.end(span, failure)
  }
}
