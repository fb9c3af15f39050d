/**
 * `just mount-bench`: reads through `talon mount` against the same bytes read by TalonClient
 * in this process and through the gateway, over one `talon up` cluster on this machine.
 *
 *   npx tsx bench/mount-bench.ts [--quick] [--out bench/data/mount.json]
 *
 * Writes bench/data/mount.json (bench/lib/chartsData.ts's shape; `npx tsx bench/bench-charts.ts`
 * renders its chart and BENCHMARKS.md tables). Each round runs every arm twice, in A B C then
 * C B A order; each of those passes is paired for the ratios to TalonClient.
 *
 * Scenarios:
 *   seq-cold   1 MiB sequential reads of a fresh object (1 GiB; 256 MiB with --quick): the
 *              mount with `dd bs=1M`, the client with readStream, the gateway with one GET
 *   seq-warm   the same object again (worker caches hold it): the mount with
 *              `dd iflag=direct` (the cluster path, not the page cache) and plain `dd`
 *              (page cache), the client and the gateway as above
 *   rand-<bs>-<n>  random reads of <bs> by <n> readers for a few seconds on the warm object:
 *              fio (psync, direct) through the mount, client.read loops, ranged GETs
 * CPU: the mount process's and this process's CPU per MiB read (the reader side); the
 * cluster's (`talon up`: origin stub, coordinator, workers, gateway) per MiB for every arm.
 * The machine is shared: compare arms within a run, as ratios.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Exit, Scope, Stream } from "effect"
import { makeTalonClient, type TalonClientShape } from "../src/client/TalonClient.js"
import { markdownTable } from "./lib/charts.js"
import { benchData, type Sample } from "./lib/mountData.js"

const args = process.argv.slice(2)
const quick = args.includes("--quick")
const outFile = args.includes("--out") ? args[args.indexOf("--out") + 1]! : path.join("bench", "data", "mount.json")
const SIZE = (quick ? 256 : 1024) * 1024 * 1024
const RANDOM_SECONDS = quick ? 2 : 4
const ROUNDS = quick ? 1 : 2
const MiB = 1024 * 1024
const repo = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..")
const talon = path.join(repo, "bin/talon.mjs")

const sh = (cmd: string, argv: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(cmd, [...argv], { maxBuffer: 64 * MiB }, (e, stdout, stderr) => resolve({ code: e === null ? 0 : 1, stdout: String(stdout), stderr: String(stderr) }))
  )

const cpuSeconds = (pid: number): number => {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ")
    return (Number(f[11]) + Number(f[12])) / 100
  } catch {
    return 0
  }
}
const selfCpu = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}

const started = (child: ChildProcess, pattern: RegExp, what: string) =>
  new Promise<string>((resolve, reject) => {
    let out = ""
    const on = (d: Buffer) => {
      out += d.toString()
      const m = pattern.exec(out)
      if (m !== null) resolve(out)
    }
    child.stdout?.on("data", on)
    child.stderr?.on("data", on)
    child.once("exit", (code) => reject(new Error(`${what} exited ${code}:\n${out}`)))
  })

const main = async () => {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), "talon-mount-bench-"))
  const children: Array<ChildProcess> = []
  const mnt = path.join(dir, "mnt")
  const scope = Effect.runSync(Scope.make())
  try {
    const up = spawn(process.execPath, [talon, "up", "--ephemeral", "--dir", path.join(dir, "cluster")], { stdio: ["ignore", "pipe", "pipe"] })
    children.push(up)
    const banner = await started(up, /data dir/, "talon up")
    const coordinator = /coordinator\s+control (\S+),/.exec(banner)![1]!
    const gateway = /gateway\s+(http:\/\/\S+)/.exec(banner)![1]!
    const originRoot = path.join(dir, "cluster", "origin")
    const bucketDir = path.join(originRoot, "talon")
    const makeObject = async (key: string) => {
      const file = path.join(bucketDir, key)
      await fsp.mkdir(path.dirname(file), { recursive: true })
      const h = await fsp.open(file, "w")
      // Sparse but not empty: a few written MiB so every block has some data.
      await h.truncate(SIZE)
      for (let off = 0; off < SIZE; off += 64 * MiB) await h.write(Buffer.alloc(MiB, off / MiB), 0, MiB, off)
      await h.close()
    }
    await fsp.mkdir(mnt)
    const mount = spawn(process.execPath, [talon, "mount", mnt, "--foreground", "--coordinator", coordinator, "--expose", "s3/talon", "--admin-listen", "127.0.0.1:0"], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    children.push(mount)
    await started(mount, /talon mounted at/, "talon mount")
    const client: TalonClientShape = await Effect.runPromise(Scope.extend(makeTalonClient({ coordinator }), scope))

    const samples: Array<Sample> = []
    const measure = async (scenario: string, pass: number, position: number, arm: string, readerPid: number | "self" | undefined, body: () => Promise<number>) => {
      const c0 = cpuSeconds(up.pid!)
      const r0 = readerPid === "self" ? selfCpu() : readerPid === undefined ? 0 : cpuSeconds(readerPid)
      const t0 = performance.now()
      const bytes = await body()
      const seconds = (performance.now() - t0) / 1000
      const mib = bytes / MiB
      const r1 = readerPid === "self" ? selfCpu() : readerPid === undefined ? 0 : cpuSeconds(readerPid)
      const sample: Sample = {
        scenario,
        pass,
        position,
        arm,
        mibPerSec: mib / seconds,
        bytes,
        seconds,
        readerCpuMsPerMiB: readerPid === undefined ? undefined : ((r1 - r0) * 1000) / mib,
        clusterCpuMsPerMiB: ((cpuSeconds(up.pid!) - c0) * 1000) / mib
      }
      samples.push(sample)
      console.log(JSON.stringify(sample))
    }

    const dd = async (key: string, direct: boolean) => {
      const r = await sh("dd", [`if=${path.join(mnt, "s3/talon", key)}`, "of=/dev/null", "bs=1M", ...(direct ? ["iflag=direct"] : [])])
      if (r.code !== 0) throw new Error(`dd: ${r.stderr}`)
      return SIZE
    }
    const clientSeq = async (key: string) => {
      let n = 0
      await Effect.runPromise(Stream.runForEach(client.readStream(`s3://talon/${key}`, 0, SIZE), (c) => Effect.sync(() => (n += c.length))))
      return n
    }
    const gatewaySeq = async (key: string) => {
      const res = await fetch(`${gateway}/talon/${key}`)
      let n = 0
      for await (const c of res.body as unknown as AsyncIterable<Uint8Array>) n += c.length
      return n
    }

    type Arm = readonly [string, number | "self" | undefined, (key: string) => Promise<number>]
    const seqArms = (direct: boolean): ReadonlyArray<Arm> => [
      [direct ? "mount (dd, O_DIRECT)" : "mount (dd)", mount.pid!, (k) => dd(k, direct)],
      ["TalonClient", "self", clientSeq],
      ["gateway", undefined, gatewaySeq]
    ]
    for (let round = 0; round < ROUNDS; round++) {
      for (const order of [0, 1]) {
        const arms = order === 0 ? seqArms(false) : [...seqArms(false)].reverse()
        for (const [position, [arm, pid, f]] of arms.entries()) {
          const key = `bench/cold-${round}-${order}-${arm.split(" ")[0]}.bin`
          await makeObject(key)
          await measure("seq-cold", round * 2 + order + 1, position, arm, pid, () => f(key))
        }
      }
    }
    const warm = "bench/warm.bin"
    await makeObject(warm)
    await clientSeq(warm)
    for (let round = 0; round < ROUNDS; round++) {
      for (const order of [0, 1]) {
        const arms: ReadonlyArray<Arm> = [...seqArms(true), ["mount (dd, page cache)", mount.pid!, (k) => dd(k, false)]]
        for (const [position, [arm, pid, f]] of (order === 0 ? arms : [...arms].reverse()).entries()) {
          await measure("seq-warm", round * 2 + order + 1, position, arm, pid, () => f(warm))
        }
      }
    }

    const randomArms = (bs: number, readers: number): ReadonlyArray<Arm> => [
      [
        "mount (fio, direct)",
        mount.pid!,
        async () => {
          const r = await sh("fio", [
            "--name=r",
            `--filename=${path.join(mnt, "s3/talon", warm)}`,
            "--rw=randread",
            `--bs=${bs}`,
            "--ioengine=psync",
            "--direct=1",
            `--numjobs=${readers}`,
            "--time_based",
            `--runtime=${RANDOM_SECONDS}`,
            "--group_reporting",
            "--output-format=json"
          ])
          if (r.code !== 0) throw new Error(`fio: ${r.stderr}`)
          return (JSON.parse(r.stdout) as { jobs: Array<{ read: { io_bytes: number } }> }).jobs.reduce((n, j) => n + j.read.io_bytes, 0)
        }
      ],
      [
        "TalonClient",
        "self",
        async () => {
          const end = performance.now() + RANDOM_SECONDS * 1000
          let n = 0
          await Promise.all(
            Array.from({ length: readers }, async () => {
              while (performance.now() < end) {
                const off = Math.floor(Math.random() * (SIZE / bs)) * bs
                n += (await Effect.runPromise(client.read(`s3://talon/${warm}`, off, bs))).length
              }
            })
          )
          return n
        }
      ],
      [
        "gateway",
        undefined,
        async () => {
          const end = performance.now() + RANDOM_SECONDS * 1000
          let n = 0
          await Promise.all(
            Array.from({ length: readers }, async () => {
              while (performance.now() < end) {
                const off = Math.floor(Math.random() * (SIZE / bs)) * bs
                const res = await fetch(`${gateway}/talon/${warm}`, { headers: { range: `bytes=${off}-${off + bs - 1}` } })
                n += (await res.arrayBuffer()).byteLength
              }
            })
          )
          return n
        }
      ]
    ]
    for (const bs of [4096, 65536, MiB]) {
      for (const readers of [1, 8]) {
        for (const order of [0, 1]) {
          const arms = randomArms(bs, readers)
          for (const [position, [arm, pid, f]] of (order === 0 ? arms : [...arms].reverse()).entries()) {
            await measure(`rand-${bs / 1024}K-${readers}`, order + 1, position, arm, pid, () => f(warm))
          }
        }
      }
    }

    await fsp.mkdir(path.dirname(outFile), { recursive: true })
    const data = benchData(samples, { quick, objectBytes: SIZE, rounds: ROUNDS, randomSeconds: RANDOM_SECONDS, command: `npx tsx bench/mount-bench.ts${quick ? " --quick" : ""}` })
    await fsp.writeFile(outFile, `${JSON.stringify(data, null, 2)}\n`)
    for (const t of data.tables) console.log(`\n${markdownTable(data, t)}`)
    console.log(`wrote ${outFile}; run \`npx tsx bench/bench-charts.ts\` to render the chart and BENCHMARKS.md tables`)
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    const mount = children[1]
    if (mount !== undefined && mount.exitCode === null) {
      mount.kill("SIGTERM")
      await new Promise((r) => mount.once("exit", r))
    }
    await sh("fusermount3", ["-uz", mnt])
    for (const c of children) if (c.exitCode === null) c.kill("SIGTERM")
    await new Promise((r) => setTimeout(r, 500))
    await fsp.rm(dir, { recursive: true, force: true }).catch(() => {})
  }
}

await main()
