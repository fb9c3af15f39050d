/**
 * The libfuse3 binding against the real kernel: a small in-memory filesystem (fixtures/memoryFs)
 * mounted in a temp directory and used by ordinary programs in child processes. Needs /dev/fuse
 * and the built addon; elsewhere the suite is skipped and says why (under CI, which installs
 * fuse3 and libfuse3-dev, a skip is a failure).
 */
import { createHash } from "node:crypto"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { MemoryFs, patternBytes } from "../../../bench/kit/memoryFs.js"
import { binding, defaultOptions, fuseUnavailable, isMounted, mounted, sh } from "./fixtures/mounted.js"

const reason = fuseUnavailable()
if (reason !== undefined) {
  console.warn(`\n*** SKIPPED test/mount/fuse/binding.test.ts: ${reason} ***\n`)
  if (process.env.CI === "true") {
    describe("FUSE binding", () => {
      it("can run here", () => {
        throw new Error(`the FUSE binding tests cannot run under CI: ${reason}`)
      })
    })
  }
}

const MiB = 1 << 20
const text = (s: string) => new TextEncoder().encode(s)
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")

const sample = () => {
  const fs = new MemoryFs()
  const hello = fs.addFile(1, "hello.txt", text("hello, fuse\n"), "etag-hello")
  const empty = fs.addFile(1, "empty", new Uint8Array(0))
  const big = fs.addFile(1, "big.bin", patternBytes(3 * MiB, 7), "\"3f1a-2\"")
  const sub = fs.addDir(1, "sub")
  const nested = fs.addFile(sub.ino, "nested.txt", text("nested\n"))
  return { fs, hello, empty, big, sub, nested }
}

/** Polls `probe` (a child-process check) until it holds; the bound only keeps a broken build from hanging. */
const eventually = <A>(probe: Effect.Effect<A>, holds: (a: A) => boolean, what: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 200; i++) {
      const a = yield* probe
      if (holds(a)) return a
      yield* Effect.sleep("25 millis")
    }
    return yield* Effect.die(new Error(`never happened: ${what}`))
  })

