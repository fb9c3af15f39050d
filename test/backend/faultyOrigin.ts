import { randomBytes } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"

/** What the origin does with one request, in arrival order; after the plan runs out, "ok". */
export type Fault = "ok" | "503" | "429" | "500" | "404" | "403" | "reset" | "hang" | "partial" | "stall"

export interface SeenRequest {
  readonly method: string
  readonly url: string
  readonly range: string | undefined
  readonly ifMatch: string | undefined
}

/**
 * A raw node:http origin that speaks just enough S3 and Azure (HEAD, ranged GET, PUT) over
 * one object, and misbehaves per request as scripted. It counts every attempt.
 */
export const faultyOrigin = Effect.acquireRelease(
  Effect.async<FaultyOrigin>((resume) => {
    const origin = new FaultyOrigin()
    origin.server.listen(0, "127.0.0.1", () => resume(Effect.succeed(origin)))
  }),
  (origin) => Effect.promise(() => origin.close())
)

export class FaultyOrigin {
  content: Buffer = randomBytes(64 * 1024)
  etag = "v1"
  plan: Array<Fault> = []
  readonly seen: Array<SeenRequest> = []
  /** Called after each request is answered, e.g. to replace the object between attempts. */
  afterRequest: (index: number) => void = () => {}
  private readonly hanging = new Set<http.ServerResponse>()
  readonly server = http.createServer((req, res) => this.handle(req, res))

  get url() {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  reset(plan: Array<Fault>) {
    this.plan = plan
    this.seen.length = 0
    this.content = randomBytes(64 * 1024)
    this.etag = "v1"
    this.afterRequest = () => {}
  }

  close() {
    for (const res of this.hanging) res.destroy()
    this.server.closeAllConnections()
    return new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const range = (req.headers["x-ms-range"] ?? req.headers.range) as string | undefined
    const ifMatch = req.headers["if-match"] as string | undefined
    const index = this.seen.length
    this.seen.push({ method: req.method ?? "", url: req.url ?? "", range, ifMatch })
    const fault = this.plan.shift() ?? "ok"
    const body: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => body.push(chunk))
    req.on("end", () => {
      this.answer(fault, req, res, range, ifMatch, Buffer.concat(body))
      this.afterRequest(index)
    })
  }

  private answer(fault: Fault, req: http.IncomingMessage, res: http.ServerResponse, range: string | undefined, ifMatch: string | undefined, body: Buffer) {
    const error = (status: number, code: string) => {
      res.writeHead(status, { "content-type": "application/xml", "x-ms-error-code": code })
      res.end(req.method === "HEAD" ? undefined : `<?xml version="1.0"?><Error><Code>${code}</Code><Message>scripted</Message></Error>`)
    }
    switch (fault) {
      case "503":
        return error(503, "SlowDown")
      case "429":
        return error(429, "TooManyRequests")
      case "500":
        return error(500, "InternalError")
      case "404":
        return error(404, "NoSuchKey")
      case "403":
        return error(403, "AccessDenied")
      case "reset":
        return req.socket.destroy()
      case "hang":
        this.hanging.add(res)
        return
    }
    const etag = `"${this.etag}"`
    if (req.method === "PUT") {
      this.content = body
      this.etag = `v${Date.now()}`
      res.writeHead(201, { etag: `"${this.etag}"` })
      return res.end()
    }
    if (ifMatch !== undefined && ifMatch !== etag) return error(412, "PreconditionFailed")
    const size = this.content.length
    if (req.method === "HEAD") {
      res.writeHead(200, { "content-length": size, etag, "last-modified": new Date(0).toUTCString() })
      return res.end()
    }
    const match = /^bytes=(\d+)-(\d+)$/.exec(range ?? "")
    const start = match ? Number(match[1]) : 0
    if (start >= size) {
      res.writeHead(416, { "content-range": `bytes */${size}`, "content-type": "application/xml" })
      return res.end(`<Error><Code>InvalidRange</Code><Message>scripted</Message></Error>`)
    }
    const end = match ? Math.min(Number(match[2]), size - 1) : size - 1
    const slice = this.content.subarray(start, end + 1)
    res.writeHead(206, { "content-length": slice.length, "content-range": `bytes ${start}-${end}/${size}`, etag })
    if (fault === "partial" || fault === "stall") {
      res.write(slice.subarray(0, slice.length >> 1), () => {
        if (fault === "partial") setTimeout(() => res.destroy(), 20)
        else this.hanging.add(res)
      })
      return
    }
    res.end(slice)
  }
}
