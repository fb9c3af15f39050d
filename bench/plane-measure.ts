/**
 * Per-call cost of the native data plane's kernel calls, and CPU per 64 KiB response end to end.
 *
 *   npx tsx bench/plane-measure.ts     (pin it for steadier numbers: taskset -c 0 npx tsx ...)
 *
 * Why an N-API addon and not an FFI: this script once also drove the same libc calls through
 * koffi 3.3.4 (prebuilt FFI), rounds paired A B B A on this 2-core machine under load. CPU per
 * call on the JS side (user time; the syscall's system time was the same for both):
 *   send → EAGAIN:           addon 269–405 ns   koffi 470–528 ns
 *   sendfile 64 KiB → null:  addon 161–440 ns   koffi 387–560 ns
 * and a response costs the addon ONE crossing (send MSG_MORE + sendfile in C) against two
 * crossings plus two errno reads through the FFI. The FFI also cannot put the writability wait
 * on the event loop (the addon watches its epoll fd with a uv_poll); it would need a thread-pool
 * call per wait. So the addon stayed and koffi was removed.
 *
 * Microbenchmarks (CPU ns per call, split user/system, median of rounds):
 *   send-eagain   send(16 B) on a socket whose buffer is full: the JS->C crossing + a syscall
 *                 that does almost no work (every call returns EAGAIN)
 *   sendfile-null sendfile(64 KiB) from a page-cached file to /dev/null: crossing + sendfile setup
 * End to end: header + 64 KiB ranges to a draining reader process over loopback through the
 * real NativeWriter; CPU (user+sys) of this process per response.
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { makeNativePlane } from "../src/worker/plane/Native.js"
import { loadNativeAddon } from "../src/worker/plane/NativeAddon.js"
import { median } from "../src/loadgen/quantile.js"
import { Effect } from "effect"
import { runDriver } from "./lib/driver.js"
import * as Proc from "./lib/proc.js"
import { Connection } from "../src/worker/server/SocketServer.js"

const ROUNDS = 7
const CALLS = 200_000


/**
 * CPU time per call, split into user (JS, the crossing into C, argument conversion) and system
 * (the syscall). CPU time rather than wall time: the machine is shared, and a wall clock would
 * count other processes' time slices.
 */
const time = (calls: number, body: (i: number) => void): { userNs: number; sysNs: number } => {
  const user: Array<number> = []
  const sys: Array<number> = []
  for (let r = 0; r < ROUNDS; r++) {
    const c0 = process.cpuUsage()
    for (let i = 0; i < calls; i++) body(i)
    const c = process.cpuUsage(c0)
    user.push((c.user * 1000) / calls)
    sys.push((c.system * 1000) / calls)
  }
  return { userNs: +median(user).toFixed(1), sysNs: +median(sys).toFixed(1) }
}

interface Calls {
  readonly name: string
  /** send 16 bytes (MSG_DONTWAIT|MSG_NOSIGNAL); returns bytes or -errno */
  readonly send: (fd: number, buf: Uint8Array, len: number) => number
  /** sendfile(out, in, off, len); returns bytes or -errno */
  readonly sendfile: (out: number, inFd: number, off: number, len: number) => number
}

const addonCalls = (): Calls => {
  const load = loadNativeAddon()
  if (load._tag !== "Loaded") throw new Error(load.reason)
  const a = load.addon
  return {
    name: "n-api addon",
    send: (fd, buf, len) => a.sendHeaderFile(fd, buf, 0, len, -1, 0, 0),
    // hdrLen 0: the addon goes straight to sendfile(2)
    sendfile: (out, inFd, off, len) => a.sendHeaderFile(out, null, 0, 0, inFd, off, len)
  }
}

/** A connected loopback socket pair whose client never reads; the server side's buffer is filled. */
const fullSocket = async (): Promise<{ fd: number; close: () => void }> => {
  const server = net.createServer()
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  const port = (server.address() as net.AddressInfo).port
  const accepted = new Promise<net.Socket>((r) => server.once("connection", r))
  const client = net.connect(port, "127.0.0.1")
  client.pause()
  const socket = await accepted
  const fd = new Connection(socket).fd!
  const load = loadNativeAddon()
  if (load._tag !== "Loaded") throw new Error(load.reason)
  load.addon.setSendBuffer(fd, 4096)
  const fill = Buffer.alloc(65536)
  // The receiver's window opens in steps: fill until a whole pass after a pause sends nothing.
  for (let sent = 1; sent > 0; ) {
    sent = 0
    for (let n; (n = load.addon.sendHeaderFile(fd, fill, 0, 1, -1, 0, 0)) > 0; ) sent += n
    await new Promise((r) => setTimeout(r, 50))
  }
  return {
    fd,
    close: () => {
      client.destroy()
      socket.destroy()
      server.close()
    }
  }
}

