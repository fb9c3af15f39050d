/**
 * The real clients people run — AWS CLI v2, s3cmd, rclone, unmodified — against the
 * gateway of `talon up` (a child process: origin stub, coordinator, workers, gateway on the
 * cache route): with auth on, make bucket, upload (single and multipart), list, download,
 * ranged get, server-side copy, sync both ways, recursive delete; with auth off, the bucket,
 * multipart upload, download, ranged get and delete. Every byte that comes back is compared
 * with what went up. `.ci/run` installs the clients; without them
 * this file fails under CI and says loudly that it skipped elsewhere.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { awsCli, type Creds, findTool, rclone, s3cmd, type Tool } from "./fixtures/realClients.js"

const TOOLS = { aws: findTool("aws"), s3cmd: findTool("s3cmd"), rclone: findTool("rclone") }
const missing = Object.entries(TOOLS).filter(([, p]) => p === undefined).map(([n]) => n)
if (missing.length > 0) {
  console.warn(`\n!!! realClients: ${missing.join(", ")} not installed (apt-get install -y awscli s3cmd rclone); those clients are NOT tested !!!\n`)
}

const children: Array<ChildProcess> = []
const dirs: Array<string> = []
afterAll(() => {
  for (const c of children) c.kill("SIGKILL")
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true })
})

const tempDir = (prefix: string) => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  dirs.push(d)
  return d
}

/** `talon up --ephemeral`; resolves with its gateway URL once it prints its banner. */
const talonUp = (env: Record<string, string>) =>
  new Promise<{ gateway: string; child: ChildProcess }>((resolve, reject) => {
    const child = spawn(process.execPath, ["bin/talon.mjs", "up", "--ephemeral"], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } })
    children.push(child)
    let out = ""
    const onData = (d: Buffer) => {
      out += d.toString()
      const gateway = /gateway\s+(http:\/\/\S+)/.exec(out)?.[1]
      if (gateway !== undefined && out.includes("Read through the cache:")) resolve({ gateway, child })
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.on("exit", (code) => reject(new Error(`talon up exited early (${code}):\n${out}`)))
  })

const stop = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null) return resolve()
    child.once("exit", () => resolve())
    child.kill("SIGINT")
  })

const MiB = 1024 * 1024

/** Local files: one small, one that every client uploads in several parts (s3cmd's are 15 MiB). */
const makeFiles = (dir: string) => {
  const files = { small: randomBytes(100_000), big: randomBytes(16 * MiB + 333) }
  fs.writeFileSync(path.join(dir, "small.bin"), files.small)
  fs.writeFileSync(path.join(dir, "big.bin"), files.big)
  const sync = path.join(dir, "tree")
  fs.mkdirSync(path.join(sync, "sub"), { recursive: true })
  for (const [name, size] of [["a.txt", 10], ["sub/b.bin", 70_000], ["sub/c d+e.bin", 3 * MiB]] as const) {
    fs.writeFileSync(path.join(sync, name), randomBytes(size))
  }
  return files
}

const same = (a: Buffer, b: Buffer, what: string) => {
  expect(a.length, what).toBe(b.length)
  expect(a.equals(b), `${what}: bytes differ`).toBe(true)
}

const treeOf = (root: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (d: string, prefix: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(path.join(d, e.name), `${prefix}${e.name}/`)
      else out[`${prefix}${e.name}`] = fs.readFileSync(path.join(d, e.name)).toString("base64")
    }
  }
  walk(root, "")
  return out
}

/**
 * The scenario, in each tool's own commands. `full` adds the listing, the small file, the
 * server-side copy and the sync round trip; without it: bucket, multipart upload, download,
 * ranged get, recursive delete (what proves the tool is let in and its bytes come back).
 */
