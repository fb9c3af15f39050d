// A bare node:http server answering Range GETs of one file, for bench/gateway-body-probe.ts: the
// body either read into a reused buffer and written (what a JS body path costs) or sent with the
// native addon's sendfile on the HTTP socket's fd, short sends resumed when epoll says writable.
// Mode raw: no node:http at all, a net.Server that finds the request head's end and its Range by
// hand and sends a pre-built head plus the range with one sendHeaderFile (the floor of a hand-made
// GET fast path in front of node:http).
// Usage: node bodyProbeServer.mjs FILE copy|sendfile|raw ADDON_PATH (prints "port N").
import fs from "node:fs"
import http from "node:http"
import net from "node:net"
import { createRequire } from "node:module"

const [file, mode, addonPath] = process.argv.slice(2)
const addon = createRequire(import.meta.url)(addonPath)
const fd = fs.openSync(file, "r")
const size = fs.fstatSync(fd).size
const buf = Buffer.allocUnsafe(size)
const waiting = new Map()
const ready = new Int32Array(1024)
addon.init(ready, (count) => {
  for (let i = 0; i < count; i++) waiting.get(ready[2 * i])?.()
})

const rangeOf = (head) => {
  const i = head.indexOf("\r\nrange: bytes=")
  if (i < 0) return [0, size - 1, false]
  const dash = head.indexOf("-", i + 15)
  const eol = head.indexOf("\r\n", dash)
  return [Number(head.slice(i + 15, dash)), Number(head.slice(dash + 1, eol)), true]
}

const rawConnection = (sock) => {
  let pending = ""
  let busy = false
  const sfd = sock._handle.fd
  const next = () => {
    while (!busy) {
      const endOfHead = pending.indexOf("\r\n\r\n")
      if (endOfHead < 0) return
      const head = pending.slice(0, endOfHead + 2).toLowerCase()
      pending = pending.slice(endOfHead + 4)
      const [from, to, ranged] = rangeOf(head)
      const len = to - from + 1
      const out = Buffer.from(
        `HTTP/1.1 ${ranged ? "206 Partial Content" : "200 OK"}\r\ncontent-length: ${len}\r\ncontent-range: bytes ${from}-${to}/${size}\r\netag: "v1"\r\nkeep-alive: timeout=60\r\n\r\n`,
        "latin1"
      )
      let done = 0
      const total = out.length + len
      const go = () => {
        while (done < total) {
          const n = done < out.length
            ? addon.sendHeaderFile(sfd, out, done, out.length - done, fd, from, len)
            : addon.sendHeaderFile(sfd, null, 0, 0, fd, from + done - out.length, total - done)
          if (n < 0) {
            waiting.delete(sfd)
            addon.watch(sfd, 0)
            return sock.destroy()
          }
          done += n
          if (done < total) {
            busy = true
            waiting.set(sfd, go)
            addon.watch(sfd, 2)
            return
          }
        }
        if (busy) {
          busy = false
          waiting.delete(sfd)
          addon.watch(sfd, 0)
          next()
        }
      }
      go()
    }
  }
  sock.setNoDelay(true)
  sock.on("data", (chunk) => {
    pending += chunk.toString("latin1")
    next()
  })
  sock.on("error", () => {})
}

const server = mode === "raw" ? net.createServer(rawConnection) : http.createServer((req, res) => {
  const m = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? "")
  const [from, to] = m ? [Number(m[1]), Number(m[2])] : [0, size - 1]
  const len = to - from + 1
  res.writeHead(m ? 206 : 200, { "content-length": len, "content-range": `bytes ${from}-${to}/${size}`, etag: '"v1"' })
  if (mode === "copy") {
    const n = fs.readSync(fd, buf, 0, len, from)
    res.end(buf.subarray(0, n))
    return
  }
  res.flushHeaders()
  const sock = res.socket
  const sfd = sock._handle.fd
  let done = 0
  const finish = (ok) => {
    waiting.delete(sfd)
    addon.watch(sfd, 0)
    if (ok) res.end()
    else res.destroy()
  }
  const go = () => {
    // The head must be on the wire before the body bytes.
    if (sock.writableLength > 0) return void sock.once("drain", go)
    while (done < len) {
      const n = addon.sendHeaderFile(sfd, null, 0, 0, fd, from + done, len - done)
      if (n < 0) return finish(false)
      done += n
      if (done < len) {
        waiting.set(sfd, go)
        addon.watch(sfd, 2)
        return
      }
    }
    finish(true)
  }
  go()
})
server.keepAliveTimeout = 60_000
server.listen(0, "127.0.0.1", () => console.log(`port ${server.address().port}`))