const micro = async (calls: Calls, file: { fd: number; size: number }) => {
  const full = await fullSocket()
  const hdr = new Uint8Array(16)
  let accepted = 0
  const sendNs = time(CALLS, () => {
    const r = calls.send(full.fd, hdr, 16)
    if (r > 0) accepted++ // the peer's window opened a little: a rare real send
    else if (r !== -11) throw new Error(`expected -EAGAIN, got ${r}`)
  })
  if (accepted > CALLS / 100) throw new Error(`${accepted} sends were accepted: the socket was not full`)
  full.close()
  const devnull = fs.openSync("/dev/null", "w")
  const slots = file.size / 65536
  const sendfileNs = time(CALLS / 4, (i) => {
    const r = calls.sendfile(devnull, file.fd, (i % slots) * 65536, 65536)
    if (r !== 65536) throw new Error(`sendfile to /dev/null returned ${r}`)
  })
  fs.closeSync(devnull)
  return { sendNs, sendfileNs }
}

/** Header + 64 KiB responses through the real native writer to a draining child process (stopped with the scope). */
const endToEnd = (file: { fd: number; size: number }, responses: number) =>
  Effect.gen(function* () {
    const plane = makeNativePlane()
    if (plane.name !== "native") return yield* Effect.dieMessage(plane.reason)
    const server = yield* Effect.acquireRelease(
      Effect.promise(() => new Promise<net.Server>((r) => { const srv = net.createServer(); srv.listen(0, "127.0.0.1", () => r(srv)) })),
      (srv) => Effect.sync(() => srv.close())
    )
    const port = (server.address() as net.AddressInfo).port
    const accepted = new Promise<net.Socket>((r) => server.once("connection", r))
    const total = responses * (16 + 65536)
    const reader = yield* Proc.spawn("reader", [
      process.execPath,
      "-e",
      `let n=0;const s=require("net").connect(${port},"127.0.0.1");s.on("data",b=>{n+=b.length;if(n>=${total})s.destroy()})`
    ])
    const socket = yield* Effect.promise(() => accepted)
    const result = yield* Effect.promise(() => drive(plane, socket, file, responses))
    yield* reader.exitCode
    socket.destroy()
    return result
  })

const drive = async (plane: ReturnType<typeof makeNativePlane>, socket: net.Socket, file: { fd: number; size: number }, responses: number) => {
  const writer = plane.attach(new Connection(socket))
  const header = new Uint8Array(16)
  const slots = file.size / 65536
  const depth = 16
  const load = loadNativeAddon()
  if (load._tag !== "Loaded") throw new Error(load.reason)
  const k0 = load.addon.counters()
  const cpu0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  let next = 0
  const lane = async () => {
    while (next < responses) {
      const i = next++
      await writer.writeFile(header, [{ fd: file.fd, offset: (i % slots) * 65536, length: 65536 }])
    }
  }
  await Promise.all(Array.from({ length: depth }, lane))
  const cpu = process.cpuUsage(cpu0)
  const wall = Number(process.hrtime.bigint() - t0) / 1e9
  const k1 = load.addon.counters()
  return {
    responses,
    rps: Math.round(responses / wall),
    cpuUsPerResponse: +((cpu.user + cpu.system) / responses).toFixed(2),
    kernelShare: +(cpu.system / (cpu.user + cpu.system)).toFixed(3),
    syscallsPerResponse: +((k1.sendCalls + k1.sendfileCalls - k0.sendCalls - k0.sendfileCalls) / responses).toFixed(2),
    eagainPerResponse: +((k1.eagain - k0.eagain) / responses).toFixed(3)
  }
}

const main = Effect.gen(function* () {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "talon-plane-measure-"))),
    (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
  )
  const p = path.join(dir, "data")
  const size = 64 * 65536
  fs.writeFileSync(p, crypto.randomBytes(size))
  const file = yield* Effect.acquireRelease(
    Effect.sync(() => ({ fd: fs.openSync(p, "r"), size })),
    (f) => Effect.sync(() => fs.closeSync(f.fd))
  )
  const results: Record<string, unknown> = {}
  results["n-api addon"] = yield* Effect.promise(() => micro(addonCalls(), file))
  results["end-to-end (n-api addon, depth 16)"] = yield* endToEnd(file, 100_000)
  console.log(JSON.stringify(results, null, 2))
})

runDriver(main)
