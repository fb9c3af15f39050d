/**
 * CopyObject in the origin stub (`PUT` with `x-amz-copy-source`): the source streams from
 * its open descriptor into the destination through PutObject's atomic rename, so a copy of
 * any size costs a read buffer. The source's conditions (`x-amz-copy-source-if-*`) are
 * checked against the bytes actually copied.
 */
import { header, sendXml } from "../http/context.js"
import type { Ctx } from "./context.js"
import { conditionHeaders, evaluateConditions } from "../http/conditions.js"
import { isValidBucket } from "../http/names.js"
import { s3Error } from "../http/s3Errors.js"
import { keyProblem } from "./layout.js"
import { openObject, putObject, PutConflict, PutPreconditionFailed, type OpenObject } from "./store.js"
import { el, S3_XMLNS, XML_DECL_S3 } from "../http/xml.js"
import { metadataFromHeaders, S3_META_PREFIX } from "../core/userMetadata.js"
import { readProps, saveProps } from "./blobProps.js"

export type CopySource =
  | { readonly obj: OpenObject; readonly bucket: string; readonly key: string }
  | { readonly error: string; readonly status: number; readonly message: string }

/** Opens the object `x-amz-copy-source` names (`/bucket/key` or `bucket/key`, URL-encoded, optional `?versionId`). */
export const copySourceOf = async (ctx: Ctx): Promise<CopySource> => {
  const raw = header(ctx, "x-amz-copy-source") ?? ""
  const noQuery = raw.split("?")[0]!.replace(/^\//, "")
  let decoded: string
  try {
    decoded = decodeURIComponent(noQuery)
  } catch {
    return { error: "InvalidArgument", status: 400, message: "Invalid copy source encoding: x-amz-copy-source must be /<bucket>/<url-encoded key>" }
  }
  const slash = decoded.indexOf("/")
  const bucket = slash < 0 ? decoded : decoded.slice(0, slash)
  const key = slash < 0 ? "" : decoded.slice(slash + 1)
  if (!isValidBucket(bucket) || key === "" || keyProblem(key) !== undefined) {
    return { error: "InvalidArgument", status: 400, message: `Invalid copy source object ${JSON.stringify(decoded)}: expected /<bucket>/<key>` }
  }
  const obj = await openObject(ctx.state.root, bucket, key)
  if (!obj) return { error: "NoSuchKey", status: 404, message: `The specified copy source ${bucket}/${key} does not exist.` }
  const outcome = evaluateConditions(
    conditionHeaders((name) => header(ctx, name), "x-amz-copy-source-"),
    obj.etag,
    obj.lastModified.getTime(),
    false
  )
  if (outcome !== "proceed") {
    await obj.handle.close()
    return { error: "PreconditionFailed", status: 412, message: "At least one of the pre-conditions you specified did not hold (x-amz-copy-source-if-*)" }
  }
  return { obj, bucket, key }
}

export const copyObject = async (ctx: Ctx, bucket: string, key: string): Promise<void> => {
  ctx.req.resume()
  const source = await copySourceOf(ctx)
  if ("error" in source) return s3Error(ctx, source.status, source.error, source.message)
  const { obj } = source
  try {
    const directive = header(ctx, "x-amz-metadata-directive") ?? "COPY"
    if (directive !== "COPY" && directive !== "REPLACE") {
      return s3Error(ctx, 400, "InvalidArgument", `Unknown metadata directive ${JSON.stringify(directive)}: x-amz-metadata-directive is COPY (the default) or REPLACE.`)
    }
    // Read before the copy: a copy onto itself replaces the record.
    const kept = directive === "COPY" ? await readProps(ctx.state.root, source.bucket, source.key, obj.etag) : undefined
    const metadata = directive === "COPY" ? (kept?.metadata ?? {}) : { ...metadataFromHeaders(ctx.req.headers, S3_META_PREFIX) }
    if (source.bucket === bucket && source.key === key && directive !== "REPLACE") {
      return s3Error(ctx, 400, "InvalidRequest", "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes (send x-amz-metadata-directive: REPLACE).")
    }
    const info = await putObject(ctx.state.root, bucket, key, obj.handle.createReadStream({ autoClose: false }), {
      conditions: { ifMatch: header(ctx, "if-match"), ifNoneMatch: header(ctx, "if-none-match") },
      // Same bytes, same content ETag (an identity ETag names the source file, so it is not kept).
      contentEtag: () => (/^"[0-9a-f]{32}(-\d+)?"$/.test(obj.etag) ? obj.etag : undefined)
    })
    await saveProps(ctx.state.root, bucket, key, { etag: info.etag, metadata, headers: kept?.headers ?? {} })
    sendXml(ctx, 200, `${XML_DECL_S3}<CopyObjectResult xmlns="${S3_XMLNS}">${el("LastModified", info.lastModified.toISOString())}${el("ETag", info.etag)}</CopyObjectResult>`)
  } catch (e) {
    if (e instanceof PutConflict) return s3Error(ctx, 409, "KeyConflict", e.message, { Key: key })
    if (e instanceof PutPreconditionFailed) {
      return s3Error(ctx, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", { Key: key })
    }
    throw e
  } finally {
    await obj.handle.close()
  }
}
