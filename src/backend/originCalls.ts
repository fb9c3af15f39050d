/**
 * The request/response steps the S3 and Azure providers share. They differ in how a request is
 * addressed and signed and in their error documents; what a status means, how a HEAD becomes a
 * stat and how a range response is read are the same for both.
 */
import type { IncomingHttpHeaders } from "node:http"
import { Effect, type Scope } from "effect"
import type { ObjectId } from "../core/ids.js"
import { AZURE_META_PREFIX, metadataFromHeaders, S3_META_PREFIX } from "../core/userMetadata.js"
import {
  type BackendError,
  BackendRangeError,
  type BackendRequestError,
  type BackendStoreShape,
  type ListOptions,
  type ObjectStat
} from "./BackendStore.js"
import { normalizeEtag } from "./etag.js"
import { contentLength, lastModified, parseContentRange } from "./headers.js"
import { header, makeTransport, type OriginRequest, type RequestLabel } from "./http.js"
import { type RequestPolicy, withRetries } from "./policy.js"
import { type OpenRange, type RangeBody, rangeOperations } from "./ranged.js"
import { pushRange } from "./rangePush.js"
import { Receiver } from "./receiveInto.js"

/** A response read whole (small bodies: error documents, listings). */
export interface BufferedResponse {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: Buffer
}

/** How a provider turns a failed response into the error its callers match on. */
export type Failure = (label: RequestLabel, res: BufferedResponse) => BackendError

/**
 * A request built per attempt, so a retry carries a fresh date and signature. Building may
 * fail (a signer that rejects its input).
 */
export type RequestOf = Effect.Effect<OriginRequest, BackendRequestError>

/** An origin root URL as the parts every request needs; the path keeps no trailing slash. */
export const originBase = (root: string) => {
  const url = new URL(root)
  const protocol: OriginRequest["protocol"] = url.protocol === "http:" ? "http:" : "https:"
  return {
    url,
    protocol,
    hostname: url.hostname,
    port: url.port === "" ? (protocol === "https:" ? 443 : 80) : Number(url.port),
    basePath: url.pathname.replace(/\/+$/, "")
  }
}

/** A request to `root` + `path` (a token or credentials endpoint), with its body's length when it has one. */
export const originRequest = (
  root: string,
  method: OriginRequest["method"],
  path: string,
  headers: Record<string, string>,
  body?: Buffer
): OriginRequest => {
  const base = originBase(root)
  return {
    method,
    protocol: base.protocol,
    hostname: base.hostname,
    port: base.port,
    path: `${base.basePath}${path}`,
    headers: body === undefined ? headers : { ...headers, "content-length": String(body.length) },
    body
  }
}

/** Both providers answer a HEAD with the size, ETag, Last-Modified and user metadata of the current version. */
export const statOf = (headers: IncomingHttpHeaders): ObjectStat => {
  const metadata = metadataFromHeaders(headers, S3_META_PREFIX) ?? metadataFromHeaders(headers, AZURE_META_PREFIX)
  return {
    size: contentLength(headers) ?? 0,
    version: normalizeEtag(header(headers, "etag")),
    lastModified: lastModified(headers),
    ...(metadata === undefined ? {} : { metadata })
  }
}

/** A listing's query: the provider's fixed parameters, then the caller's options under the provider's names. */
export const listQuery = (
  fixed: Record<string, string>,
  options: ListOptions | undefined,
  names: { readonly token: string; readonly maxKeys: string }
): Record<string, string> => {
  const query = { ...fixed }
  if (options?.prefix) query.prefix = options.prefix
  if (options?.delimiter) query.delimiter = options.delimiter
  if (options?.token) query[names.token] = options.token
  if (options?.maxKeys !== undefined) query[names.maxKeys] = String(options.maxKeys)
  return query
}

/** Which response header names the version a write stored or a read is serving: the ETag, unless the provider says otherwise (GCS: the generation). */
export type VersionOf = (headers: IncomingHttpHeaders) => string

const etagVersion: VersionOf = (headers) => normalizeEtag(header(headers, "etag"))

