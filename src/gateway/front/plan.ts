/**
 * Whether the raw front can answer a request completely, and with what: a plain S3 GET or HEAD
 * of an object (path or `<bucket>.localhost` style), signed as the node path requires, whose
 * stat the gateway's stat cache has or gets, whose conditions and range the shared read decision
 * serves (200/206), and, for a GET with a body in a co-located gateway, its bytes: every block
 * resident in the worker pinned, else the route's reader with its first run in hand, all before
 * anything is written. Everything else, refusals and errors included, is the node path's to
 * answer: `undefined`.
 */
import type { ObjectStat } from "../../backend/BackendStore.js"
import { Backend, type ObjectId } from "../../core/ids.js"
import { Effect, Either, Runtime } from "effect"
import type { Payload } from "../../client/SlabPool.js"
import type { ByteReader } from "../Route.js"
import { decodePath, type HttpCtx } from "../../http/context.js"
import { isValidBucket } from "../../http/names.js"
import { decideRead } from "../../http/readDecision.js"
import { verifySigV4 } from "../auth.js"
import { cacheableId } from "../objectOps.js"
import type { Services } from "../context.js"
import type { LocalPiece } from "../localBlocks.js"
import type { RequestHead } from "./requestHead.js"
import { templateOf, type VersionTemplate } from "./responseHead.js"

/** A request the front answers: the object, what the head says, and the pinned pieces of a GET's body. */
export interface Plan {
  readonly method: "GET" | "HEAD"
  readonly bucket: string
  readonly rawKey: string
  readonly rawQuery: string
  readonly object: ObjectId
  readonly template: VersionTemplate
  readonly partial: boolean
  readonly contentRange: string | undefined
  /** Content-Length: the body's bytes (a HEAD sends none). */
  readonly length: number
  readonly keepAlive: boolean
  /** Every block's piece of the body, pinned; empty for a HEAD, an empty body or a body through the route. */
  readonly pieces: ReadonlyArray<LocalPiece>
  /** A body not resident here: the route's reader and its first run, read before anything is written. */
  readonly route: { readonly reader: ByteReader; readonly first: Payload | undefined } | undefined
}

/** Lets go of what a plan holds (the client left before it was answered). */
export const dropPlan = (plan: Plan): void => {
  for (const p of plan.pieces) p.release()
  if (plan.route !== undefined) {
    plan.route.first?.release()
    plan.route.reader.close()
  }
}

/**
 * A body needing more blocks than this goes to the node path, which pins one block at a time:
 * the front pins the whole body before its head is written, and a slow reader holds them all.
 */
export const MAX_PIECES = 16

/** The AWS SDKs tag object requests with `?x-id=<Operation>`; presigned URLs carry `X-Amz-*`. */
const readOnlyQuery = (rawQuery: string): boolean => {
  if (rawQuery === "") return true
  for (const part of rawQuery.split("&")) {
    const eq = part.indexOf("=")
    const key = (eq < 0 ? part : part.slice(0, eq)).toLowerCase()
    if (key !== "x-id" && !(key.length > 6 && key.startsWith("x-amz-"))) return false
  }
  return true
}


const VHOST_SUFFIX = ".localhost"

/** Keep-alive, close, or undefined for a Connection header the front leaves to node (upgrade, lists). */
const keepAliveOf = (head: RequestHead): boolean | undefined => {
  const c = head.headers["connection"]
  if (c === undefined) return true
  const v = c.toLowerCase()
  return v === "keep-alive" ? true : v === "close" ? false : undefined
}

/** What the node path would see first: a request the front does not take apart further. */
const plainRead = (head: RequestHead): boolean => {
  const h = head.headers
  if (head.minor !== 1) return false
  if (h["content-length"] !== undefined && h["content-length"] !== "0") return false
  if (h["transfer-encoding"] !== undefined || h["expect"] !== undefined || h["upgrade"] !== undefined) return false
  // Azure requests (any x-ms-* header) are the node path's.
  for (const name in h) if (name.startsWith("x-ms-")) return false
  return true
}

/** The pieces of `[start, start+length)`, block by block, all resident and pinned, or undefined (none left pinned). */
const pinAll = (g: Services, object: ObjectId, version: string, start: number, length: number): ReadonlyArray<LocalPiece> | undefined | Promise<ReadonlyArray<LocalPiece> | undefined> => {
  const local = g.local!
  const bs = local.blockSize
  const end = start + length
  const pieces: Array<LocalPiece> = []
  const release = () => {
    for (const p of pieces) p.release()
    return undefined
  }
  const from = (pos: number): ReadonlyArray<LocalPiece> | undefined | Promise<ReadonlyArray<LocalPiece> | undefined> => {
    while (pos < end) {
      const to = Math.min(end, (Math.floor(pos / bs) + 1) * bs)
      const got = local.resident(object, version, pos, to - pos)
      if (got instanceof Promise) {
        return got.then(
          (p) => {
            if (p === undefined) return release()
            pieces.push(p)
            return from(to)
          },
          () => release()
        )
      }
      if (got === undefined) return release()
      pieces.push(got)
      pos = to
    }
    return pieces
  }
  return from(start)
}

