/**
 * The origin stub's cost per byte sent: one 256 MiB GET (curl to /dev/null) uncapped and with
 * a 100 MB/s cap, against the stub of two source trees started side by side, order swapped
 * each round. CPU is the stub process's own (utime + stime from /proc), so the client's is
 * not counted. `npx tsx bench/origin-probe.ts <treeA> <treeB> [rounds]`.
 */
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as readline from "node:readline"

const [treeA = ".", treeB = ".", roundsArg = "3"] = process.argv.slice(2)
const rounds = Number(roundsArg)
const SIZE = 256 * 1024 * 1024
const root = "/dev/shm/talon-origin-probe"
fs.mkdirSync(path.join(root, "probe"), { recursive: true })
const object = path.join(root, "probe", "big.bin")
if (!fs.existsSync(object) || fs.statSync(object).size !== SIZE) {
  const fd = fs.openSync(object, "w")
  const chunk = Buffer.alloc(4 * 1024 * 1024, 7)
  for (let at = 0; at < SIZE; at += chunk.length) fs.writeSync(fd, chunk, 0, chunk.length, at)
  fs.closeSync(fd)
}
const TICK = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim())
const cpuSeconds = (pid: number) => {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  return (Number(fields[11]) + Number(fields[12])) / TICK
}

const start = async (tree: string) => {
  const child = spawn(process.execPath, ["--import", "tsx", path.resolve("bench/origin-probe/stub.ts"), tree, root], { stdio: ["pipe", "pipe", "inherit"] })
  const line = await new Promise<string>((resolve) => readline.createInterface({ input: child.stdout! }).once("line", resolve))
  return { url: line.trim(), pid: child.pid!, stop: () => child.stdin!.end() }
}

const get = async (stub: { url: string; pid: number }, capBytesPerSec: number) => {
  await fetch(`${stub.url}/_talon/faults`, { method: "POST", body: JSON.stringify({ bandwidthBytesPerSec: capBytesPerSec }) })
  const cpu0 = cpuSeconds(stub.pid)
  const t0 = performance.now()
  execFileSync("curl", ["-sf", "-o", "/dev/null", `${stub.url}/probe/big.bin`])
  const seconds = (performance.now() - t0) / 1000
  const cpu = cpuSeconds(stub.pid) - cpu0
  return { mbps: SIZE / seconds / 1e6, nsPerByte: (cpu * 1e9) / SIZE }
}

const a = await start(treeA)
const b = await start(treeB)
// Warm both (JIT, page cache) before measuring.
await get(a, 0)
await get(b, 0)
const results: Record<string, Array<{ mbps: number; nsPerByte: number }>> = {}
for (let round = 0; round < rounds; round++) {
  for (const cap of [0, 100_000_000]) {
    const order = round % 2 === 0 ? [["A", a], ["B", b]] as const : [["B", b], ["A", a]] as const
    for (const [name, stub] of order) {
      const r = await get(stub, cap)
      ;(results[`${name} cap=${cap}`] ??= []).push(r)
      console.log(`round ${round} ${name} cap=${cap}: ${r.mbps.toFixed(0)} MB/s, ${r.nsPerByte.toFixed(2)} ns/B`)
    }
  }
}
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!
for (const cap of [0, 100_000_000]) {
  const ra = results[`A cap=${cap}`]!
  const rb = results[`B cap=${cap}`]!
  const [ma, mb] = [median(ra.map((r) => r.mbps)), median(rb.map((r) => r.mbps))]
  const [na, nb] = [median(ra.map((r) => r.nsPerByte)), median(rb.map((r) => r.nsPerByte))]
  console.log(`cap=${cap}: A ${ma.toFixed(0)} MB/s ${na.toFixed(2)} ns/B | B ${mb.toFixed(0)} MB/s ${nb.toFixed(2)} ns/B | B/A rate ${(mb / ma).toFixed(2)} cpu ${(nb / na).toFixed(2)}`)
}
a.stop()
b.stop()