const scenario = async (tool: Tool, bucket: string, work: string, full: boolean) => {
  const files = makeFiles(work)
  const down = path.join(work, "down")
  fs.mkdirSync(down)
  const x = tool.exec
  const u = tool.uri
  const local = (n: string) => path.join(work, n)

  // Make the bucket, upload one file whole and one in parts.
  if (tool.name === "rclone") await x(["mkdir", u(bucket)])
  else await x([tool.name === "aws" ? "s3" : "mb", ...(tool.name === "aws" ? ["mb"] : []), u(bucket)])
  for (const n of full ? ["small.bin", "big.bin"] : ["big.bin"]) {
    if (tool.name === "aws") await x(["s3", "cp", local(n), u(bucket, `up/${n}`)])
    else if (tool.name === "s3cmd") await x(["put", local(n), u(bucket, `up/${n}`)])
    else await x(["copyto", local(n), u(bucket, `up/${n}`)])
  }
  if (full) {
    const listing = (await x(tool.name === "aws" ? ["s3", "ls", u(bucket, "up/")] : tool.name === "s3cmd" ? ["ls", u(bucket, "up/")] : ["lsf", u(bucket, "up")])).toString()
    expect(listing).toContain("small.bin")
    expect(listing).toContain("big.bin")
  }

  // Download, a ranged read, a server-side copy (read back).
  const get = async (key: string, to: string) => {
    if (tool.name === "aws") await x(["s3", "cp", u(bucket, key), to])
    else if (tool.name === "s3cmd") await x(["get", "--force", u(bucket, key), to])
    else await x(["copyto", u(bucket, key), to])
    return fs.readFileSync(to)
  }
  same(await get("up/big.bin", path.join(down, "big.bin")), files.big, `${tool.name} download`)
  if (full) same(await get("up/small.bin", path.join(down, "small.bin")), files.small, `${tool.name} download small`)
  const [start, end] = [5 * MiB - 7, 13 * MiB + 5]
  if (tool.name === "aws") {
    await x(["s3api", "get-object", "--bucket", bucket, "--key", "up/big.bin", "--range", `bytes=${start}-${end}`, path.join(down, "range.bin")])
    same(fs.readFileSync(path.join(down, "range.bin")), files.big.subarray(start, end + 1), "aws ranged get")
  } else if (tool.name === "rclone") {
    same(await x(["cat", "--offset", String(start), "--count", String(end - start + 1), u(bucket, "up/big.bin")]), files.big.subarray(start, end + 1), "rclone ranged cat")
  }
  if (full) {
    if (tool.name === "aws") await x(["s3", "cp", u(bucket, "up/big.bin"), u(bucket, "copy/big.bin")])
    else if (tool.name === "s3cmd") await x(["cp", u(bucket, "up/big.bin"), u(bucket, "copy/big.bin")])
    else await x(["copyto", u(bucket, "up/big.bin"), u(bucket, "copy/big.bin")])
    same(await get("copy/big.bin", path.join(down, "copy.bin")), files.big, `${tool.name} copy`)

    // Sync up, change the tree, sync again, sync down into an empty directory: the same tree.
    const tree = path.join(work, "tree")
    const syncUp = () =>
      x(tool.name === "aws" ? ["s3", "sync", "--delete", tree, u(bucket, "sync/")] : tool.name === "s3cmd" ? ["sync", "--delete-removed", `${tree}/`, u(bucket, "sync/")] : ["sync", tree, u(bucket, "sync")])
    await syncUp()
    fs.writeFileSync(path.join(tree, "a.txt"), randomBytes(33))
    fs.writeFileSync(path.join(tree, "new.bin"), randomBytes(12_345))
    fs.rmSync(path.join(tree, "sub", "b.bin"))
    await syncUp()
    const back = path.join(work, "back")
    fs.mkdirSync(back)
    await x(tool.name === "aws" ? ["s3", "sync", u(bucket, "sync/"), back] : tool.name === "s3cmd" ? ["sync", u(bucket, "sync/"), `${back}/`] : ["sync", u(bucket, "sync"), back])
    expect(treeOf(back), `${tool.name} sync round trip`).toEqual(treeOf(tree))
  }

  // Recursive delete, then the bucket itself.
  if (tool.name === "aws") {
    await x(["s3", "rm", "--recursive", u(bucket)])
    expect((await x(["s3", "ls", "--recursive", u(bucket)])).toString().trim()).toBe("")
    await x(["s3", "rb", u(bucket)])
  } else if (tool.name === "s3cmd") {
    await x(["del", "--recursive", "--force", u(bucket)])
    expect((await x(["ls", "--recursive", u(bucket)])).toString().trim()).toBe("")
    await x(["rb", u(bucket)])
  } else {
    await x(["purge", u(bucket)])
  }
  const buckets = (await x(tool.name === "aws" ? ["s3", "ls"] : tool.name === "s3cmd" ? ["ls"] : ["lsd", "gw:"])).toString()
  expect(buckets).not.toContain(bucket)
}

