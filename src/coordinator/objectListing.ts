/**
 * The admin API's paginated object listing (`GET /api/v1/objects?prefix=&delimiter=&cursor=&limit=`):
 * one origin page per request, the origin's continuation token as the cursor, so a prefix of any
 * size lists fully without the coordinator holding it. Unlike ListObjects it carries each
 * object's version and last-modified time, and common prefixes when a delimiter is given.
 */
import { Either, Effect } from "effect"
import type { BackendError, BackendStoreShape } from "../backend/BackendStore.js"
import { objectIdToPath } from "../core/objectId.js"
import { OBJECT_LISTING_MAX_PAGE, type ObjectListingPage } from "../protocol/objectListing.js"
import { parseListPrefix } from "./prefix.js"

export interface ObjectListingQuery {
  readonly prefix?: string | undefined
  readonly delimiter?: string | undefined
  readonly cursor?: string | undefined
  readonly limit?: string | undefined
}

export type ObjectListingAnswer =
  | { readonly status: 200; readonly page: ObjectListingPage }
  | { readonly status: 400 | 404 | 502 | 503; readonly error: string }

const refusal = (e: BackendError): ObjectListingAnswer =>
  e._tag === "BackendNotFound"
    ? { status: 404, error: `the origin has no such bucket or container: ${e.message}` }
    : { status: 502, error: `the origin's listing failed: ${e.message}` }

export const objectListingPage = (
  backend: BackendStoreShape,
  q: ObjectListingQuery,
  controlAddress?: string
): Effect.Effect<ObjectListingAnswer> => {
  if (q.prefix === undefined) return Effect.succeed({ status: 400, error: "prefix is required, like ?prefix=/s3/bucket/dir/" })
  const parsed = parseListPrefix(q.prefix)
  if (Either.isLeft(parsed)) return Effect.succeed({ status: 400, error: parsed.left })
  const limit = q.limit === undefined ? OBJECT_LISTING_MAX_PAGE : Number(q.limit)
  if (!Number.isInteger(limit) || limit < 1 || limit > OBJECT_LISTING_MAX_PAGE) {
    return Effect.succeed({ status: 400, error: `limit must be an integer in 1..${OBJECT_LISTING_MAX_PAGE} (got ${q.limit})` })
  }
  if (q.delimiter !== undefined && q.delimiter !== "/") return Effect.succeed({ status: 400, error: `delimiter may only be "/" (got ${JSON.stringify(q.delimiter)})` })
  const { backend: tag, bucket, keyPrefix } = parsed.right
  const pathOf = (key: string) => objectIdToPath({ backend: tag, bucket, objectPath: key })
  return backend
    .list(bucket, {
      backend: tag,
      prefix: keyPrefix,
      maxKeys: limit,
      ...(q.delimiter === undefined ? {} : { delimiter: q.delimiter }),
      ...(q.cursor === undefined || q.cursor === "" ? {} : { token: q.cursor })
    })
    .pipe(
      Effect.map(
        (result): ObjectListingAnswer => ({
          status: 200,
          page: {
            prefix: q.prefix ?? "",
            entries: result.objects.map((o) => ({
              path: pathOf(o.key),
              size: o.size,
              version: o.version,
              ...(o.lastModified === undefined ? {} : { lastModified: o.lastModified.toISOString() })
            })),
            prefixes: result.commonPrefixes.map(pathOf),
            next: result.nextToken ?? null,
            ...(controlAddress === undefined ? {} : { control: controlAddress })
          }
        })
      ),
      Effect.catchAll((e) => Effect.succeed(refusal(e)))
    )
}