/** The plan for `head` on a plain socket whose fd sendfile can write to (`fd` ≥ 0), or undefined: the node path's. */
export const planRead = (g: Services, head: RequestHead, fd: number): Plan | undefined | Promise<Plan | undefined> => {
  const method = head.method
  if (method !== "GET" && method !== "HEAD") return undefined
  if (!plainRead(head)) return undefined
  const keepAlive = keepAliveOf(head)
  if (keepAlive === undefined) return undefined
  // Principals (grants) and traced requests keep the node path, which records them.
  if (g.principals !== undefined || g.spans !== undefined) return undefined
  const target = head.target
  if (target.charCodeAt(0) !== 47) return undefined
  const q = target.indexOf("?")
  const rawPath = q < 0 ? target : target.slice(0, q)
  const rawQuery = q < 0 ? "" : target.slice(q + 1)
  if (rawPath.indexOf("#") >= 0 || !readOnlyQuery(rawQuery)) return undefined
  const host = (head.headers["host"] ?? "").replace(/:\d+$/, "").toLowerCase()
  let bucket: string
  let rawKey: string
  if (host.endsWith(VHOST_SUFFIX) && host.length > VHOST_SUFFIX.length) {
    bucket = host.slice(0, -VHOST_SUFFIX.length)
    rawKey = rawPath.slice(1)
  } else {
    const slash = rawPath.indexOf("/", 1)
    if (slash < 0) return undefined
    bucket = rawPath.slice(1, slash)
    rawKey = rawPath.slice(slash + 1)
  }
  if (rawKey === "" || !isValidBucket(bucket)) return undefined
  const key = decodePath(rawKey)
  if (key === undefined) return undefined
  const options = g.options
  // The node path refuses chunk-signed payloads (501) before it looks at the method.
  const sha = head.headers["x-amz-content-sha256"]
  if (options.auth && sha !== undefined && sha.startsWith("STREAMING-") && sha !== "STREAMING-UNSIGNED-PAYLOAD-TRAILER") return undefined
  if (options.auth) {
    const cred = options.credentials.s3
    if (cred === undefined) return undefined
    const verdict = verifySigV4(
      { method, rawPath, rawQuery, headers: head.headers },
      { accessKeyId: cred.accessKeyId, secretAccessKey: cred.secretAccessKey, region: options.region, nowMs: g.now(), clockSkewMs: options.clockSkewMs }
    )
    // A refusal is answered (and counted) by the node path.
    if (!verdict.ok) return undefined
  }
  const object: ObjectId = { backend: Backend.S3, bucket, objectPath: key }
  const withStat = (stat: ObjectStat): Plan | undefined | Promise<Plan | undefined> => {
    const template = templateOf(stat)
    // The shared read decision reads only the request's headers.
    const decision = decideRead({ req: { headers: head.headers } } as unknown as HttpCtx, template.validators, head.headers["range"])
    if (decision._tag !== "Serve") return undefined
    const contentRange = decision.partial ? (decision.headers["Content-Range"] as string) : undefined
    const plan = (pieces: ReadonlyArray<LocalPiece>, route?: Plan["route"]): Plan => ({
      method,
      bucket,
      rawKey,
      rawQuery,
      object,
      template,
      partial: decision.partial,
      contentRange,
      length: decision.length,
      keepAlive,
      pieces,
      route
    })
    if (method === "HEAD" || decision.length === 0) return plan([])
    // Without a co-located worker the node path's splice relay is the faster body: node's.
    if (g.local === undefined || fd < 0) return undefined
    const cacheable = cacheableId(object) && !g.stats.recentlyWritten(object)
    const throughRoute = (): Promise<Plan | undefined> => {
      const reader = g.route.open({ object, stat, offset: decision.start, length: decision.length, cacheable })
      return reader.next().then(
        (first) => plan([], { reader, first }),
        // Changed, missing or unreachable before a byte was written: the node path retries or answers it.
        () => {
          reader.close()
          return undefined
        }
      )
    }
    const blocks = Math.ceil((decision.start + decision.length) / g.local.blockSize) - Math.floor(decision.start / g.local.blockSize)
    if (!cacheable || g.route.name !== "cache" || blocks > MAX_PIECES) return throughRoute()
    const pinned = pinAll(g, object, stat.version, decision.start, decision.length)
    if (pinned instanceof Promise) return pinned.then((p) => (p === undefined ? throughRoute() : plan(p)))
    return pinned === undefined ? throughRoute() : plan(pinned)
  }
  const cached: ObjectStat | undefined = g.stats.peek(object)
  if (cached !== undefined) return withStat(cached)
  // Not cached (first read, expired while idle): one origin HEAD shared with the node path's; a failure is node's to answer.
  return Runtime.runPromise(g.runtime)(Effect.either(g.stats.stat(object))).then((r) => (Either.isRight(r) ? withStat(r.right) : undefined))
}
