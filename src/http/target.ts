/**
 * Which REST dialect a request speaks, and its path, query and virtual-host bucket:
 *  - Azure Blob if the request carries any `x-ms-*` header (every Azure SDK request sends
 *    `x-ms-version`) or an Azure query parameter (`restype`, `comp`);
 *  - otherwise S3: virtual-host style when the Host is `<bucket>.localhost[:port]` (path = key),
 *    path style `/<bucket>/<key>` for any other host (IPs, `localhost`).
 */
import type * as http from "node:http"

const VHOST_SUFFIX = ".localhost"

export interface Target {
  readonly protocol: "s3" | "azure"
  readonly pathname: string
  readonly query: URLSearchParams
  /** S3 only: the bucket named by a virtual-host Host header. */
  readonly vhostBucket: string | undefined
}

/** Protocol, path and query of a request, by the routing rule above. */
export const splitTarget = (req: http.IncomingMessage): Target | undefined => {
  let raw = req.url ?? "/"
  // Absolute-form request targets (proxies): drop scheme and authority without letting
  // a URL parser normalise away `..` segments.
  const abs = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?#]*/.exec(raw)
  if (abs) raw = raw.slice(abs[0].length) || "/"
  if (!raw.startsWith("/")) return undefined
  const q = raw.indexOf("?")
  const pathname = q < 0 ? raw : raw.slice(0, q)
  const query = new URLSearchParams(q < 0 ? "" : raw.slice(q + 1))
  // (A loop rather than Object.keys(…).some: no array per request.)
  let azure = query.has("restype") || query.has("comp")
  for (const h in req.headers) {
    if (azure) break
    azure = h.startsWith("x-ms-")
  }
  let vhostBucket: string | undefined
  if (!azure) {
    const host = (req.headers.host ?? "").replace(/:\d+$/, "").toLowerCase()
    if (host.endsWith(VHOST_SUFFIX) && host.length > VHOST_SUFFIX.length) vhostBucket = host.slice(0, -VHOST_SUFFIX.length)
  }
  return { protocol: azure ? "azure" : "s3", pathname, query, vhostBucket }
}
