import * as fc from "fast-check"
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { synthesize } from "../../src/mount/listing.js"
import { isComponent, parseExposed } from "../../src/mount/namespace.js"

describe("listing synthesis", () => {
  it("first components become files or directories; markers, bad components and shadowed files are counted", () => {
    const l = synthesize("/s3/b/d/", [
      { path: "/s3/b/d/", size: 0 },
      { path: "/s3/b/d/a.bin", size: 1 },
      { path: "/s3/b/d/sub/x", size: 2 },
      { path: "/s3/b/d/sub/y/z", size: 3 },
      { path: "/s3/b/d/both", size: 4 },
      { path: "/s3/b/d/both/inner", size: 5 },
      { path: "/s3/b/d//empty", size: 6 },
      { path: "/s3/b/d/../up", size: 7 },
      { path: `/s3/b/d/${"n".repeat(256)}`, size: 8 },
      { path: "/s3/b/d/ünï cødé %2F+.bin", size: 9 },
      { path: "/s3/b/other", size: 10 }
    ])
    expect([...l.children]).toEqual([
      ["a.bin", { dir: false, size: 1 }],
      ["both", { dir: true }],
      ["sub", { dir: true }],
      ["ünï cødé %2F+.bin", { dir: false, size: 9 }]
    ])
    expect(l.skipped).toBe(4)
    expect(l.shadowed).toBe(1)
  })

  it("property: every shown name is a valid component, and every key under the prefix is reachable or counted", () => {
    const component = fc.string({ minLength: 0, maxLength: 6, unit: fc.constantFrom("a", "b", ".", " ", "é", "%", "+", "日") })
    const key = fc.array(component, { minLength: 1, maxLength: 4 }).map((parts) => parts.join("/"))
    fc.assert(
      fc.property(fc.array(fc.record({ key, size: fc.nat() }), { maxLength: 30 }), (objects) => {
        const entries = objects.map((o) => ({ path: `/s3/b/p/${o.key}`, size: o.size }))
        const l = synthesize("/s3/b/p/", entries)
        for (const name of l.children.keys()) expect(isComponent(name)).toBe(true)
        const names = [...l.children.keys()]
        expect(names).toEqual([...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)))
        for (const o of objects) {
          const first = o.key.split("/")[0]!
          const c = l.children.get(first)
          if (o.key === "") continue
          if (!isComponent(first)) continue
          expect(c).toBeDefined()
          if (o.key.includes("/")) expect(c!.dir).toBe(true)
        }
      })
    )
  })
})

describe("exposed buckets", () => {
  it("parses s3/<bucket>, az/<container> and gs/<bucket>, dropping duplicates", () => {
    expect(parseExposed(["s3/a", "/az/c/", "azure/c", "s3/a", "gs/g", "gcs/g"])).toEqual(
      Either.right([
        { backend: "s3", bucket: "a" },
        { backend: "az", bucket: "c" },
        { backend: "gcs", bucket: "g" }
      ])
    )
  })

  it("refuses what it cannot show, saying the form", () => {
    for (const bad of [["s3"], ["gcs"], ["s3/a/b"], ["nope/x"], ["s3/.."], []]) {
      const r = parseExposed(bad)
      expect(Either.isLeft(r)).toBe(true)
      if (Either.isLeft(r)) expect(r.left).toMatch(/s3\/<bucket>/)
    }
  })
})
