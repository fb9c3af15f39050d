/**
 * `talon mount` through the kernel: a real cluster (origin stub, coordinator, two workers) and
 * a real `talon mount` process, read with cat, cp, sha256sum, ls, stat and Python. Skipped,
 * loudly, only where /dev/fuse, fusermount3 or the FUSE addon is missing.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { sampleBytes } from "../../src/origin/seed.js"
import { kill9 } from "../faults/fixtures/talon.js"
import { raw } from "../origin/fixtures/testOrigin.js"
import {
  BUCKET,
  type ClusterUnderMount,
  clusterUnderMount,
  isMounted,
  kernelMountUnavailable,
  type MountProcess,
  python,
  sh,
  startMount
} from "./fixtures/mounted.js"

const unavailable = await kernelMountUnavailable()
if (unavailable !== undefined) console.warn(`[mount] SKIPPING the kernel mount tests: ${unavailable}`)

const LARGE = 300 * 1024 * 1024
/** The origin's last-modified time of sizes/one.bin, which `ls -l` through the mount shows. */
const ONE_MTIME_S = 1_600_000_000
const ODD = ["odd/with space.bin", "odd/日本語 データ.bin", "odd/100%.bin", "odd/a+b=c.bin", "deep/a/b/c/d/e/f/g/leaf.bin"]

/** The same path at the origin (a file of the stub's directory) and through the mount. */
const at = (root: string, key: string) => path.join(root, BUCKET, key)

/** Replaces an object at the origin atomically (a new inode, so a new ETag). */
const overwrite = async (originRoot: string, key: string, bytes: Uint8Array) => {
  const file = at(originRoot, key)
  const tmp = `${file}.tmp-${process.pid}`
  await fs.writeFile(tmp, bytes)
  await fs.rename(tmp, file)
}

const sha = async (file: string) => {
  const r = await sh("sha256sum", [file])
  if (r.code !== 0) throw new Error(`sha256sum ${file}: ${r.stderr}`)
  return r.stdout.split(" ")[0]!
}

