/** VersionCache: answers within the TTL, renews a read entry past half of it in the background, never serves past it. */
import { describe, expect, it } from "@effect/vitest"
import type { ObjectStat } from "../../src/backend/BackendStore.js"
import { VersionCache } from "../../src/worker/miss/VersionCache.js"

const setup = () => {
  let now = 1_000
  const cache = new VersionCache(1_000, () => now)
  const calls: Array<(r: ObjectStat | Error) => void> = []
  const head = () =>
    new Promise<ObjectStat>((resolve, reject) => calls.push((r) => (r instanceof Error ? reject(r) : resolve(r))))
  return { cache, calls, head, at: (t: number) => void (now = t) }
}
const v = (version: string): ObjectStat => ({ size: 10, version })
const settle = () => new Promise((r) => setImmediate(r))

describe("VersionCache", () => {
  it("renews a read entry in the background past half its TTL; reads never wait for it", async () => {
    const { cache, calls, head, at } = setup()
    const first = cache.resolve("k", head)
    calls[0]!(v("v1"))
    expect(await first).toEqual(v("v1"))
    at(1_400)
    expect(cache.fresh("k")).toEqual(v("v1"))
    expect(calls).toHaveLength(1) // before half the TTL: no origin request
    at(1_600)
    expect(cache.fresh("k")).toEqual(v("v1")) // answered at once while the renewal is out
    expect(cache.fresh("k")).toEqual(v("v1"))
    expect(calls).toHaveLength(2) // one renewal, however many reads
    calls[1]!(v("v2"))
    await settle()
    expect(cache.fresh("k")).toEqual(v("v2")) // a changed object is seen before the old entry expired
    at(2_500)
    expect(cache.fresh("k")).toEqual(v("v2")) // renewed at 1600: fresh until 2600
  })

  it("a failed renewal leaves the entry to expire at its TTL, and nothing is served past it", async () => {
    const { cache, calls, head, at } = setup()
    const first = cache.resolve("k", head)
    calls[0]!(v("v1"))
    await first
    at(1_700)
    expect(cache.fresh("k")).toEqual(v("v1"))
    calls[1]!(new Error("origin down"))
    await settle()
    at(1_999)
    expect(cache.fresh("k")).toEqual(v("v1"))
    expect(calls).toHaveLength(3) // the next read past half the TTL tries again
    at(2_000)
    expect(cache.fresh("k")).toBeUndefined()
  })

  it("never renews a seeded entry (its owner decides)", () => {
    const { cache, calls, at } = setup()
    cache.seed("k", v("v1"), 2_000)
    at(1_900)
    expect(cache.fresh("k")).toEqual(v("v1"))
    expect(calls).toHaveLength(0)
    at(2_000)
    expect(cache.fresh("k")).toBeUndefined()
  })
})
