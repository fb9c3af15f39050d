import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type BlockId } from "../../src/core/ids.js"
import { DiskStore, readBitmap } from "../../src/worker/store/DiskStore.js"
import type { Unit } from "../../src/worker/store/entry.js"
import { hasher } from "../../src/worker/store/checksum.js"
import { writeAll } from "../../src/worker/store/fsx.js"
import { blockDirName, blockDirPath, blockKey } from "../../src/worker/store/layout.js"

const dirs: Array<string> = []
const stores: Array<DiskStore> = []
const tempDir = async () => {
  const d = await fsp.mkdtemp(path.join(os.tmpdir(), "talon-store-"))
  dirs.push(d)
  return d
}
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close()
  for (const d of dirs.splice(0)) await fsp.rm(d, { recursive: true, force: true })
})

const open = async (options: Parameters<typeof DiskStore.open>[0]) => {
  const s = await DiskStore.open(options)
  stores.push(s)
  return s
}

const blockId = (objectPath: string, offset = 0, version = "v1", blockSize = 4096): BlockId => ({
  object: { backend: Backend.S3, bucket: "b", objectPath },
  offset,
  blockSize,
  version
})

/** Deterministic bytes for unit `index` of a block. */
const bytesFor = (id: BlockId, index: number, n: number): Uint8Array => {
  const out = new Uint8Array(n)
  let x = (id.offset + index * 7919 + id.object.objectPath.length * 31 + id.version.length) >>> 0
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0
    out[i] = x >>> 24
  }
  return out
}

const fill = async (s: DiskStore, id: BlockId, length: number, index: number, bytes: number) => {
  const key = blockKey(id)
  const tmp = await s.createTemp(key)
  const data = bytesFor(id, index, bytes)
  await writeAll(tmp.fd, data, 0)
  await s.commit(id, length, id.offset + length * 4, { tmpPath: tmp.path, fd: tmp.fd, index, sum: hasher().h64Raw(data) })
}

const readUnit = async (s: DiskStore, id: BlockId, first: number, end: number): Promise<Array<Uint8Array> | undefined> => {
  const entry = s.lookup(blockKey(id))
  if (entry === undefined) return undefined
  const units: Array<Unit> = []
  if (!s.pin(entry, first, end, units)) return undefined
  try {
    const opened = s.ensureOpen(units)
    if (opened !== undefined && !(await opened)) return undefined
    return units.map((u) => {
      const buf = Buffer.alloc(u.bytes)
      expect(fs.readSync(u.fd, buf, 0, u.bytes, 0)).toBe(u.bytes)
      return new Uint8Array(buf)
    })
  } finally {
    s.release(units)
  }
}

