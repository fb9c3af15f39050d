import { describe, expect, it } from "vitest"
import { InodeTable, ROOT_INO } from "../../src/mount/InodeTable.js"

describe("InodeTable", () => {
  it("a name keeps its inode while anything refers to it; forget to zero drops it", () => {
    const t = new InodeTable(100, 0)
    const root = t.get(ROOT_INO)!
    const a = t.child(root, "s3", "backend", 0)
    expect(t.child(root, "s3", "backend", 0)).toBe(a)
    expect(a.path).toBe("s3")
    const f = t.child(a, "x.bin", "file", 0)
    expect(f.path).toBe("s3/x.bin")
    t.lookedUp(f)
    t.lookedUp(f)
    t.forget(f.ino, 1)
    expect(t.get(f.ino)).toBe(f)
    t.forget(f.ino, 1)
    expect(t.get(f.ino)).toBeUndefined()
    expect(t.find(a.ino, "x.bin")).toBeUndefined()
    // A new lookup of the same name is a new inode.
    expect(t.child(a, "x.bin", "file", 0).ino).not.toBe(f.ino)
  })

  it("an open handle pins a forgotten node until release; the root is never dropped", () => {
    const t = new InodeTable(100, 0)
    const root = t.get(ROOT_INO)!
    const f = t.child(root, "f", "file", 0)
    t.lookedUp(f)
    f.opens++
    t.forget(f.ino, 1)
    expect(t.get(f.ino)).toBe(f)
    f.opens--
    t.release(f)
    expect(t.get(f.ino)).toBeUndefined()
    t.forget(ROOT_INO, 5)
    t.release(root)
    expect(t.get(ROOT_INO)).toBe(root)
  })

  it("stays bounded: past the bound unpinned nodes go oldest first, pinned ones stay", () => {
    const t = new InodeTable(1000, 0)
    const root = t.get(ROOT_INO)!
    const pinned = []
    for (let i = 0; i < 50; i++) {
      const n = t.child(root, `pinned-${i}`, "file", 0)
      t.lookedUp(n)
      pinned.push(n)
    }
    for (let i = 0; i < 100_000; i++) t.child(root, `k${i}`, "file", 0)
    expect(t.size).toBeLessThanOrEqual(1000)
    for (const n of pinned) expect(t.get(n.ino)).toBe(n)
    expect(t.find(ROOT_INO, "k99999")).toBeDefined()
    expect(t.find(ROOT_INO, "k0")).toBeUndefined()
    expect(t.evicted).toBeGreaterThan(98_000)
  })

  it("a name that changes kind keeps its inode and forgets what it knew", () => {
    const t = new InodeTable(100, 0)
    const root = t.get(ROOT_INO)!
    const n = t.child(root, "x", "file", 0)
    n.version = "v1"
    n.kernelVersion = "v1"
    const d = t.child(root, "x", "dir", 0)
    expect(d).toBe(n)
    expect(d.kind).toBe("dir")
    expect(d.version).toBeUndefined()
    expect(d.kernelVersion).toBeUndefined()
  })
})
