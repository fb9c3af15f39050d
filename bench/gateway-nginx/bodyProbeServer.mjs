// A bare node:http server answering Range GETs of one file, for bench/gateway-body-probe.ts: the
// body either read into a reused buffer and written (what a JS body path costs) or sent with the
// native addon's sendfile on the HTTP socket's fd, short sends resumed when epoll says writable.
// Usage: node bodyProbeServer.mjs FILE copy|sendfile ADDON_PATH (prints "port N").
import fs from "node:fs"
import http from "node:http"
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

const server = http.createServer((req, res) => {
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