describe("DiskStore", () => {
  it("commits whole blocks and serves their bytes through the open fd", async () => {
    const root = await tempDir()
    const s = await open({ dirs: [root], capacity: 1 << 20, pageSize: 0 })
    const id = blockId("a/b.bin")
    expect(s.missingRuns(blockKey(id), 0, 1)).toEqual([[0, 1]])
    await fill(s, id, 3000, 0, 3000)
    expect(s.missingRuns(blockKey(id), 0, 1)).toEqual([])
    expect(await readUnit(s, id, 0, 1)).toEqual([bytesFor(id, 0, 3000)])
    expect(s.stats()).toMatchObject({ blocks: 1, units: 1, residentBytes: 3000 })
    // No temp file is left behind and the block lives in its hash directory, with its checksums.
    await s.flush()
    expect(await fsp.readdir(path.join(root, "tmp"))).toEqual([])
    const dir = blockDirPath(root, blockDirName(blockKey(id), 0))
    expect((await fsp.readdir(dir)).sort()).toEqual(["block", "meta", "sums"])
  })

  it("pages: tracks present pages, persists the bitmap and reports missing runs", async () => {
    const root = await tempDir()
    const s = await open({ dirs: [root], capacity: 1 << 20, pageSize: 1024 })
    const id = blockId("paged", 4096)
    // 3500-byte block = pages of 1024, 1024, 1024, 428
    await fill(s, id, 3500, 1, 1024)
    await fill(s, id, 3500, 3, 428)
    const key = blockKey(id)
    expect(s.missingRuns(key, 0, 4)).toEqual([
      [0, 1],
      [2, 3]
    ])
    expect(await readUnit(s, id, 0, 2)).toBeUndefined()
    expect(await readUnit(s, id, 3, 4)).toEqual([bytesFor(id, 3, 428)])
    await s.close()
    stores.pop()
    const bitmap = await readBitmap(blockDirPath(root, blockDirName(key, 1024)))
    expect(bitmap?.isPresent(1)).toBe(true)
    expect(bitmap?.isPresent(3)).toBe(true)
    expect(bitmap?.count()).toBe(2)
  })

  it("evicts least recently used units to stay within capacity, never a pinned one", async () => {
    const root = await tempDir()
    let evicted = 0
    const s = await open({ dirs: [root], capacity: 4096, pageSize: 1024, onEvict: (n) => (evicted += n) })
    const ids = [0, 1, 2, 3, 4, 5].map((i) => blockId(`obj${i}`))
    for (const id of ids.slice(0, 4)) await fill(s, id, 1024, 0, 1024)
    expect(s.residentBytes).toBe(4096)
    // Touch obj0 so obj1 becomes the coldest, and pin obj1 so it cannot go either.
    expect(await readUnit(s, ids[0]!, 0, 1)).toBeDefined()
    const pinned: Array<Unit> = []
    expect(s.pin(s.lookup(blockKey(ids[1]!))!, 0, 1, pinned)).toBe(true)
    await fill(s, ids[4]!, 1024, 0, 1024)
    expect(s.residentBytes).toBeLessThanOrEqual(4096)
    expect(s.lookup(blockKey(ids[1]!))).toBeDefined() // pinned survives
    expect(s.lookup(blockKey(ids[2]!))).toBeUndefined() // coldest unpinned went
    expect(s.lookup(blockKey(ids[0]!))).toBeDefined()
    // The pinned unit's fd still reads its bytes.
    const buf = Buffer.alloc(1024)
    fs.readSync(pinned[0]!.fd, buf, 0, 1024, 0)
    expect(new Uint8Array(buf)).toEqual(bytesFor(ids[1]!, 0, 1024))
    s.release(pinned)
    await fill(s, ids[5]!, 1024, 0, 1024)
    expect(s.residentBytes).toBeLessThanOrEqual(4096)
    expect(evicted).toBe(2048)
    // Survivors still read correctly.
    for (const id of ids) {
      const got = await readUnit(s, id, 0, 1)
      if (got !== undefined) expect(got).toEqual([bytesFor(id, 0, 1024)])
    }
    await s.close()
    stores.pop()
    // Evicted blocks' directories are gone from disk.
    const gone = blockDirPath(root, blockDirName(blockKey(ids[2]!), 1024))
    expect(fs.existsSync(gone)).toBe(false)
  })

  it("rebuilds the index from disk on restart, drops junk and keeps LRU by age", async () => {
    const root = await tempDir()
    const s1 = await open({ dirs: [root], capacity: 1 << 20, pageSize: 1024 })
    const a = blockId("dir/a.bin", 0, "etag-1")
    const b = blockId("dir/b.bin", 8192, "etag-2")
    await fill(s1, a, 2048, 0, 1024)
    await fill(s1, a, 2048, 1, 1024)
    await fill(s1, b, 1500, 1, 476)
    await s1.close()
    stores.pop()
    // Junk a crash could leave: a stale temp file, a half-written page, a directory without meta.
    await fsp.writeFile(path.join(root, "tmp", "leftover"), "x")
    const bDir = blockDirPath(root, blockDirName(blockKey(b), 1024))
    await fsp.writeFile(path.join(bDir, "p0"), "short")
    await fsp.mkdir(path.join(root, "v1", "zz", "zz-no-meta"), { recursive: true })

    const s2 = await open({ dirs: [root], capacity: 1 << 20, pageSize: 1024 })
    expect(s2.stats()).toMatchObject({ blocks: 2, units: 3, residentBytes: 2048 + 476 })
    expect(await readUnit(s2, a, 0, 2)).toEqual([bytesFor(a, 0, 1024), bytesFor(a, 1, 1024)])
    expect(await readUnit(s2, b, 1, 2)).toEqual([bytesFor(b, 1, 476)])
    expect(s2.missingRuns(blockKey(b), 0, 2)).toEqual([[0, 1]])
    expect(fs.existsSync(path.join(bDir, "p0"))).toBe(false)
    await s2.flush()
    expect(await fsp.readdir(path.join(root, "tmp"))).toEqual([])
    expect(fs.existsSync(path.join(root, "v1", "zz", "zz-no-meta"))).toBe(false)
    const known = s2.knownVersions().map((k) => [k.object.objectPath, k.version, k.size]).sort()
    expect(known).toEqual([
      ["dir/a.bin", "etag-1", 2048 * 4],
      ["dir/b.bin", "etag-2", 8192 + 1500 * 4]
    ])
  })

  it("a restart with a different page size discards blocks of the old geometry", async () => {
    const root = await tempDir()
    const s1 = await open({ dirs: [root], capacity: 1 << 20, pageSize: 1024 })
    await fill(s1, blockId("x"), 1024, 0, 1024)
    await s1.close()
    stores.pop()
    const s2 = await open({ dirs: [root], capacity: 1 << 20, pageSize: 0 })
    expect(s2.stats().blocks).toBe(0)
    expect(await fsp.readdir(path.join(root, "v1", blockDirName(blockKey(blockId("x")), 1024).slice(0, 2)))).toEqual([])
  })

  it("a restart under a smaller capacity evicts the oldest units down to it", async () => {
    const root = await tempDir()
    const s1 = await open({ dirs: [root], capacity: 1 << 20, pageSize: 0 })
    for (let i = 0; i < 4; i++) {
      await fill(s1, blockId(`o${i}`), 1000, 0, 1000)
      await new Promise((r) => setTimeout(r, 15)) // distinct mtimes
    }
    await s1.close()
    stores.pop()
    const s2 = await open({ dirs: [root], capacity: 2500, pageSize: 0 })
    expect(s2.residentBytes).toBe(2000)
    expect(s2.lookup(blockKey(blockId("o0")))).toBeUndefined()
    expect(s2.lookup(blockKey(blockId("o3")))).toBeDefined()
  })

  it("spreads blocks over several cache dirs, each within its own capacity", async () => {
    const roots = [await tempDir(), await tempDir()]
    const s = await open({ dirs: roots, capacity: 3000, pageSize: 0 })
    for (let i = 0; i < 12; i++) await fill(s, blockId(`m${i}`), 1000, 0, 1000)
    for (const d of s.stats().perDir) expect(d.residentBytes).toBeLessThanOrEqual(3000)
    expect(s.stats().perDir.every((d) => d.residentBytes > 0)).toBe(true)
    for (let i = 0; i < 12; i++) {
      const got = await readUnit(s, blockId(`m${i}`), 0, 1)
      if (got !== undefined) expect(got).toEqual([bytesFor(blockId(`m${i}`), 0, 1000)])
    }
  })

  it("a unit whose file vanished is dropped and reported missing, not served", async () => {
    const root = await tempDir()
    const s1 = await open({ dirs: [root], capacity: 1 << 20, pageSize: 0 })
    const id = blockId("vanish")
    await fill(s1, id, 100, 0, 100)
    await s1.close()
    stores.pop()
    const s2 = await open({ dirs: [root], capacity: 1 << 20, pageSize: 0 })
    await fsp.rm(path.join(blockDirPath(root, blockDirName(blockKey(id), 0)), "block"))
    expect(await readUnit(s2, id, 0, 1)).toBeUndefined()
    expect(s2.lookup(blockKey(id))).toBeUndefined()
    expect(s2.residentBytes).toBe(0)
  })
})