// Every operation runs with auth on (SigV4 verified: what a deployment runs); with auth off the
// shorter scenario shows each tool is let in with any credentials, and its bytes come back. Past
// the auth check the gateway handles a request the same either way, and each client command
// costs a process start (the AWS CLI ~1 s of CPU), so the full scenario runs once per tool.
const MODES: ReadonlyArray<{ readonly auth: "off" | "on"; readonly full: boolean; readonly env: Record<string, string>; readonly creds: Creds }> = [
  { auth: "off", full: false, env: {}, creds: { accessKeyId: "any", secretAccessKey: "any" } },
  {
    auth: "on",
    full: true,
    env: { TALON_GATEWAY_ACCESS_KEY_ID: "real-client-key", TALON_GATEWAY_SECRET_ACCESS_KEY: "real-client-secret" },
    creds: { accessKeyId: "real-client-key", secretAccessKey: "real-client-secret" }
  }
]

// Both clusters start together, once, while the first clients run; the three clients of a mode
// run side by side (own bucket, own HOME), so one client's process start-ups overlap another's transfers.
const ups = new Map<string, Promise<{ gateway: string; child: ChildProcess }>>()
const upFor = (mode: (typeof MODES)[number]) => {
  let up = ups.get(mode.auth)
  if (up === undefined) ups.set(mode.auth, (up = talonUp(mode.env)))
  return up
}
const anyTool = Object.values(TOOLS).some((p) => p !== undefined) || process.env.CI !== undefined
beforeAll(() => {
  // Started here, awaited by each test: a start-up failure fails the tests, not the hook.
  if (anyTool) for (const mode of MODES) upFor(mode).catch(() => undefined)
})
afterAll(async () => {
  for (const up of ups.values()) await up.then((u) => stop(u.child), () => undefined)
})

for (const mode of MODES) {
  describe.concurrent(`real clients against talon up's gateway (auth ${mode.auth})`, () => {
    const gateway = () => upFor(mode).then((u) => u.gateway)

    for (const name of ["aws", "s3cmd", "rclone"] as const) {
      const bin = TOOLS[name]
      const test = bin === undefined && process.env.CI === undefined ? it.skip : it
      const steps = mode.full ? "mb, cp up (single and multipart), ls, cp down, ranged get, copy, sync, recursive delete" : "mb, multipart cp up, cp down, ranged get, recursive delete"
      test(`${name}: ${steps}`, async () => {
        if (bin === undefined) throw new Error(`${name} is not installed: apt-get install -y awscli s3cmd rclone (.ci/run does this)`)
        const url = await gateway()
        const home = tempDir(`talon-rc-${name}-`)
        const make = name === "aws" ? awsCli : name === "s3cmd" ? s3cmd : rclone
        await scenario(make(bin, home, url, mode.creds), `rc-${name}-${mode.auth}`, home, mode.full)
        if (mode.auth === "on") {
          // The same client with a wrong secret is refused.
          const wrong = make(bin, tempDir(`talon-rc-${name}-bad-`), url, { ...mode.creds, secretAccessKey: "wrong" })
          await expect(wrong.exec(name === "rclone" ? ["lsd", "gw:"] : name === "aws" ? ["s3", "ls"] : ["ls"])).rejects.toThrow()
        }
      }, 300_000)
    }
  })
}