/** The calls of one provider, over one keep-alive transport that lives as long as the scope. */
export const originCalls = (policy: RequestPolicy, failure: Failure, versionOf: VersionOf = etagVersion) =>
  Effect.gen(function* () {
    const transport = yield* makeTransport(policy)
    const runtime = yield* Effect.runtime<never>()
    const receiver = new Receiver(policy.timeoutMs)
    yield* Effect.addFinalizer(() => Effect.sync(() => receiver.close()))
    /** One request with the policy's retries; a status `ok` refuses fails with the provider's error. */
    const once = <A>(
      label: RequestLabel,
      request: RequestOf,
      ok: (status: number) => boolean,
      parse: (res: BufferedResponse) => A
    ): Effect.Effect<A, BackendError> =>
      Effect.gen(function* () {
        const res = yield* transport.fetch(yield* request, label)
        if (!ok(res.status)) return yield* Effect.fail(failure(label, res))
        return parse(res)
      })
    const call = <A>(
      label: RequestLabel,
      request: RequestOf,
      ok: (status: number) => boolean,
      parse: (res: BufferedResponse) => A
    ): Effect.Effect<A, BackendError> => withRetries(policy, once(label, request, ok, parse))

    const stat = (label: RequestLabel, request: RequestOf): Effect.Effect<ObjectStat, BackendError> =>
      call(label, request, (status) => status === 200, (res) => statOf(res.headers))

    /**
     * Uploads `size` bytes; an origin that answers without an ETag is asked again with `restat`,
     * so the version a caller gets back is always the one stored.
     */
    const put = (
      label: RequestLabel,
      request: RequestOf,
      size: number,
      restat: Effect.Effect<ObjectStat, BackendError>
    ): Effect.Effect<ObjectStat, BackendError> =>
      call(label, request, (status) => status === 200 || status === 201, (res) => ({
        size,
        version: versionOf(res.headers)
      })).pipe(Effect.flatMap((s) => (s.version === "" ? restat : Effect.succeed(s))))

    /** `put` of a streamed body: one attempt, since the stream cannot be sent again. */
    const putOnce = (
      label: RequestLabel,
      request: RequestOf,
      size: number,
      restat: Effect.Effect<ObjectStat, BackendError>
    ): Effect.Effect<ObjectStat, BackendError> =>
      once(label, request, (status) => status === 200 || status === 201, (res) => ({
        size,
        version: versionOf(res.headers)
      })).pipe(Effect.flatMap((s) => (s.version === "" ? restat : Effect.succeed(s))))

    /** Deleting what is already gone is success, as S3 itself answers; Azure is made to agree. */
    const remove = (label: RequestLabel, request: RequestOf): Effect.Effect<void, BackendError> =>
      call(label, request, (status) => status === 404 || (status >= 200 && status < 300), () => undefined)

    /**
     * One attempt of a range read: its response head and body, or the error it is. A 416 is a
     * range error whose size comes from `sizeOf416` (each provider says it in its own place).
     */
    const openRange = (
      label: RequestLabel,
      request: RequestOf,
      range: { readonly from: number; readonly offset: number; readonly length: number },
      sizeOf416: (res: BufferedResponse) => number | undefined
    ): Effect.Effect<RangeBody, BackendError, Scope.Scope> =>
      Effect.gen(function* () {
        const res = yield* transport.open(yield* request, label)
        if (res.status === 206 || res.status === 200) {
          const sent = parseContentRange(header(res.headers, "content-range"))
          return {
            start: res.status === 206 ? (sent.start ?? range.from) : 0,
            size: res.status === 206 ? sent.size : contentLength(res.headers),
            version: versionOf(res.headers) || undefined,
            body: res.body
          }
        }
        const buffered = { status: res.status, headers: res.headers, body: yield* transport.readBody(res, label) }
        if (res.status === 416) {
          const { offset, length } = range
          return yield* Effect.fail(
            new BackendRangeError({ object: label.object, offset, length, size: sizeOf416(buffered) })
          )
        }
        return yield* Effect.fail(failure(label, buffered))
      })

    /** A range GET's signed request for `[from, to]`, If-Match pinned when `ifMatch` is set. */
    type RangeRequest = (object: ObjectId, label: RequestLabel, from: number, to: number, ifMatch: string | undefined) => RequestOf

    /**
     * getRange, openRange and pushRange of a provider's range GET: its request, and where its
     * 416 says the object's size (see ranged.ts, rangePush.ts).
     */
    const ranges = (
      operation: string,
      labelOf: (object: ObjectId, operation: string) => RequestLabel,
      rangeRequest: RangeRequest,
      sizeOf416: (res: BufferedResponse) => number | undefined,
      stat: BackendStoreShape["stat"]
    ) => {
      const opener =
        (object: ObjectId, offset: number, length: number, label: RequestLabel): OpenRange =>
        (from, to, ifMatch) =>
          openRange(label, rangeRequest(object, label, from, to, ifMatch), { from, offset, length }, sizeOf416)
      const { getRange, openRange: relay } = rangeOperations({ operation, labelOf, opener, stat, policy, runtime })
      const push: NonNullable<BackendStoreShape["pushRange"]> = (object, offset, length, options, sink, signal) => {
        if (length <= 0) return Promise.resolve()
        const label = labelOf(object, operation)
        return pushRange({
          label,
          policy,
          runtime,
          receiver,
          offset,
          length,
          version: options?.version,
          sink,
          signal,
          get: {
            request: (from, to, ifMatch) => rangeRequest(object, label, from, to, ifMatch),
            refused: (status, headers, body) => {
              const res = { status, headers, body }
              return status === 416
                ? new BackendRangeError({ object: label.object, offset, length, size: sizeOf416(res) })
                : failure(label, res)
            },
            versionOf,
            reader: (from, bytes, version) => relay(object, from, bytes, { version })
          }
        })
      }
      return { getRange, openRange: relay, pushRange: push }
    }

    return { call, stat, put, putOnce, remove, openRange, ranges, transport }
  })
