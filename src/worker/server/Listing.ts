/**
 * ListObjects on the data port, as Talon's worker answers it there: the control protocol has no
 * cursor, so the worker drains the origin's pages itself, at most 20 pages of 1000 keys and
 * 10,000 objects, and the encoded ObjectList must fit one control frame (1 MiB). Past any bound
 * the answer is a refusal naming it, never a partial list (a truncated directory would look
 * healthy). Paths are Talon's `s3/bucket/key` (backend prefix, no leading slash).
 */
import { Effect, Either } from "effect"
import type { BackendError, BackendStoreShape } from "../../backend/BackendStore.js"
import { parseListPrefix } from "../../core/listPrefix.js"
import { backendPrefix } from "../../core/objectId.js"
import { type ControlMessage, DEFAULT_CAPS } from "../../protocol/index.js"

/** Talon's `MAX_LIST_OBJECTS`, `MAX_LIST_PAGES` and `LIST_PAGE_SIZE` (talon-worker runtime.rs). */
export const MAX_LIST_OBJECTS = 10_000
export const MAX_LIST_PAGES = 20
export const LIST_PAGE_SIZE = 1000

interface Entry {
  readonly path: string
  readonly size: number
}

const refuse = (detail: string): ControlMessage => ({ _tag: "Ack", ok: false, detail })

/** The reply to `ListObjects { prefix }`: an ObjectList, or an `Ack{ok:false}` saying what to narrow or what failed. */
export const listObjects = (backend: BackendStoreShape, prefix: string): Effect.Effect<ControlMessage> => {
  const parsed = parseListPrefix(prefix)
  if (Either.isLeft(parsed)) return Effect.succeed(refuse(parsed.left))
  const { backend: tag, bucket, keyPrefix } = parsed.right
  const head = `${backendPrefix(tag)}/${bucket}/`
  const entries: Array<Entry> = []
  // ObjectList payload so far: envelope and tag, the vec length, then per entry a length prefix, the path and a u64.
  let payload = 32
  const cap = DEFAULT_CAPS.control
  const tooBig = (why: string) => refuse(`listing ${JSON.stringify(prefix)} ${why}; narrow the namespace prefix`)
  const page = (token: string | undefined, n: number): Effect.Effect<ControlMessage, BackendError> =>
    Effect.flatMap(
      backend.list(bucket, { backend: tag, prefix: keyPrefix, maxKeys: LIST_PAGE_SIZE, ...(token === undefined ? {} : { token }) }),
      (result) => {
        const remaining = MAX_LIST_OBJECTS - entries.length
        const more = result.nextToken !== undefined
        if (result.objects.length > remaining || (result.objects.length === remaining && more)) {
          return Effect.succeed(tooBig(`exceeds the ${MAX_LIST_OBJECTS}-object control-response limit`))
        }
        for (const o of result.objects) {
          const path = head + o.key
          payload += 16 + Buffer.byteLength(path, "utf8")
          entries.push({ path, size: o.size })
        }
        if (payload > cap) return Effect.succeed(tooBig(`requires a ${payload}-byte control response, exceeding the ${cap}-byte transport limit`))
        if (!more) return Effect.succeed<ControlMessage>({ _tag: "ObjectList", entries })
        if (n >= MAX_LIST_PAGES) return Effect.succeed(tooBig(`did not complete within ${MAX_LIST_PAGES} backend pages`))
        return page(result.nextToken, n + 1)
      }
    )
  return page(undefined, 1).pipe(Effect.catchAll((e) => Effect.succeed(refuse(`list ${prefix}: ${e.message}`))))
}
