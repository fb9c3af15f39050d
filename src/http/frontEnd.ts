/**
 * The steps every S3/Azure REST front end (the origin stub, the gateway) takes around its
 * handlers: a target it cannot parse, the dialect's identifying response headers, an S3
 * request's bucket and key, and an error escaping a handler.
 */
import type * as http from "node:http"
import { azureError, AZURE_API_VERSION } from "./azureErrors.js"
import type { HttpCtx } from "./context.js"
import { s3Error } from "./s3Errors.js"
import { splitTarget, type Target } from "./target.js"

/** The request's target, or undefined after answering 400 (a request line no dialect accepts). */
export const targetOrReject = (req: http.IncomingMessage, res: http.ServerResponse): Target | undefined => {
  const target = splitTarget(req)
  if (target === undefined) {
    res.writeHead(400, { "Content-Type": "text/plain" })
    res.end("bad request target\n")
  }
  return target
}

/**
 * Sets the server name and the request id the dialect's clients log (Azure's also echo the
 * version and the client's own request id), before any handler writes.
 */
export const stampResponse = (
  req: http.IncomingMessage,
  res: http.ServerResponse,
  server: string,
  azure: boolean,
  requestId: string
): void => {
  res.setHeader("Server", server)
  if (azure) {
    res.setHeader("x-ms-request-id", requestId)
    res.setHeader("x-ms-version", req.headers["x-ms-version"] ?? AZURE_API_VERSION)
    const clientId = req.headers["x-ms-client-request-id"]
    if (typeof clientId === "string") res.setHeader("x-ms-client-request-id", clientId)
  } else {
    res.setHeader("x-amz-request-id", requestId)
    res.setHeader("x-amz-id-2", requestId)
  }
}

/**
 * An S3 request's bucket (empty for the service) and raw key (undefined for a bucket-level
 * request): virtual-host style takes the bucket from the Host and the whole path as the key.
 */
export const s3Address = (
  target: Target,
  segments: ReadonlyArray<string>
): { readonly bucket: string; readonly rawKey: string | undefined } =>
  target.vhostBucket !== undefined
    ? { bucket: target.vhostBucket, rawKey: target.pathname.slice(1) }
    : { bucket: segments[0] ?? "", rawKey: segments.length > 1 ? segments.slice(1).join("/") : undefined }

/**
 * A handler threw: a response already under way can only be cut off; otherwise the client gets
 * its dialect's 500 naming the server that failed.
 */
export const internalError = (ctx: HttpCtx, azure: boolean, server: string, error: unknown): void => {
  if (ctx.res.headersSent || ctx.res.destroyed) {
    ctx.res.destroy()
    return
  }
  const message = `internal error in ${server}: ${(error as Error).message ?? String(error)}`
  if (azure) azureError(ctx, 500, "InternalError", message)
  else s3Error(ctx, 500, "InternalError", message)
}
