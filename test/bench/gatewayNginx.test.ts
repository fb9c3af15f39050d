import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { plainPlanner, VerifyingConnection } from "../../bench/gateway-nginx/client.js"
import { findNginx, nginxCommand } from "../../bench/gateway-nginx/nginx.js"

const SIZE = 1 << 20
const object = Buffer.alloc(SIZE)
for (let i = 0; i < SIZE; i++) object[i] = (i * 31 + (i >>> 8)) & 0xff

/**
 * A raw HTTP server that answers each request's Range from `object`, in small writes so heads
 * and bodies straddle the client's reads; `corrupt` flips one byte of the next body.
 */
let corrupt = -1
let status = 206
const server = net.createServer((socket) => {
  let pending = ""
  // The client hangs up on a body it rejected while it is still being written.
  socket.on("error", () => {})
  socket.on("data", (d) => {
    pending += d.toString("latin1")
    for (let end = pending.indexOf("\r\n\r\n"); end >= 0; end = pending.indexOf("\r\n\r\n")) {
      const head = pending.slice(0, end)
      pending = pending.slice(end + 4)
      const m = /range: bytes=(\d+)-(\d+)/i.exec(head)
      const [from, to] = m === null ? [0, SIZE - 1] : [Number(m[1]), Number(m[2])]
      const body = Buffer.from(object.subarray(from, to + 1))
      if (corrupt >= 0) {
        body[corrupt] = body[corrupt]! ^ 1
        corrupt = -1
      }
      const reply = Buffer.concat([Buffer.from(`HTTP/1.1 ${m === null ? 200 : status} X\r\nContent-Length: ${body.length}\r\n\r\n`), body])
      for (let p = 0; p < reply.length; p += 7919) socket.write(reply.subarray(p, p + 7919))
    }
  })
})
let port = 0

beforeAll(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => ((port = (server.address() as net.AddressInfo).port), resolve()))))
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

describe("gateway-nginx-bench client", () => {
  it("accepts right bytes of ranges and of the whole object over one keep-alive connection", async () => {
    const c = new VerifyingConnection("127.0.0.1", port, object)
    const plan = plainPlanner(SIZE)
    try {
      for (const [off, len] of [[0, 65536], [65536 * 3, 65536], [0, SIZE], [SIZE - 10, 10]] as const) await c.get(plan(off, len), "x")
    } finally {
      c.close()
    }
  })

  it("rejects one flipped byte, naming where", async () => {
    const c = new VerifyingConnection("127.0.0.1", port, object)
    corrupt = 40_000
    try {
      await expect(c.get(plainPlanner(SIZE)(65536, 65536), "x")).rejects.toThrow(/wrong bytes in \[\d+, \d+\) of a 65536-byte read at 65536/)
    } finally {
      c.close()
    }
  })

  it("rejects a status other than the one the request calls for", async () => {
    const c = new VerifyingConnection("127.0.0.1", port, object)
    status = 200
    try {
      await expect(c.get(plainPlanner(SIZE)(0, 1024), "x")).rejects.toThrow(/HTTP 200/)
    } finally {
      status = 206
      c.close()
    }
  })
})

describe("nginx arm config", () => {
  const nginx = findNginx()
  it.skipIf("missing" in nginx)("is accepted by nginx -t", () => {
    if ("missing" in nginx) return
    const dir = mkdtempSync(join(tmpdir(), "nginx-conf-"))
    try {
      const argv = nginxCommand(nginx.bin, dir, 1, 2)
      const r = spawnSync(argv[0]!, [...argv.slice(1), "-t"], { encoding: "utf8" })
      expect(r.stderr).toMatch(/test is successful/)
      expect(r.status).toBe(0)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
