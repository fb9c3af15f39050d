/**
 * The S3 response head of a read, rendered as node:http renders the same response in the
 * gateway's node path (server.ts stamps, objectOps.ts `serveRead`): the same headers in the same
 * order and spelling, so a client cannot tell the fronts apart. The part fixed by the object's
 * version (validators, metadata) is rendered once per stat; a request adds its id, length, range,
 * date and connection lines.
 */
import type { ObjectStat } from "../../backend/BackendStore.js"
import { quoteEtag } from "../../backend/etag.js"
import { metadataHeaders, S3_META_PREFIX } from "../../core/userMetadata.js"
import type { ReadValidators } from "../../http/readDecision.js"

const SERVER = "TalonGateway"

/** What one version's heads share: its validators (for the read decision) and their rendered lines. */
export interface VersionTemplate {
  readonly validators: ReadValidators
  /** User metadata, then ETag through Content-Type, each line ending in CRLF. */
  readonly lines: string
}

const templates = new WeakMap<ObjectStat, VersionTemplate>()

/** The version's template, made on the first read of a cached stat (stats are shared until they expire). */
export const templateOf = (stat: ObjectStat): VersionTemplate => {
  let t = templates.get(stat)
  if (t !== undefined) return t
  const lastModified = stat.lastModified ?? new Date(0)
  const validators: ReadValidators = { etag: quoteEtag(stat.version), lastModified, lastModifiedHttp: lastModified.toUTCString(), size: stat.size }
  let lines = ""
  // node's path spreads the metadata before the read's own headers.
  if (stat.metadata !== undefined) {
    const meta = metadataHeaders(stat.metadata, S3_META_PREFIX)
    for (const k in meta) lines += `${k}: ${meta[k]}\r\n`
  }
  lines += `ETag: ${validators.etag}\r\nLast-Modified: ${validators.lastModifiedHttp}\r\nAccept-Ranges: bytes\r\nContent-Type: application/octet-stream\r\n`
  t = { validators, lines }
  templates.set(stat, t)
  return t
}

/** node:http's Date header: the same string for every response within a second. */
export class DateLine {
  #second = -1
  #line = ""
  constructor(private readonly now: () => number) {}
  get line(): string {
    const ms = this.now()
    const second = Math.floor(ms / 1000)
    if (second !== this.#second) {
      this.#second = second
      this.#line = `Date: ${new Date(second * 1000).toUTCString()}\r\n`
    }
    return this.#line
  }
}

export interface HeadLine {
  readonly partial: boolean
  readonly requestId: string
  readonly length: number
  /** `Content-Range`'s value for a partial response. */
  readonly contentRange: string | undefined
  /** Keep-alive (with node's `Keep-Alive: timeout=` line) or close. */
  readonly keepAlive: boolean
}

/** The head's bytes (latin1, as node writes them). */
export const renderHead = (t: VersionTemplate, h: HeadLine, date: string, keepAliveSeconds: number): Buffer => {
  let s = h.partial ? "HTTP/1.1 206 Partial Content\r\n" : "HTTP/1.1 200 OK\r\n"
  s += `Server: ${SERVER}\r\nx-amz-request-id: ${h.requestId}\r\nx-amz-id-2: ${h.requestId}\r\n`
  s += t.lines
  s += `Content-Length: ${h.length}\r\n`
  if (h.contentRange !== undefined) s += `Content-Range: ${h.contentRange}\r\n`
  s += date
  s += h.keepAlive ? `Connection: keep-alive\r\nKeep-Alive: timeout=${keepAliveSeconds}\r\n\r\n` : "Connection: close\r\n\r\n"
  return Buffer.from(s, "latin1")
}
