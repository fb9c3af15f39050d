/**
 * The FUSE binding's own cost: sequential 1 MiB reads (`dd bs=1M`) of a file served from memory
 * by the in-test filesystem (bench/kit/memoryFs.ts), so everything measured is the
 * kernel round trip, the binding and the JS dispatch, not a cache. JSON Lines on stdout (and
 * `--out FILE`); not a CI gate. Needs /dev/fuse and the built talon_fuse addon.
 *
 *   npx tsx bench/fuse-binding.ts [--size-mib 256] [--rounds 3] [--out FILE]
 *
 * Arms, each its own mount, run in paired rounds whose order flips every round:
 *   ra1m     page cache, reads up to 1 MiB, bdi readahead raised to 1 MiB (the binding's default)
 *   ra128k   page cache, reads up to 1 MiB, the kernel's 128 KiB readahead left alone
 *   ra8m     as ra1m with 8 MiB readahead (`talon mount`'s default)
 *   direct   FOPEN_DIRECT_IO: every dd read is one FUSE read of 1 MiB, no page cache
 *   direct4k FOPEN_DIRECT_IO with 4 KiB reads of the first 32 MiB: the per-request round trip
 *   tmpfs    baseline: the same bytes from a tmpfs file already in memory (no FUSE)
 * Every pass opens the file anew with keep-cache off, so the page-cache arms read through FUSE
 * each time. Per arm: MiB/s, µs per MiB, CPU per MiB of the serving process (receive thread and
 * JS together) and of dd, FUSE reads and their mean size.
 */
import { execFile } from "node:child_process"
import { randomFillSync } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { loadFuseBinding, type NativeFuseSession } from "../src/mount/fuse/native.js"
import { MemoryFs } from "./kit/memoryFs.js"

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback
}
const sizeMiB = Number(arg("size-mib", "256"))
const rounds = Number(arg("rounds", "3"))
const outFile = arg("out", "")
const MiB = 1 << 20

const run = (cmd: string, args: ReadonlyArray<string>) =>
  new Promise<{ stdout: string; stderr: string }>((resolve, reject) =>
    execFile(cmd, args, { encoding: "utf8" }, (error, stdout, stderr) => (error ? reject(new Error(`${cmd}: ${stderr || error.message}`)) : resolve({ stdout, stderr })))
  )

interface Arm {
  readonly name: string
  readonly file: string
  readonly fs?: MemoryFs
  /** dd block size and count (the whole file at 1 MiB when absent). */
  readonly bs?: string
  readonly count?: number
}

interface Pass {
  readonly arm: string
  readonly seconds: number
  readonly serverCpuSec: number
  readonly ddCpuSec: number
  readonly reads: number
  readonly bytes: number
  readonly mib: number
}

const pass = async (arm: Arm): Promise<Pass> => {
  const reads0 = arm.fs?.readsAnswered ?? 0
  const bytes0 = arm.fs?.bytesAnswered ?? 0
  const cpu0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  // /usr/bin/time reports dd's own CPU; its format line is the last of stderr.
  const dd = ["dd", `if=${arm.file}`, "of=/dev/null", `bs=${arm.bs ?? "1M"}`, "status=none", ...(arm.count === undefined ? [] : [`count=${arm.count}`])]
  const { stderr } = await run("/usr/bin/time", ["-f", "cpu %U %S", ...dd])
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9
  const cpu = process.cpuUsage(cpu0)
  const m = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(stderr)
  return {
    arm: arm.name,
    seconds,
    serverCpuSec: arm.fs === undefined ? 0 : (cpu.user + cpu.system) / 1e6,
    ddCpuSec: m === null ? Number.NaN : Number(m[1]) + Number(m[2]),
    reads: (arm.fs?.readsAnswered ?? 0) - reads0,
    bytes: (arm.fs?.bytesAnswered ?? 0) - bytes0,
    mib: arm.count === undefined ? sizeMiB : (arm.count * 4096) / MiB
  }
}

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

const main = async () => {
  const load = loadFuseBinding()
  if (load._tag === "Unavailable") throw new Error(load.reason)
  const data = new Uint8Array(sizeMiB * MiB)
  for (let off = 0; off < data.length; off += 64 * 1024) randomFillSync(data, off, Math.min(64 * 1024, data.length - off))
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "talon-fuse-bench-"))
  const shm = fs.mkdtempSync(path.join("/dev/shm", "talon-fuse-bench-"))
  const sessions: Array<NativeFuseSession> = []
  try {
    const tmpfsFile = path.join(shm, "data.bin")
    fs.writeFileSync(tmpfsFile, data)
    const mountArm = async (name: string, readahead: number, directIo: boolean): Promise<Arm> => {
      const mfs = new MemoryFs()
      mfs.keepCache = false
      mfs.directIo = directIo
      mfs.addFile(1, "data.bin", data)
      const dir = path.join(scratch, name)
      fs.mkdirSync(dir)
      const session = await load.binding.mount(dir, { fsName: "talonbench", allowOther: false, maxReadBytes: MiB, maxReadaheadBytes: readahead }, mfs.handlers)
      sessions.push(session)
      return { name, file: path.join(dir, "data.bin"), fs: mfs }
    }
    const arms: Array<Arm> = [
      await mountArm("ra1m", MiB, false),
      await mountArm("ra8m", 8 * MiB, false),
      await mountArm("ra128k", 128 * 1024, false),
      await mountArm("direct", MiB, true),
      { ...(await mountArm("direct4k", MiB, true)), bs: "4k", count: (32 * MiB) / 4096 },
      { name: "tmpfs", file: tmpfsFile }
    ]
    for (const arm of arms) await pass(arm) // warm-up: first lookups, JIT
    const passes: Array<Pass> = []
    for (let r = 0; r < rounds * 2; r++) {
      const order = r % 2 === 0 ? arms : [...arms].reverse()
      for (const arm of order) passes.push(await pass(arm))
    }
    const lines = arms.map((arm) => {
      const mine = passes.filter((p) => p.arm === arm.name)
      const seconds = median(mine.map((p) => p.seconds))
      const reads = median(mine.map((p) => p.reads))
      const mib = mine[0]!.mib
      return {
        bench: "fuse-binding",
        arm: arm.name,
        mib,
        passes: mine.length,
        mibPerSec: Math.round(mib / seconds),
        usPerMiB: Math.round((seconds * 1e6) / mib),
        serverCpuUsPerMiB: Math.round((median(mine.map((p) => p.serverCpuSec)) * 1e6) / mib),
        ddCpuUsPerMiB: Math.round((median(mine.map((p) => p.ddCpuSec)) * 1e6) / mib),
        fuseReads: reads,
        meanReadKiB: reads > 0 ? Math.round(median(mine.map((p) => p.bytes)) / reads / 1024) : 0,
        usPerFuseRead: reads > 0 ? Math.round((seconds * 1e6) / reads) : 0,
        serverCpuUsPerFuseRead: reads > 0 ? Math.round((median(mine.map((p) => p.serverCpuSec)) * 1e6) / reads) : 0,
        cores: os.cpus().length,
        sharedMachine: true
      }
    })
    const text = lines.map((l) => JSON.stringify(l)).join("\n") + "\n"
    process.stdout.write(text)
    if (outFile !== "") fs.writeFileSync(outFile, text)
  } finally {
    for (const s of sessions) await s.unmount()
    fs.rmSync(shm, { recursive: true, force: true })
    fs.rmSync(scratch, { recursive: true, force: true })
  }
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
