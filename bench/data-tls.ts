/**
 * The cost of data-plane TLS (worker --data-tls): three `talon worker` processes serving one
 * warm object, driven by TalonClient's WorkerPool from this process with a fixed number of
 * GetRange in flight, in rounds whose arm order alternates (A B C, C B A, ...):
 *
 *   native   the default: plain TCP, native plane (sendfile)
 *   portable plain TCP through the portable plane (read + write), the plane TLS must use
 *   tls      --data-tls: the portable plane over TLS 1.3 (mTLS with a CA)
 *
 * Per arm and read size: requests per second, and the worker's CPU per request (µs, from
 * /proc/<pid>/stat over the measured window). The client's own CPU is not counted.
 *
 *   npx tsx bench/data-tls.ts [--seconds 3] [--rounds 2] [--inflight 16]
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { type FetchResult, WorkerPool } from "../src/client/WorkerPool.js"
import { Backend, type ObjectId } from "../src/core/ids.js"
import { OriginStub } from "../src/origin/OriginStub.js"
import type { ControlTlsFiles } from "../src/transport/controlTls.js"
import { repoRoot } from "./lib/args.js"

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i < 0 ? fallback : Number(process.argv[i + 1])
}
const seconds = arg("seconds", 3)
const rounds = arg("rounds", 2)
const inflight = arg("inflight", 16)
const MiB = 1024 * 1024
const SIZES = [4096, MiB] as const
const OBJECT_SIZE = 64 * MiB
const root = repoRoot

const openssl = (dir: string, ...args: Array<string>) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] })
const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
const pki = (dir: string) => {
  openssl(dir, "req", "-x509", ...EC, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=ca")
  for (const name of ["worker", "client"]) {
    openssl(dir, "req", ...EC, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`)
    fs.writeFileSync(path.join(dir, `${name}.ext`), "subjectAltName=IP:127.0.0.1\n")
    openssl(dir, "x509", "-req", "-in", `${name}.csr`, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", `${name}.pem`, "-days", "2", "-extfile", `${name}.ext`)
  }
  const f = (n: string) => path.join(dir, n)
  return { ca: f("ca.pem"), worker: { certPath: f("worker.pem"), keyPath: f("worker.key") }, client: { certPath: f("client.pem"), keyPath: f("client.key") } }
}

const cpuMs = (pid: number) => {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  const tick = 1000 / 100
  return (Number(fields[11]) + Number(fields[12])) * tick
}

interface Arm {
  readonly name: string
  readonly child: ChildProcess
  readonly address: string
  readonly pool: WorkerPool
}

const object: ObjectId = { backend: Backend.S3, bucket: "bench", objectPath: "obj.bin" }

const fetchOnce = (pool: WorkerPool, address: string, offset: number, length: number) =>
  new Promise<FetchResult>((resolve) => pool.fetch(address, object, offset, length, resolve))

/** Requests completed in `ms` with `inflight` always outstanding. */
const drive = async (arm: Arm, size: number, ms: number) => {
  const end = performance.now() + ms
  let done = 0
  let failed = 0
  const slots = Math.floor(OBJECT_SIZE / size)
  const loop = async (seed: number) => {
    let i = seed
    while (performance.now() < end) {
      const r = await fetchOnce(arm.pool, arm.address, ((i++ * 7919) % slots) * size, size)
      if (r.ok) {
        r.payload.release()
        done++
      } else failed++
    }
  }
  await Promise.all(Array.from({ length: inflight }, (_, k) => loop(k * 131)))
  if (failed > 0) throw new Error(`${arm.name}: ${failed} reads failed`)
  return done
}

// A long-lived origin for the workers' warm-up reads (never stopped before exit).
const startStub = (originRoot: string) =>
  new Promise<string>((resolve) => {
    Effect.runFork(
      Effect.scoped(
        Effect.gen(function* () {
          const s = yield* OriginStub.make({ root: originRoot })
          resolve(s.url)
          return yield* Effect.never
        })
      )
    )
  })