describe.skipIf(reason !== undefined)("FUSE binding (real kernel mounts)", () => {
  it.scopedLive("ls, stat and cat see the tree, sizes, modes and bytes; the mount is read-only and named", () =>
    Effect.gen(function* () {
      const { fs, big } = sample()
      const { mountpoint: m, session } = yield* mounted(fs.handlers)
      const ls = yield* sh(`ls -A '${m}' && ls -A '${m}/sub'`)
      expect(ls.stdout.split("\n").filter(Boolean)).toEqual(["big.bin", "empty", "hello.txt", "sub", "nested.txt"])
      const stat = yield* sh(`stat -c '%n %s %a %F' '${m}/big.bin' '${m}/empty' '${m}/sub'`)
      expect(stat.stdout.replaceAll(`${m}/`, "").trim().split("\n")).toEqual([
        `big.bin ${3 * MiB} 444 regular file`,
        "empty 0 444 regular empty file",
        "sub 0 555 directory"
      ])
      expect((yield* sh(`cat '${m}/hello.txt' '${m}/sub/nested.txt' '${m}/empty'`)).stdout).toBe("hello, fuse\nnested\n")
      expect((yield* sh(`sha256sum < '${m}/big.bin'`)).stdout.split(" ")[0]).toBe(sha256(big.bytes))
      const missing = yield* sh(`cat '${m}/nope' 2>&1`)
      expect(missing.code).not.toBe(0)
      expect(missing.stdout).toContain("No such file or directory")
      const mounts = yield* sh(`grep ' ${m} ' /proc/mounts`)
      expect(mounts.stdout).toMatch(/^talontest \S+ fuse\.talontest ro,/)
      expect(session.kernel()).toMatchObject({ initialized: 1, maxWrite: MiB, maxReadahead: MiB })
      const df = yield* sh(`stat -f -c '%S %b' '${m}'`)
      expect(df.stdout.trim()).toBe("4096 1000")
    })
  )

  it.scopedLive("pread at offsets, mmap and 16 concurrent readers from child processes get the right bytes", () =>
    Effect.gen(function* () {
      const { fs, big } = sample()
      const { mountpoint: m } = yield* mounted(fs.handlers)
      const offsets = [0, 1, 4095, 4096, MiB - 1, MiB, MiB + 12345, 3 * MiB - 10, 3 * MiB, 3 * MiB + 5]
      const script = [
        "import os, sys, mmap, hashlib",
        `fd = os.open(sys.argv[1], os.O_RDONLY)`,
        `for off in [${offsets.join(",")}]:`,
        "    print(off, os.pread(fd, 200000, off).hex()[:80], len(os.pread(fd, 200000, off)))",
        "with open(sys.argv[1], 'rb') as f:",
        "    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)",
        "    print('mmap', hashlib.sha256(mm[:]).hexdigest())"
      ].join("\n")
      const out = yield* sh(`python3 -c "${script}" '${m}/big.bin'`)
      expect(out.stderr).toBe("")
      const lines = out.stdout.trim().split("\n")
      offsets.forEach((off, i) => {
        const want = big.bytes.subarray(off, off + 200000)
        expect(lines[i]).toBe(`${off} ${Buffer.from(want).toString("hex").slice(0, 80)} ${want.length}`)
      })
      expect(lines[offsets.length]).toBe(`mmap ${sha256(big.bytes)}`)
      const readers = yield* sh(
        `for i in $(seq 16); do (dd if='${m}/big.bin' bs=64k skip=$((i % 4)) status=none | sha256sum) & done; wait`
      )
      const sums = readers.stdout.trim().split("\n").map((l) => l.split(" ")[0])
      expect(sums).toHaveLength(16)
      const want = new Set([0, 1, 2, 3].map((k) => sha256(big.bytes.subarray(k * 65536))))
      for (const s of sums) expect(want.has(s)).toBe(true)
    })
  )

  it.scopedLive("requests are answered asynchronously: held reads stay in flight while others are answered", () =>
    Effect.gen(function* () {
      const fs = new MemoryFs()
      const slow = [1, 2, 3].map((i) => fs.addFile(1, `slow${i}.bin`, patternBytes(256 * 1024, i)))
      fs.addFile(1, "fast.txt", text("fast\n"))
      for (const f of slow) fs.holdInodes.add(f.ino)
      const { mountpoint: m } = yield* mounted(fs.handlers)
      const readers = yield* Effect.fork(
        sh(slow.map((f) => `sha256sum < '${m}/${f.name}' &`).join(" ") + " wait")
      )
      // Three reads held by JavaScript at once: the receive thread kept reading the kernel's queue.
      yield* Effect.promise(() => fs.heldCount(3))
      // And while they wait, other requests (lookup, open, read of another file) are answered.
      expect((yield* sh(`cat '${m}/fast.txt'`)).stdout).toBe("fast\n")
      expect(fs.held.length).toBeGreaterThanOrEqual(3)
      // Answered later, from a timer.
      yield* Effect.promise(() => new Promise<void>((resolve) => setTimeout(() => {
        fs.holdInodes.clear()
        fs.releaseHeld()
        resolve()
      }, 50)))
      const out = yield* readers.await.pipe(Effect.flatten)
      expect(out.stdout.trim().split("\n").map((l) => l.split(" ")[0]).sort()).toEqual(slow.map((f) => sha256(f.bytes)).sort())
    })
  )

  it.scopedLive("getxattr and listxattr answer the version; a long value survives the ERANGE retry", () =>
    Effect.gen(function* () {
      const { fs, big } = sample()
      const long = fs.addFile(1, "long", text("x"), "v".repeat(300))
      const { mountpoint: m } = yield* mounted(fs.handlers)
      const script = [
        "import os, sys",
        "print(os.getxattr(sys.argv[1], 'user.talon.version').decode())",
        "print(os.listxattr(sys.argv[1]))",
        "print(len(os.getxattr(sys.argv[2], 'user.talon.version')))",
        "try:\n    os.getxattr(sys.argv[1], 'user.other')\nexcept OSError as e:\n    print(e.errno)"
      ].join("\n")
      const out = yield* sh(`python3 -c "${script.replaceAll('"', '\\"')}" '${m}/big.bin' '${m}/${long.name}'`)
      expect(out.stderr).toBe("")
      expect(out.stdout.trim().split("\n")).toEqual([big.version, "['user.talon.version']", "300", "61"])
    })
  )

  it.scopedLive("every mutating syscall gets EROFS and never reaches the filesystem", () =>
    Effect.gen(function* () {
      const { fs } = sample()
      const { mountpoint: m } = yield* mounted(fs.handlers)
      const script = [
        "import os, sys, errno",
        "m = sys.argv[1]",
        "ops = {",
        "  'open O_WRONLY': lambda: os.open(m + '/hello.txt', os.O_WRONLY),",
        "  'open O_RDWR': lambda: os.open(m + '/hello.txt', os.O_RDWR),",
        "  'open O_CREAT': lambda: os.open(m + '/new.txt', os.O_WRONLY | os.O_CREAT, 0o644),",
        "  'open O_TRUNC': lambda: os.open(m + '/hello.txt', os.O_RDONLY | os.O_TRUNC),",
        "  'unlink': lambda: os.unlink(m + '/hello.txt'),",
        "  'rename': lambda: os.rename(m + '/hello.txt', m + '/moved.txt'),",
        "  'mkdir': lambda: os.mkdir(m + '/d'),",
        "  'rmdir': lambda: os.rmdir(m + '/sub'),",
        "  'truncate': lambda: os.truncate(m + '/hello.txt', 0),",
        "  'setxattr': lambda: os.setxattr(m + '/hello.txt', 'user.x', b'1'),",
        "  'removexattr': lambda: os.removexattr(m + '/hello.txt', 'user.talon.version'),",
        "  'chmod': lambda: os.chmod(m + '/hello.txt', 0o777),",
        "  'utime': lambda: os.utime(m + '/hello.txt', (1, 1)),",
        "  'symlink': lambda: os.symlink('hello.txt', m + '/link'),",
        "  'link': lambda: os.link(m + '/hello.txt', m + '/hard'),",
        "  'mknod': lambda: os.mkfifo(m + '/fifo'),",
        "}",
        "for name, op in ops.items():",
        "    try:",
        "        op()",
        "        print(name, 'OK')",
        "    except OSError as e:",
        "        print(name, errno.errorcode[e.errno])"
      ].join("\n")
      const out = yield* sh(`python3 -c "${script}" '${m}'`)
      expect(out.stderr).toBe("")
      const lines = out.stdout.trim().split("\n")
      expect(lines).toHaveLength(16)
      for (const line of lines) expect(line).toMatch(/ EROFS$/)
      expect(fs.seen.get("open") ?? 0).toBe(0)
      expect((yield* sh(`cat '${m}/hello.txt'`)).stdout).toBe("hello, fuse\n")
    })
  )

  it.scopedLive("with keep-cache the kernel serves cached pages until invalidateInode; invalidateEntry drops a cached name", () =>
    Effect.gen(function* () {
      const { fs, hello } = sample()
      fs.attrTtl = 3600
      fs.entryTtl = 3600
      const { mountpoint: m, session } = yield* mounted(fs.handlers)
      expect((yield* sh(`cat '${m}/hello.txt'`)).stdout).toBe("hello, fuse\n")
      const reads = fs.seen.get("read") ?? 0
      // Same size, same mtime: only an explicit invalidation can tell the kernel.
      hello.bytes = text("HELLO, FUSE\n")
      expect((yield* sh(`cat '${m}/hello.txt'`)).stdout).toBe("hello, fuse\n")
      expect(fs.seen.get("read") ?? 0).toBe(reads)
      session.invalidateInode(hello.ino, 0, 0)
      yield* eventually(sh(`cat '${m}/hello.txt'`), (r) => r.stdout === "HELLO, FUSE\n", "new bytes after invalidateInode")
      // A cached name outlives its node until invalidated.
      fs.nodes.delete(hello.ino)
      const cached = yield* sh(`stat -c %s '${m}/hello.txt'`)
      expect(cached.stdout.trim()).toBe("12")
      session.invalidateEntry(1, "hello.txt")
      yield* eventually(sh(`stat '${m}/hello.txt' 2>&1`), (r) => r.code !== 0 && r.stdout.includes("No such file"), "ENOENT after invalidateEntry")
    })
  )

  it.scopedLive("an invalidation that waits on a held read does not hold up other requests", () =>
    Effect.gen(function* () {
      const fs = new MemoryFs()
      const slow = fs.addFile(1, "slow.bin", patternBytes(512 * 1024, 3))
      fs.addFile(1, "fast.txt", text("fast\n"))
      fs.holdInodes.add(slow.ino)
      const { mountpoint: m, session } = yield* mounted(fs.handlers)
      const reader = yield* Effect.fork(sh(`sha256sum < '${m}/slow.bin'`))
      yield* Effect.promise(() => fs.heldCount(1))
      // The kernel makes this wait for the page locks of the held read: it must not wait on this thread.
      session.invalidateInode(slow.ino, 0, 0)
      yield* eventually(Effect.sync(() => session.kernel()), (k) => k.invalidationInFlight === 1, "the invalidation in flight")
      expect((yield* sh(`cat '${m}/fast.txt'`)).stdout).toBe("fast\n")
      fs.holdInodes.clear()
      fs.releaseHeld()
      const out = yield* reader.await.pipe(Effect.flatten)
      expect(out.stdout.split(" ")[0]).toBe(sha256(slow.bytes))
    })
  )

  it.scopedLive("a directory of 5,000 entries lists fully across several readdir calls", () =>
    Effect.gen(function* () {
      const fs = new MemoryFs()
      const dir = fs.addDir(1, "many")
      const names = Array.from({ length: 5000 }, (_, i) => `object with spaces, ünïcødé % + #${String(i).padStart(5, "0")}.bin`)
      for (const n of names) fs.addFile(dir.ino, n, text(n))
      const { mountpoint: m } = yield* mounted(fs.handlers)
      const out = yield* sh(`ls -1A '${m}/many'`)
      expect(out.stdout.split("\n").filter(Boolean).sort()).toEqual([...names].sort())
      // More than one kernel buffer's worth: the binding packed each and the kernel came back for the rest.
      expect(fs.seen.get("readdir") ?? 0).toBeGreaterThan(1)
      expect((yield* sh(`cat '${m}/many/${names[4321]}'`)).stdout).toBe(names[4321])
    })
  )

  it.scopedLive("any set of names lists exactly (packing across readdir buffers); names the kernel would reject are left out, not their neighbours", () =>
    Effect.gen(function* () {
      const fs = new MemoryFs()
      const dir = fs.addDir(1, "prop")
      const { mountpoint: m } = yield* mounted(fs.handlers)
      const utf8 = (n: string) => Buffer.byteLength(n, "utf8")
      const name = fc
        .string({ unit: "grapheme", minLength: 1, maxLength: 60 })
        .filter((n) => !n.includes("/") && !n.includes("\0") && n !== "." && n !== ".." && utf8(n) <= 255)
      const rejected = fc.constantFrom("a/b", "/", "x".repeat(1100))
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.uniqueArray(name, { maxLength: 400 }), fc.array(rejected, { maxLength: 2 }), async (names, bad) => {
            fs.clearDir(dir.ino)
            for (const n of [...names, ...bad]) fs.addFile(dir.ino, n, text("x"))
            // Listed from this process (readdir runs on libuv's thread pool while this event loop
            // answers the mount): the same getdents calls as a child's, without a process start per run.
            const listed = await fsp.readdir(`${m}/prop`)
            expect(listed.sort()).toEqual([...names].sort())
          }),
          { numRuns: 8 }
        )
      )
    })
  )

  it.scopedLive("unmount while a reader is blocked: the reader gets an error, closed resolves, the mount is gone", () =>
    Effect.gen(function* () {
      const { fs, big } = sample()
      fs.holdInodes.add(big.ino)
      const { mountpoint: m, session } = yield* mounted(fs.handlers)
      const reader = yield* Effect.fork(sh(`cat '${m}/big.bin' > /dev/null; echo "exit $?"`))
      yield* Effect.promise(() => fs.heldCount(1))
      yield* Effect.promise(() => session.unmount())
      yield* Effect.promise(() => session.closed)
      const out = yield* reader.await.pipe(Effect.flatten)
      expect(out.stdout.trim()).not.toBe("exit 0")
      expect(isMounted(m)).toBe(false)
      // Late answers to requests the binding already ended are ignored.
      expect(fs.releaseHeld()).toBeGreaterThan(0)
      yield* Effect.promise(() => session.unmount())
    })
  )

  it.scopedLive("unmount completes while an invalidation waits on a read JavaScript never answers", () =>
    Effect.gen(function* () {
      const fs = new MemoryFs()
      const slow = fs.addFile(1, "slow.bin", patternBytes(512 * 1024, 5))
      fs.holdInodes.add(slow.ino)
      const { mountpoint: m, session } = yield* mounted(fs.handlers)
      const reader = yield* Effect.fork(sh(`cat '${m}/slow.bin' > /dev/null; echo "exit $?"`))
      yield* Effect.promise(() => fs.heldCount(1))
      session.invalidateInode(slow.ino, 0, 0)
      // In the kernel and waiting: the held read's pages are locked until it is answered.
      yield* eventually(Effect.sync(() => session.kernel()), (k) => k.invalidationInFlight === 1, "the invalidation in flight")
      // Never released: the binding answers the held read itself once JavaScript had its chance.
      yield* Effect.promise(() => session.unmount())
      const out = yield* reader.await.pipe(Effect.flatten)
      expect(out.stdout.trim()).not.toBe("exit 0")
      expect(isMounted(m)).toBe(false)
    })
  )

  it.scopedLive("a second mount on our own live mount is refused; an unmount from outside (umount) resolves closed", () =>
    Effect.gen(function* () {
      const { fs } = sample()
      const { mountpoint: m, session } = yield* mounted(fs.handlers)
      expect((yield* sh(`cat '${m}/hello.txt'`)).stdout).toBe("hello, fuse\n")
      // Mounting again on our own live mount is refused without probing it (which would wait on this thread).
      const again = yield* Effect.promise(() => binding().mount(`${m}/`, defaultOptions, fs.handlers).then((s) => s.unmount().then(() => undefined), (e: Error) => e))
      expect(again?.message).toContain("this process already serves a mount there")
      const um = yield* sh(`fusermount3 -u '${m}' 2>&1 || umount '${m}' 2>&1`)
      expect(um.code).toBe(0)
      yield* Effect.promise(() => session.closed)
      expect(isMounted(m)).toBe(false)
    })
  )

  it.scopedLive("a reply JavaScript drops unanswered is answered EIO when collected; a throwing handler answers EIO", () =>
    Effect.gen(function* () {
      const { fs, hello, big } = sample()
      const errors: Array<string> = []
      let droppedReads = 0
      const base = fs.handlers
      const handlers = {
        ...base,
        read: (ino: number, fh: number, offset: number, size: number, reply: Parameters<typeof base.read>[4]) => {
          if (ino === hello.ino) {
            droppedReads++
            return // dropped: never answered, never kept
          }
          if (ino === big.ino) throw new Error("handler bug")
          base.read(ino, fh, offset, size, reply)
        }
      }
      const fuse = binding().withHandlerErrors((error, op) => errors.push(`${op}: ${(error as Error).message}`))
      const { mountpoint: m } = yield* mounted(handlers, defaultOptions, fuse)
      const thrown = yield* sh(`cat '${m}/big.bin' 2>&1 >/dev/null`)
      expect(thrown.code).not.toBe(0)
      expect(thrown.stdout).toContain("Input/output error")
      expect(errors).toContain("read: handler bug")
      v8.setFlagsFromString("--expose-gc")
      const gc = vm.runInNewContext("gc") as () => void
      const dropped = yield* Effect.fork(sh(`cat '${m}/hello.txt' 2>&1`))
      yield* eventually(Effect.sync(() => droppedReads), (n) => n >= 1, "the dropped read reached JavaScript")
      const out = yield* Effect.gen(function* () {
        for (;;) {
          gc()
          yield* Effect.sleep("20 millis")
          const poll = yield* dropped.poll
          if (poll._tag === "Some") return yield* poll.value
        }
      }).pipe(Effect.timeout("20 seconds"))
      expect(out.stdout).toContain("Input/output error")
    })
  )

  it.scopedLive("a process that exits without unmounting leaves no dead mount behind", () =>
    Effect.gen(function* () {
      const dir = yield* Effect.acquireRelease(
        Effect.promise(() => fsp.mkdtemp("/tmp/talon-fuse-exit-")),
        (dir) =>
          sh(`for i in 1 2 3; do grep -q ' ${dir} ' /proc/mounts && umount -l '${dir}'; done`).pipe(
            Effect.andThen(Effect.promise(() => fsp.rm(dir, { recursive: true, force: true })))
          )
      )
      const child = path.join(import.meta.dirname, "fixtures", "exitMounted.ts")
      // tsx as a loader of this node, not through npx: npx resolving the package costs seconds on a busy machine.
      const out = yield* sh(`'${process.execPath}' --import tsx '${child}' '${dir}'`)
      expect(out.stderr).toBe("")
      expect(out.stdout).toBe("alive\n")
      expect(isMounted(dir)).toBe(false)
      expect((yield* sh(`ls -A '${dir}'`)).code).toBe(0)
    })
  )

  it.scopedLive("mounting over a dead mount (its process was killed) fails with what to run", () =>
    Effect.gen(function* () {
      const dir = yield* Effect.acquireRelease(
        Effect.promise(() => fsp.mkdtemp("/tmp/talon-fuse-dead-")),
        (dir) =>
          sh(`for i in 1 2 3; do grep -q ' ${dir} ' /proc/mounts && umount -l '${dir}'; done`).pipe(
            Effect.andThen(Effect.promise(() => fsp.rm(dir, { recursive: true, force: true })))
          )
      )
      const child = path.join(import.meta.dirname, "fixtures", "exitMounted.ts")
      const out = yield* sh(`'${process.execPath}' --import tsx '${child}' '${dir}' kill`)
      expect(out.stdout).toBe("alive\n")
      expect(isMounted(dir)).toBe(true)
      const error = yield* Effect.promise(() =>
        binding().mount(dir, defaultOptions, new MemoryFs().handlers).then((s) => s.unmount().then(() => undefined), (e: Error) => e)
      )
      expect(error?.message).toContain("a dead FUSE mount is left there")
      expect(error?.message).toContain(`fusermount3 -u -z ${dir}`)
    })
  )

  it.live("mounting on a missing directory fails with a message that says what is wrong", () =>
    Effect.gen(function* () {
      const missing = path.join(yield* Effect.promise(() => fsp.mkdtemp("/tmp/talon-fuse-missing-")), "nope")
      const error = yield* Effect.promise(() => binding().mount(missing, defaultOptions, new MemoryFs().handlers).then((s) => s.unmount().then(() => undefined), (e: Error) => e))
      expect(error?.message).toContain(`cannot mount at ${missing}`)
      expect(error?.message).toContain("existing directory")
      yield* Effect.promise(() => fsp.rm(path.dirname(missing), { recursive: true }))
    })
  )
})
