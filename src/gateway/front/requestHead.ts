/**
 * HTTP/1.1 request heads read by hand, for the raw front (front/connection.ts). Deliberately
 * narrow: it recognises the plain heads an S3 client sends for GET/HEAD and calls anything else
 * "unusual", because an unusual head is handed to node:http, whose parser answers it (400, 431)
 * exactly as it answers every other connection. So this parser never has to reject a request
 * itself, only to be sure of the ones it accepts. Plain loops over bytes: no regex, no throw.
 */

/** A complete head the front may judge: lower-case header names, values without surrounding blanks. */
export interface RequestHead {
  readonly method: string
  /** The request target exactly as sent (origin form: path and query). */
  readonly target: string
  /** 1 for HTTP/1.1, 0 for HTTP/1.0. */
  readonly minor: number
  readonly headers: Readonly<Record<string, string>>
  /** Bytes the head takes, the blank line included: where the next request starts. */
  readonly length: number
}

/** `partial`: no end of head yet (read more). `unusual`: hand the connection to node:http. */
export type HeadScan = RequestHead | "partial" | "unusual"

const CR = 13
const LF = 10
const SP = 32
const HT = 9
const COLON = 58

/** RFC 9110 tchar: what a header name may be made of. */
const TOKEN = new Uint8Array(128)
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TOKEN[c.charCodeAt(0)] = 1

const isBlank = (c: number) => c === SP || c === HT

/**
 * The head at the start of `buf[0, end)`, at most `limit` bytes long. A head that is longer, uses
 * bare LF line ends, folded lines, control or non-ASCII bytes, repeats a header, or is not
 * `METHOD SP target SP HTTP/1.x` is "unusual".
 */
export const scanHead = (buf: Uint8Array, end: number, limit: number): HeadScan => {
  const n = Math.min(end, buf.length)
  // The end of the head: the first CRLFCRLF. Every LF must follow a CR; every CR precede an LF.
  let stop = -1
  for (let i = 0; i < n; i++) {
    const c = buf[i]!
    if (c === LF) {
      if (i === 0 || buf[i - 1] !== CR) return "unusual"
      if (i >= 3 && buf[i - 2] === LF && buf[i - 3] === CR) {
        stop = i + 1
        break
      }
    } else if (c === CR) {
      if (i + 1 < n && buf[i + 1] !== LF) return "unusual"
    } else if ((c < SP && c !== HT) || c >= 127) return "unusual"
    if (i >= limit) return "unusual"
  }
  if (stop < 0) return n > limit ? "unusual" : "partial"
  if (stop > limit) return "unusual"
  return parseLines(buf, stop)
}

const ascii = (buf: Uint8Array, from: number, to: number): string => {
  let s = ""
  for (let i = from; i < to; i++) s += String.fromCharCode(buf[i]!)
  return s
}

/** The lines of a head known to end at `stop` with CRLFCRLF and to hold only CRLF line ends. */
const parseLines = (buf: Uint8Array, stop: number): HeadScan => {
  // Request line: METHOD SP target SP HTTP/1.x CRLF
  let i = 0
  while (i < stop && buf[i]! >= 65 && buf[i]! <= 90) i++
  if (i === 0 || buf[i] !== SP) return "unusual"
  const method = ascii(buf, 0, i)
  const targetAt = ++i
  while (i < stop && buf[i] !== SP && buf[i] !== CR && buf[i] !== HT) i++
  if (i === targetAt || buf[i] !== SP) return "unusual"
  const target = ascii(buf, targetAt, i)
  i++
  // "HTTP/1.1\r\n"
  if (i + 10 > stop) return "unusual"
  if (ascii(buf, i, i + 7) !== "HTTP/1.") return "unusual"
  const d = buf[i + 7]!
  if ((d !== 48 && d !== 49) || buf[i + 8] !== CR) return "unusual"
  const minor = d - 48
  i += 10
  // No prototype: a header named __proto__ is just a header.
  const headers = Object.create(null) as Record<string, string>
  // Header lines until the empty line at stop - 2.
  while (i < stop - 2) {
    const lineAt = i
    if (isBlank(buf[i]!)) return "unusual" // obsolete line folding
    while (i < stop && buf[i] !== COLON && buf[i] !== CR) {
      const c = buf[i]!
      if (c >= 128 || TOKEN[c] !== 1) return "unusual"
      i++
    }
    if (i === lineAt || buf[i] !== COLON) return "unusual"
    const name = ascii(buf, lineAt, i).toLowerCase()
    i++
    while (isBlank(buf[i]!)) i++
    const valueAt = i
    while (buf[i] !== CR) i++
    let valueEnd = i
    while (valueEnd > valueAt && isBlank(buf[valueEnd - 1]!)) valueEnd--
    if (headers[name] !== undefined) return "unusual"
    headers[name] = ascii(buf, valueAt, valueEnd)
    i += 2
  }
  return { method, target, minor, headers, length: stop }
}
