/**
 * Control requests per second through the coordinator's listener alone (every request
 * answered with an Ack): `connections` clients each keep `depth` Heartbeats in flight for
 * `seconds`, against the listeners of two source trees started side by side, order swapped
 * each round. CPU is the listener process's (utime + stime from /proc).
 * `npx tsx bench/control-probe.ts <treeA> <treeB> [rounds] [seconds]`.
 */
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import * as readline from "node:readline"
import { Heartbeat } from "../src/protocol/control.js"
import { encodeControlFrame, FrameDecoder } from "../src/protocol/index.js"

const [treeA = ".", treeB = ".", roundsArg = "3", secondsArg = "3"] = process.argv.slice(2)
const rounds = Number(roundsArg)
const seconds = Number(secondsArg)
const CONNECTIONS = 8
const DEPTH = 32
const TICK = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim())
const cpuSeconds = (pid: number) => {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  return (Number(fields[11]) + Number(fields[12])) / TICK
}

const start = async (tree: string) => {
  const child = spawn(process.execPath, [...(process.env.PROBE_PROF ? ["--cpu-prof", "--cpu-prof-dir=" + process.env.PROBE_PROF] : []), "--import", "tsx", path.resolve("bench/control-probe/server.ts"), tree], { stdio: ["pipe", "pipe", "inherit"] })
  const line = await new Promise<string>((resolve) => readline.createInterface({ input: child.stdout! }).once("line", resolve))
  return { port: Number(line.trim()), pid: child.pid!, stop: () => child.stdin!.end() }
}

const request = encodeControlFrame(1, new Heartbeat({ node: "probe-worker", blockCount: 0 }))

/** One connection keeping DEPTH requests in flight until `until`; resolves with replies counted. */
const client = (port: number, until: number) =>
  new Promise<number>((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1")
    socket.setNoDelay(true)
    const decoder = new FrameDecoder({ control: 1 << 20, get: 4096, getRange: 4096, put: 4096, ping: 4096, delete: 4096 })
    let replies = 0
    socket.once("connect", () => socket.write(Buffer.concat(Array.from({ length: DEPTH }, () => request))))
    socket.on("data", (chunk: Buffer) => {
      decoder.push(chunk)
      let got = 0
      while (decoder.next() !== undefined) got++
      replies += got
      if (performance.now() < until) socket.write(Buffer.concat(Array.from({ length: got }, () => request)))
      else if (got > 0) {
        socket.destroy()
        resolve(replies)
      }
    })
    socket.on("error", reject)
  })

const run = async (server: { port: number; pid: number }) => {
  const cpu0 = cpuSeconds(server.pid)
  const t0 = performance.now()
  const counts = await Promise.all(Array.from({ length: CONNECTIONS }, () => client(server.port, t0 + seconds * 1000)))
  const elapsed = (performance.now() - t0) / 1000
  const total = counts.reduce((a, b) => a + b, 0)
  return { rps: total / elapsed, usPerRequest: ((cpuSeconds(server.pid) - cpu0) * 1e6) / total }
}

const a = await start(treeA)
const b = await start(treeB)
await run(a)
await run(b)
const results: Record<string, Array<{ rps: number; usPerRequest: number }>> = { A: [], B: [] }
for (let round = 0; round < rounds; round++) {
  const order = round % 2 === 0 ? ([["A", a], ["B", b]] as const) : ([["B", b], ["A", a]] as const)
  for (const [name, server] of order) {
    const r = await run(server)
    results[name]!.push(r)
    console.log(`round ${round} ${name}: ${r.rps.toFixed(0)} req/s, ${r.usPerRequest.toFixed(1)} µs CPU/request`)
  }
}
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!
const [ra, rb] = [median(results.A!.map((r) => r.rps)), median(results.B!.map((r) => r.rps))]
const [ca, cb] = [median(results.A!.map((r) => r.usPerRequest)), median(results.B!.map((r) => r.usPerRequest))]
console.log(`A ${ra.toFixed(0)} req/s ${ca.toFixed(1)} µs | B ${rb.toFixed(0)} req/s ${cb.toFixed(1)} µs | B/A rps ${(rb / ra).toFixed(2)} cpu ${(cb / ca).toFixed(2)}`)
a.stop()
b.stop()
