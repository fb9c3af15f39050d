/**
 * Starts real etcd members on temp dirs and free loopback ports, and stops
 * them. Where `etcd` is not installed the suites using it are skipped with a
 * loud message, except under CI=true, where that is a failure.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import { mkdtempSync, openSync, closeSync, rmSync, readFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

const INSTALL_HINT =
  "install etcd (Debian/Ubuntu: `apt-get install -y etcd-server`; others: an etcd v3.4+ release binary on PATH) or point TALON_ETCD_BIN at it"

const findEtcd = (): string | undefined => {
  const candidate = process.env.TALON_ETCD_BIN ?? "etcd"
  const r = spawnSync(candidate, ["--version"], { encoding: "utf8" })
  return r.status === 0 ? candidate : undefined
}

export const etcdBin = findEtcd()

/** True when the etcd suites can run. Under CI a missing etcd fails here instead. */
export const etcdAvailable = (): boolean => {
  if (etcdBin !== undefined) return true
  if (process.env.CI === "true") throw new Error(`etcd is required in CI and was not found: ${INSTALL_HINT}`)
  console.warn(`\n*** etcd state-store tests SKIPPED: etcd not found. To run them, ${INSTALL_HINT}. ***\n`)
  return false
}

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })

interface Member {
  readonly name: string
  readonly clientUrl: string
  readonly peerUrl: string
  readonly dataDir: string
  readonly log: string
  proc: ChildProcess | undefined
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const healthy = async (url: string): Promise<boolean> => {
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) })
    const body = (await res.json()) as { health?: string }
    return body.health === "true"
  } catch {
    return false
  }
}

export class EtcdCluster {
  private constructor(
    readonly dir: string,
    readonly members: ReadonlyArray<Member>,
    private readonly initialCluster: string,
    private readonly token: string
  ) {}

  static async start(size: 1 | 3): Promise<EtcdCluster> {
    if (etcdBin === undefined) throw new Error(`etcd not found: ${INSTALL_HINT}`)
    const dir = mkdtempSync(join(tmpdir(), "talon-etcd-"))
    const members: Array<Member> = []
    for (let i = 0; i < size; i++) {
      const [c, p] = [await freePort(), await freePort()]
      members.push({
        name: `m${i}`,
        clientUrl: `http://127.0.0.1:${c}`,
        peerUrl: `http://127.0.0.1:${p}`,
        dataDir: join(dir, `m${i}`),
        log: join(dir, `m${i}.log`),
        proc: undefined
      })
    }
    const initialCluster = members.map((m) => `${m.name}=${m.peerUrl}`).join(",")
    const cluster = new EtcdCluster(dir, members, initialCluster, `talon-test-${process.pid}-${Date.now()}`)
    await Promise.all(members.map((_, i) => cluster.startMember(i)))
    return cluster
  }

  get endpoints(): Array<string> {
    return this.members.map((m) => m.clientUrl)
  }

  /** Starts (or restarts, on its existing data) member `i` and waits until the cluster reports it healthy. */
  async startMember(i: number, waitHealthy = true): Promise<void> {
    const m = this.members[i]!
    if (m.proc !== undefined) return
    const fd = openSync(m.log, "a")
    // Election timing is relaxed from etcd's defaults: test machines are shared and slow.
    m.proc = spawn(
      etcdBin!,
      [
        `--name=${m.name}`,
        `--data-dir=${m.dataDir}`,
        `--listen-client-urls=${m.clientUrl}`,
        `--advertise-client-urls=${m.clientUrl}`,
        `--listen-peer-urls=${m.peerUrl}`,
        `--initial-advertise-peer-urls=${m.peerUrl}`,
        `--initial-cluster=${this.initialCluster}`,
        `--initial-cluster-state=new`,
        `--initial-cluster-token=${this.token}`,
        "--heartbeat-interval=200",
        "--election-timeout=2000",
        "--logger=zap",
        "--log-level=warn"
      ],
      { stdio: ["ignore", fd, fd] }
    )
    closeSync(fd)
    const proc = m.proc
    proc.once("exit", () => {
      if (m.proc === proc) m.proc = undefined
    })
    if (!waitHealthy) return
    // Polled by hand, not with eventually: etcd announces nothing when it turns healthy, and a
    // member that exited must fail the start at once rather than after the whole wait.
    const deadline = Date.now() + 60_000
    while (!(await healthy(m.clientUrl))) {
      if (m.proc === undefined) throw new Error(`etcd member ${m.name} exited at start:\n${readFileSync(m.log, "utf8").slice(-2000)}`)
      if (Date.now() > deadline) throw new Error(`etcd member ${m.name} not healthy after 60 s:\n${readFileSync(m.log, "utf8").slice(-2000)}`)
      await sleep(100)
    }
  }

  /** Stops member `i` (SIGTERM, then SIGKILL after 10 s) and waits for it to exit. */
  async stopMember(i: number): Promise<void> {
    const m = this.members[i]!
    const proc = m.proc
    if (proc === undefined || proc.exitCode !== null) {
      m.proc = undefined
      return
    }
    const exited = new Promise<void>((r) => proc.once("exit", () => r()))
    proc.kill("SIGTERM")
    const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000)
    await exited
    clearTimeout(timer)
    m.proc = undefined
  }

  async stop(): Promise<void> {
    await Promise.all(this.members.map((_, i) => this.stopMember(i)))
    rmSync(this.dir, { recursive: true, force: true })
  }
}
