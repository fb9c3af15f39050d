import fc from "fast-check"
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { parsePrefix, planLoads } from "../../src/client/prefetchPlan.js"
import { renderBar, renderLine, renderSummary } from "../../src/client/prefetchProgress.js"

describe("planLoads", () => {
  it("covers [0, size) exactly, in order, each Load inside one block and at most loadBytes (property)", () => {
    fc.assert(
      fc.property(fc.nat({ max: 1 << 26 }), fc.integer({ min: 1, max: 1 << 22 }), fc.integer({ min: 1, max: 1 << 22 }), (size, blockSize, loadBytes) => {
        fc.pre(size / Math.min(blockSize, loadBytes) < 20_000)
        const pieces = planLoads(size, blockSize, loadBytes)
        let pos = 0
        for (const p of pieces) {
          expect(p.offset).toBe(pos)
          expect(p.length).toBeGreaterThan(0)
          expect(p.length).toBeLessThanOrEqual(loadBytes)
          expect(p.blockOffset % blockSize).toBe(0)
          expect(p.offset).toBeGreaterThanOrEqual(p.blockOffset)
          expect(p.offset + p.length).toBeLessThanOrEqual(p.blockOffset + blockSize)
          pos += p.length
        }
        expect(pos).toBe(size)
      })
    )
  })

  it("plans nothing for an empty object", () => {
    expect(planLoads(0, 1024, 1024)).toEqual([])
  })
})

describe("parsePrefix", () => {
  it("maps URIs and paths of every backend to the namespace path the coordinator lists", () => {
    expect(parsePrefix("s3://bkt/data/")).toEqual(Either.right("/s3/bkt/data/"))
    expect(parsePrefix("s3://bkt")).toEqual(Either.right("/s3/bkt"))
    expect(parsePrefix("az://ctr/x")).toEqual(Either.right("/az/ctr/x"))
    expect(parsePrefix("azure://ctr/x")).toEqual(Either.right("/az/ctr/x"))
    expect(parsePrefix("gs://b/x")).toEqual(Either.right("/gcs/b/x"))
    expect(parsePrefix("/s3/bkt/x")).toEqual(Either.right("/s3/bkt/x"))
  })

  it("refuses anything else with the forms it expects, and never throws (property)", () => {
    for (const bad of ["", "bkt/x", "s3://", "s3:///x", "ftp://h/x", "/tmp/x", "s3:/bkt/x"]) {
      const r = parsePrefix(bad)
      expect(Either.isLeft(r), bad).toBe(true)
      if (Either.isLeft(r)) expect(r.left.message).toContain("expected s3://bucket/prefix or az://container/prefix")
    }
    fc.assert(fc.property(fc.string(), (s) => void parsePrefix(s)))
  })
})

describe("prefetch progress text", () => {
  const progress = { objects: 10, objectsDone: 3, bytes: 4 * 1024 ** 3, bytesDone: 1024 ** 3, fetched: 1024 ** 3, resident: 0, failed: 0, elapsedMs: 10_000 }

  it("shows objects, bytes, MB/s and the ETA at the rate so far", () => {
    const bar = renderBar(progress, 20)
    expect(bar).toMatch(/^\[#####\.{15}\]  25%  3\/10 objects  1\.0 GiB\/4\.0 GiB  107\.4 MB\/s  ETA 30s$/)
    expect(renderLine(progress)).toBe("prefetch: 3/10 objects  1.0 GiB/4.0 GiB  107.4 MB/s  ETA 30s")
    expect(renderLine({ ...progress, bytesDone: 0 })).toContain("ETA --")
  })

  it("summarises what was resident, what was fetched and every failure", () => {
    const text = renderSummary({
      ...progress,
      objectsDone: 10,
      bytesDone: progress.bytes,
      resident: 3 * 1024 ** 3,
      failed: 1,
      prefix: "s3://b/p/",
      datasetBytes: 2 * 1024 ** 3,
      replicas: 2,
      workers: 3,
      listingCapped: false,
      failures: [{ object: "s3://b/p/x", offset: 0, length: 10, worker: "127.0.0.1:7001", reason: "origin said 403" }]
    })
    expect(text).toContain("prefetched s3://b/p/: 10/10 objects, 2.0 GiB x 2 replicas on 3 worker(s) in 10s")
    expect(text).toContain("already resident 3.0 GiB, fetched from the origin 1.0 GiB, 1 Load(s) failed")
    expect(text).toContain("failed: s3://b/p/x [0, 10) on 127.0.0.1:7001: origin said 403")
  })
})