const startArm = async (name: string, dir: string, stubUrl: string, certs: ReturnType<typeof pki>, children: Array<ChildProcess>): Promise<Arm> => {
  const cache = fs.mkdtempSync(path.join(dir, `cache-${name}-`))
  const tlsArgs =
    name === "tls"
      ? ["--data-tls", "--control-tls-cert-path", certs.worker.certPath, "--control-tls-key-path", certs.worker.keyPath, "--control-tls-ca-cert-path", certs.ca]
      : []
  const child = spawn(
    process.execPath,
    [path.join(root, "bin/talon.mjs"), "worker", "--coordinator", "", "--data-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--cache-dir", cache,
      "--capacity", "256M", "--data-plane", name === "native" ? "native" : "portable", "--max-inflight", "1024", "--version-ttl-ms", "600000", ...tlsArgs],
    { env: { ...process.env, TALON_S3_ENDPOINT: stubUrl, TALON_S3_ACCESS_KEY_ID: "talon", TALON_S3_SECRET_ACCESS_KEY: "talon-secret" }, stdio: ["ignore", "pipe", "pipe"] }
  )
  children.push(child)
  let out = ""
  child.stdout!.on("data", (d) => (out += d))
  child.stderr!.on("data", (d) => (out += d))
  const address = await new Promise<string>((resolve, reject) => {
    const t = setInterval(() => {
      const m = /worker data listener on (127\.0\.0\.1:\d+)/.exec(out)
      if (m !== null) {
        clearInterval(t)
        resolve(m[1]!)
      } else if (child.exitCode !== null) {
        clearInterval(t)
        reject(new Error(`${name} exited:\n${out}`))
      }
    }, 50)
  })
  const files: ControlTlsFiles | undefined = name === "tls" ? { ...certs.client, caCertPath: certs.ca } : undefined
  const pool = new WorkerPool({ connectionsPerWorker: 4, requestTimeout: "30 seconds", connectTimeout: "5 seconds", maxRequestBytes: 2 * MiB, tls: files })
  // Warm: every block resident before anything is measured.
  for (let off = 0; off < OBJECT_SIZE; off += MiB) {
    const r = await fetchOnce(pool, address, off, MiB)
    if (!r.ok) throw new Error(`${name} warm-up: ${r.error.message}`)
    r.payload.release()
  }
  return { name, child, address, pool }
}

const run = async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "talon-data-tls-bench-"))
  const children: Array<ChildProcess> = []
  process.on("exit", () => {
    for (const c of children) c.kill("SIGKILL")
    fs.rmSync(dir, { recursive: true, force: true })
  })
  const certs = pki(dir)
  fs.mkdirSync(path.join(dir, "origin", "bench"), { recursive: true })
  fs.writeFileSync(path.join(dir, "origin", "bench", "obj.bin"), Buffer.alloc(OBJECT_SIZE, 7))
  const stubUrl = await startStub(path.join(dir, "origin"))
  const arms: Array<Arm> = []
  for (const name of ["native", "portable", "tls"]) arms.push(await startArm(name, dir, stubUrl, certs, children))
  const results: Record<string, Record<number, { rps: Array<number>; cpuUs: Array<number> }>> = {}
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? arms : [...arms].reverse()
    for (const size of SIZES) {
      for (const arm of order) {
        await drive(arm, size, 300) // settle connections
        const cpu0 = cpuMs(arm.child.pid!)
        const t0 = performance.now()
        const n = await drive(arm, size, seconds * 1000)
        const elapsed = (performance.now() - t0) / 1000
        const cpu = cpuMs(arm.child.pid!) - cpu0
        const slot = ((results[arm.name] ??= {})[size] ??= { rps: [], cpuUs: [] })
        slot.rps.push(n / elapsed)
        slot.cpuUs.push((cpu * 1000) / n)
        console.log(`round ${round} ${arm.name} ${size === MiB ? "1 MiB" : "4 KiB"}: ${(n / elapsed).toFixed(0)} rps, worker ${((cpu * 1000) / n).toFixed(1)} µs CPU/request`)
      }
    }
  }
  const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  console.log(`\nmedians (load ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}; ${inflight} in flight; ${seconds}s x ${rounds} rounds)`)
  for (const size of SIZES) {
    const base = results.native![size]!
    for (const arm of arms) {
      const r = results[arm.name]![size]!
      console.log(
        `${size === MiB ? "1 MiB" : "4 KiB"} ${arm.name.padEnd(8)} ${median(r.rps).toFixed(0).padStart(7)} rps (${(median(r.rps) / median(base.rps)).toFixed(2)}x native)  ${median(r.cpuUs).toFixed(1).padStart(7)} µs CPU/req (${(median(r.cpuUs) / median(base.cpuUs)).toFixed(2)}x)`
      )
    }
  }
  for (const arm of arms) arm.pool.close()
  process.exit(0)
}

run().catch((e) => {
  console.error(e)
  process.exit(1)
})
