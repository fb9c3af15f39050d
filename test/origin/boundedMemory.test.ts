/**
 * The stub serves a 1 GiB object to a deliberately slow reader with bounded memory:
 * the server runs as a child process (the OriginStub layer alone) so its RSS can
 * be sampled from /proc/<pid>/status while the reader crawls, then drains.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn, type ChildProcess } from "node:child_process"
import * as fs from "node:fs/promises"
import * as net from "node:net"
import * as path from "node:path"
import { sampleBytes } from "../../src/origin/seed.js"
import { sameBytes } from "../support/checks.js"
import { sparseObject } from "../support/sparseObject.js"
import { rawEffect, tempDir } from "./fixtures/testOrigin.js"

const GiB = 1024 * 1024 * 1024
const HUGE = sparseObject(GiB, [0, 512 * 1024 * 1024, GiB - 65536], 65536)

const rssBytes = async (pid: number): Promise<number> => {
  const status = await fs.readFile(`/proc/${pid}/status`, "utf8")
  const kb = /VmRSS:\s+(\d+)\s+kB/.exec(status)
  if (!kb) throw new Error(`no VmRSS in /proc/${pid}/status`)
  return Number(kb[1]) * 1024
}

/** Starts the stub on a free port; resolves with its URL once it listens. Killed on scope close. */
const startChild = (root: string) =>
  Effect.acquireRelease(
    Effect.async<{ child: ChildProcess; port: number }, Error>((resume) => {
      const child = spawn(process.execPath, ["--import", "tsx", "test/origin/fixtures/serveStub.ts", root], {
        stdio: ["ignore", "pipe", "pipe"]
      })
      let out = ""
      child.stdout!.on("data", (c: Buffer) => {
        out += c.toString()
        const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out)
        if (m) resume(Effect.succeed({ child, port: Number(m[1]) }))
      })
      child.stderr!.on("data", (c: Buffer) => (out += c.toString()))
      child.on("exit", (code) => resume(Effect.fail(new Error(`origin child exited (${code}) before listening:\n${out}`))))
    }),
    ({ child }) =>
      Effect.promise(
        () =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null) return resolve()
            child.once("exit", () => resolve())
            child.kill("SIGTERM")
            setTimeout(() => child.kill("SIGKILL"), 3000).unref()
          })
      )
  )

it.scopedLive(
  "serves 1 GiB to a slow reader with RSS growth under 64 MiB",
  () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const root = path.join(dir, "root")
      const file = path.join(root, "bigdata", "huge.bin")
      yield* Effect.promise(() => HUGE.write(file))
      const t0 = performance.now()
      const { child, port } = yield* startChild(root)
      const startupMs = performance.now() - t0
      // Warm the read path (JIT, lazy module state) so the baseline excludes one-time costs.
      const warm = yield* rawEffect(`http://127.0.0.1:${port}`, "GET", "/bigdata/huge.bin", { Range: "bytes=0-65535" })
      expect(sameBytes(warm.body, sampleBytes(0, 65536))).toBe("equal")
      const t1 = performance.now()
      const pid = child.pid!

      const result = yield* Effect.promise(
        () =>
          new Promise<{ baseline: number; peak: number; slowBytes: number; body: number; regionsOk: boolean }>((resolve, reject) => {
            const samples: number[] = []
            let baseline = 0
            let phase: "slow" | "fast" = "slow"
            let headerDone = false
            let head = Buffer.alloc(0)
            let body = 0
            let slowBytes = 0
            let regionsOk = true
            const check = (chunk: Buffer, at: number) => {
              if (!HUGE.matches(chunk, at)) regionsOk = false
            }
            const sampler = setInterval(() => {
              rssBytes(pid).then((r) => samples.push(r), reject)
            }, 100)
            const finish = (err?: Error) => {
              clearInterval(sampler)
              socket.destroy()
              if (err) reject(err)
              else resolve({ baseline, peak: Math.max(...samples), slowBytes, body, regionsOk })
            }
            const socket = net.connect(port, "127.0.0.1")
            socket.on("error", finish)
            socket.on("connect", async () => {
              baseline = await rssBytes(pid)
              socket.write(`GET /bigdata/huge.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)
              // Slow phase: one read every 50 ms for 3 s, then drain as fast as possible.
              setTimeout(() => {
                phase = "fast"
                slowBytes = body
                socket.resume()
              }, 3000)
            })
            socket.on("data", (chunk: Buffer) => {
              if (!headerDone) {
                head = Buffer.concat([head, chunk])
                const end = head.indexOf("\r\n\r\n")
                if (end < 0) return
                headerDone = true
                const status = head.subarray(0, end).toString()
                if (!/^HTTP\/1\.1 200/.test(status) || !status.includes(`Content-Length: ${GiB}`)) {
                  return finish(new Error(`unexpected response head: ${status}`))
                }
                chunk = head.subarray(end + 4)
              }
              check(chunk, body)
              body += chunk.length
              if (phase === "slow") {
                socket.pause()
                setTimeout(() => phase === "slow" && socket.resume(), 50)
              }
              if (body === GiB) finish()
            })
            socket.on("end", () => (body === GiB ? finish() : finish(new Error(`connection ended after ${body} body bytes`))))
          })
      )
      const transferMs = performance.now() - t1
      const growthMiB = (result.peak - result.baseline) / (1024 * 1024)
      console.log(
        `origin child RSS baseline ${(result.baseline / 2 ** 20).toFixed(1)} MiB, peak ${(result.peak / 2 ** 20).toFixed(1)} MiB, growth ${growthMiB.toFixed(1)} MiB; slow phase read ${(result.slowBytes / 2 ** 20).toFixed(1)} MiB; child start ${startupMs.toFixed(0)} ms, transfer ${transferMs.toFixed(0)} ms`
      )
      // The reader really was slow: far less than the object crossed during the slow phase.
      expect(result.slowBytes).toBeLessThan(GiB / 8)
      expect(result.body).toBe(GiB)
      expect(result.regionsOk).toBe(true)
      expect(growthMiB).toBeLessThan(64)
    }),
  60_000
)