describe.skipIf(unavailable !== undefined)("talon mount through the kernel", () => {
  let scope: Scope.CloseableScope
  let dir: string
  let cluster: ClusterUnderMount
  let mount: MountProcess
  let mnt: string
  const run = <A, E>(e: Effect.Effect<A, E, Scope.Scope>) => Effect.runPromise(Scope.extend(e, scope))

  beforeAll(async () => {
    scope = Effect.runSync(Scope.make())
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "talon-mount-"))
    cluster = await run(
      clusterUnderMount(dir, async (bucket) => {
        const put = async (key: string, bytes: Uint8Array) => {
          await fs.mkdir(path.dirname(path.join(bucket, key)), { recursive: true })
          await fs.writeFile(path.join(bucket, key), bytes)
        }
        await put("sizes/empty.bin", new Uint8Array(0))
        await put("sizes/one.bin", Buffer.from([0x5a]))
        await fs.utimes(path.join(bucket, "sizes/one.bin"), ONE_MTIME_S, ONE_MTIME_S)
        await put("sizes/mib-plus-1.bin", randomBytes(1024 * 1024 + 1))
        // 300 MiB, sparse: written regions of the sample stream, holes of zeros.
        const h = await fs.open(path.join(bucket, "sizes/large.bin"), "w")
        await h.truncate(LARGE)
        for (const off of [0, 7 * 1024 * 1024 + 3, 150 * 1024 * 1024, LARGE - 65536]) await h.write(sampleBytes(off, 65536), 0, 65536, off)
        await h.close()
        for (let i = 0; i < 4; i++) await put(`many-files/f${i}.bin`, randomBytes(3 * 1024 * 1024 + i))
        await fs.mkdir(path.join(bucket, "many"), { recursive: true })
        for (let i = 0; i < 10_000; i += 500) {
          await Promise.all(Array.from({ length: 500 }, (_, j) => fs.writeFile(path.join(bucket, "many", `k${String(i + j).padStart(5, "0")}`), "x")))
        }
        await put("churn.bin", Buffer.alloc(100_000, 1))
        await put("cold/blocked.bin", randomBytes(2 * 1024 * 1024))
        await put("gone.bin", Buffer.from("soon deleted"))
      })
    )
    // Through the stub's S3 API: it keeps names with % and the like escaped on disk.
    for (const key of ODD) {
      const r = await raw(cluster.origin.stub.url, "PUT", `/${BUCKET}/${key.split("/").map(encodeURIComponent).join("/")}`, {}, Buffer.from(`contents of ${key}`))
      if (r.status !== 200) throw new Error(`PUT ${key}: ${r.status}`)
    }
    mnt = path.join(dir, "mnt")
    await fs.mkdir(mnt)
    // Listings through the coordinator's admin API: pages past 10,000 keys and the origin's mtimes.
    mount = await run(startMount(mnt, cluster.coordinator.address, ["--coordinator-admin", cluster.coordinator.adminAddress]))
  }, 600_000)

  afterAll(async () => {
    if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
    if (dir !== undefined && !(await isMounted(path.join(dir, "mnt")))) await fs.rm(dir, { recursive: true, force: true })
  }, 60_000)

  const m = (key: string) => path.join(mnt, "s3", BUCKET, key)
  const o = (key: string) => at(cluster.originRoot, key)

  it("the root shows s3/<bucket>; cat, cp and sha256sum of 0 B, 1 B, 1 MiB + 1 and 300 MiB equal the origin's bytes", async () => {
    expect(await fs.readdir(mnt)).toEqual(["s3"])
    expect(await fs.readdir(path.join(mnt, "s3"))).toEqual([BUCKET])
    for (const key of ["sizes/empty.bin", "sizes/one.bin", "sizes/mib-plus-1.bin", "sizes/large.bin"]) {
      expect(await sha(m(key)), key).toBe(await sha(o(key)))
    }
    const cat = await sh("sh", ["-c", `cat "${m("sizes/mib-plus-1.bin")}" | sha256sum`])
    expect(cat.stdout.split(" ")[0]).toBe(await sha(o("sizes/mib-plus-1.bin")))
    const copy = path.join(dir, "copy.bin")
    expect((await sh("cp", [m("sizes/mib-plus-1.bin"), copy])).code).toBe(0)
    expect((await sh("cmp", [copy, o("sizes/mib-plus-1.bin")])).code).toBe(0)
    // Warm: the second pass is served from the cache and the page cache, same bytes.
    expect(await sha(m("sizes/large.bin"))).toBe(await sha(o("sizes/large.bin")))
  }, 180_000)

  it("os.pread at random offsets and mmap from Python equal the origin's bytes", async () => {
    const script = `
import os, sys, mmap, random
mounted, origin = sys.argv[1], sys.argv[2]
rnd = random.Random(7)
a, b = os.open(mounted, os.O_RDONLY), os.open(origin, os.O_RDONLY)
size = os.fstat(b).st_size
assert os.fstat(a).st_size == size, (os.fstat(a).st_size, size)
for _ in range(400):
    off = rnd.randrange(0, size)
    n = rnd.choice([1, 7, 4096, 65536, 1 << 20, 3 << 20])
    x, y = os.pread(a, n, off), os.pread(b, n, off)
    assert x == y, ("pread", off, n, len(x), len(y))
with open(mounted, "rb") as f, open(origin, "rb") as g:
    mm, mo = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), mmap.mmap(g.fileno(), 0, access=mmap.ACCESS_READ)
    for _ in range(200):
        off = rnd.randrange(0, size)
        assert mm[off:off + 8192] == mo[off:off + 8192], ("mmap", off)
print("ok")
`
    for (const key of ["sizes/large.bin", "sizes/mib-plus-1.bin"]) {
      const r = await python(script, m(key), o(key))
      expect(r.stderr).toBe("")
      expect(r.stdout.trim()).toBe("ok")
    }
  }, 180_000)

  it("16 concurrent readers of one file and of different files all read the origin's bytes", async () => {
    const one = await sha(o("many-files/f0.bin"))
    const same = await Promise.all(Array.from({ length: 16 }, () => sha(m("many-files/f0.bin"))))
    expect(same).toEqual(Array(16).fill(one))
    const keys = Array.from({ length: 16 }, (_, i) => `many-files/f${i % 4}.bin`)
    const want = await Promise.all(keys.map((k) => sha(o(k))))
    expect(await Promise.all(keys.map((k) => sha(m(k))))).toEqual(want)
  }, 180_000)

  it("a directory of 10,000 keys lists fully; odd names and deep prefixes read back", async () => {
    const ls = await sh("sh", ["-c", `ls -1 "${m("many")}" | wc -l`])
    expect(ls.stdout.trim(), `${ls.stderr}\n${mount.child.output().slice(-3000)}`).toBe("10000")
    const names = await fs.readdir(m("many"))
    expect(new Set(names).size).toBe(10_000)
    expect(names).toContain("k09999")
    for (const key of ODD) expect(await fs.readFile(m(key), "utf8"), key).toBe(`contents of ${key}`)
    expect((await fs.readdir(m("odd"))).sort()).toEqual(["100%.bin", "a+b=c.bin", "with space.bin", "日本語 データ.bin"])
  }, 120_000)

  it("ls -l shows the origin's sizes and mtimes; mtimes are stable while the object is; the version is an xattr", async () => {
    const r = await sh("ls", ["-ln", "--time-style=+%s", m("sizes")])
    expect(r.code).toBe(0)
    const sizes = Object.fromEntries(r.stdout.split("\n").filter((l) => l.startsWith("-")).map((l) => [l.split(/\s+/).at(-1), Number(l.split(/\s+/)[4])]))
    expect(sizes).toEqual({ "empty.bin": 0, "one.bin": 1, "mib-plus-1.bin": 1024 * 1024 + 1, "large.bin": LARGE })
    expect(r.stdout.split("\n").find((l) => l.endsWith(" one.bin"))?.split(/\s+/)[5]).toBe(String(ONE_MTIME_S))
    const first = await fs.stat(m("sizes/one.bin"))
    expect(first.mtimeMs).toBe(ONE_MTIME_S * 1000)
    expect(first.mode & 0o777).toBe(0o444)
    await new Promise((r) => setTimeout(r, 1500))
    expect((await fs.stat(m("sizes/one.bin"))).mtimeMs).toBe(first.mtimeMs)
    const x = await python("import os,sys; print(os.getxattr(sys.argv[1], 'user.talon.etag').decode())", m("sizes/one.bin"))
    expect(x.stdout.trim().length).toBeGreaterThan(0)
  }, 60_000)

  it("every write syscall answers EROFS", async () => {
    const script = `
import os, sys, errno
d = sys.argv[1]
f = os.path.join(d, "one.bin")
def erofs(what, fn):
    try:
        fn()
    except OSError as e:
        print(what, errno.errorcode.get(e.errno, e.errno))
        return
    print(what, "succeeded")
erofs("open-wronly", lambda: os.open(f, os.O_WRONLY))
erofs("open-rdwr", lambda: os.open(f, os.O_RDWR))
erofs("open-creat", lambda: os.open(os.path.join(d, "new.bin"), os.O_WRONLY | os.O_CREAT, 0o644))
erofs("unlink", lambda: os.unlink(f))
erofs("rename", lambda: os.rename(f, os.path.join(d, "moved.bin")))
erofs("mkdir", lambda: os.mkdir(os.path.join(d, "newdir")))
erofs("rmdir", lambda: os.rmdir(d))
erofs("truncate", lambda: os.truncate(f, 0))
erofs("setxattr", lambda: os.setxattr(f, "user.x", b"1"))
erofs("chmod", lambda: os.chmod(f, 0o777))
erofs("symlink", lambda: os.symlink(f, os.path.join(d, "link")))
`
    const r = await python(script, m("sizes"))
    const lines = r.stdout.trim().split("\n")
    expect(lines.length).toBe(11)
    for (const line of lines) expect(line, r.stdout + r.stderr).toMatch(/ EROFS$/)
  }, 30_000)

  it("an overwrite and a delete at the origin are seen through the mount within the TTL", async () => {
    const next = Buffer.from("a new version, longer than before")
    await overwrite(cluster.originRoot, "sizes/one.bin", next)
    const t0 = Date.now()
    let seen = ""
    while (Date.now() - t0 < 15_000) {
      seen = (await sh("cat", [m("sizes/one.bin")])).stdout
      if (seen === next.toString()) break
      await new Promise((r) => setTimeout(r, 100))
    }
    expect(seen).toBe(next.toString())
    const overwriteMs = Date.now() - t0
    expect((await fs.stat(m("sizes/one.bin"))).size).toBe(next.length)
    await fs.rm(o("gone.bin"))
    const t1 = Date.now()
    let exists = true
    while (Date.now() - t1 < 15_000 && exists) {
      exists = (await sh("test", ["-e", m("gone.bin")])).code === 0
      if (exists) await new Promise((r) => setTimeout(r, 100))
    }
    expect(exists).toBe(false)
    expect((await sh("cat", [m("gone.bin")])).stderr).toMatch(/No such file/)
    console.log(`[mount] overwrite seen after ${overwriteMs} ms, delete after ${Date.now() - t1} ms (attribute TTL 1000 ms)`)
  }, 60_000)

  it("a reader loop during overwrites never sees bytes of two versions (EIO allowed)", async () => {
    // Version k is `k` repeated, 100,000 + 37k bytes: any mix shows as a foreign byte or a wrong length.
    const script = `
import os, sys, time
f, seconds = sys.argv[1], float(sys.argv[2])
ok = eio = mixed = 0
seen = set()
end = time.time() + seconds
while time.time() < end:
    try:
        with open(f, "rb") as h:
            data = h.read()
    except OSError as e:
        eio += 1
        continue
    if not data:
        mixed += 1
        continue
    v = data[0]
    if data.count(v) != len(data) or len(data) != 100000 + 37 * v:
        mixed += 1
    else:
        ok += 1
        seen.add(v)
print(ok, eio, mixed, len(seen))
`
    await overwrite(cluster.originRoot, "churn.bin", Buffer.alloc(100_000 + 37, 1))
    const reader = python(script, m("churn.bin"), "6")
    for (let v = 2; v < 26; v++) {
      await new Promise((r) => setTimeout(r, 220))
      await overwrite(cluster.originRoot, "churn.bin", Buffer.alloc(100_000 + 37 * v, v))
    }
    const r = await reader
    const [ok, eio, mixed, versions] = r.stdout.trim().split(" ").map(Number)
    console.log(`[mount] reader loop during 24 overwrites: ${ok} whole reads of ${versions} versions, ${eio} EIO, ${mixed} mixed`)
    expect(r.stderr).toBe("")
    expect(mixed).toBe(0)
    expect(ok).toBeGreaterThan(10)
    expect(versions).toBeGreaterThan(1)
  }, 60_000)

  it("a worker killed during reads: reads continue through the other or fail with EIO, never wrong bytes; then the coordinator killed: reads continue", async () => {
    const script = `
import os, sys, random, time
mounted, origin, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
rnd = random.Random(11)
good = eio = wrong = 0
a, b = os.open(mounted, os.O_RDONLY), os.open(origin, os.O_RDONLY)
size = os.fstat(b).st_size
end = time.time() + seconds
while time.time() < end:
    off, n = rnd.randrange(0, size), rnd.choice([4096, 65536, 1 << 20])
    try:
        x = os.pread(a, n, off)
    except OSError:
        eio += 1
        continue
    if x == os.pread(b, n, off):
        good += 1
    else:
        wrong += 1
print(good, eio, wrong)
`
    const files = ["many-files/f1.bin", "many-files/f2.bin"]
    const readers = files.map((k) => python(script, m(k), o(k), "5"))
    await new Promise((r) => setTimeout(r, 1500))
    await Effect.runPromise(kill9(cluster.workers[0]!.child))
    const results = (await Promise.all(readers)).map((r) => r.stdout.trim().split(" ").map(Number))
    for (const [good, , wrong] of results) {
      expect(wrong).toBe(0)
      expect(good).toBeGreaterThan(0)
    }
    // The coordinator gone too: open files and new opens keep reading from the surviving worker.
    await Effect.runPromise(kill9(cluster.coordinator.child))
    const after = await python(script, m(files[0]!), o(files[0]!), "3")
    const [good, eio, wrong] = after.stdout.trim().split(" ").map(Number)
    if (after.code !== 0) console.log(`[mount] reader after the coordinator was killed failed: ${after.stderr}\n${mount.child.output().slice(-3000)}`)
    console.log(`[mount] worker killed: ${JSON.stringify(results)} (good, EIO, wrong); then coordinator killed: ${good} good, ${eio} EIO, ${wrong} wrong`)
    expect(wrong).toBe(0)
    expect(good).toBeGreaterThan(0)
    expect(await sha(m("many-files/f3.bin"))).toBe(await sha(o("many-files/f3.bin")))
    cluster.coordinator.child = await run(cluster.coordinator.start)
  }, 120_000)

  it("mounting over a non-empty directory is refused with a clear error", async () => {
    const full = path.join(dir, "full")
    await fs.mkdir(full)
    await fs.writeFile(path.join(full, "keep.txt"), "mine")
    const r = await sh("node", ["bin/talon.mjs", "mount", full, "--coordinator", cluster.coordinator.address, "--admin-listen", "127.0.0.1:0"], 60_000)
    expect(r.code).not.toBe(0)
    expect(r.stderr).toMatch(/not empty/)
    expect(await isMounted(full)).toBe(false)
  }, 60_000)

  it("SIGTERM while a reader is blocked unmounts, the reader gets an error, and a mount killed -9 is cleaned by the next mount", async () => {
    await Effect.runPromise(cluster.origin.stub.setFaults({ latency: { kind: "fixed", ms: 60_000 }, kinds: ["get"] }))
    // A cold object whose origin GETs now take a minute: the reader waits inside a kernel read.
    const blocked = sh("cat", [m("cold/blocked.bin")], 90_000)
    await new Promise((r) => setTimeout(r, 1000))
    const t0 = Date.now()
    mount.child.process.kill("SIGTERM")
    const exit = await mount.child.exited
    console.log(`[mount] SIGTERM with readers in flight: exited ${exit.code ?? exit.signal} after ${Date.now() - t0} ms`)
    expect(exit.code).toBe(0)
    expect(await isMounted(mnt)).toBe(false)
    expect((await blocked).code).not.toBe(0)
    await Effect.runPromise(cluster.origin.stub.setFaults({ latency: { kind: "none" }, kinds: [] }))

    // A mount whose process dies without unmounting: the next talon mount detaches it and serves.
    const again = await run(startMount(mnt, cluster.coordinator.address))
    await Effect.runPromise(kill9(again.child))
    const stale = await fs.stat(mnt).then(() => "ok", (e: NodeJS.ErrnoException) => e.code)
    console.log(`[mount] after kill -9 the mountpoint answers ${stale}`)
    const third = await run(startMount(mnt, cluster.coordinator.address))
    expect(third.child.output()).not.toMatch(/cannot mount/)
    expect(await fs.readdir(mnt)).toEqual(["s3"])
    third.child.process.kill("SIGTERM")
    expect((await third.child.exited).code).toBe(0)
    expect(await isMounted(mnt)).toBe(false)
  }, 180_000)
})
