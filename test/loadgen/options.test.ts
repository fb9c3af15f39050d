import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { Backend } from "../../src/core/ids.js"
import { parseAddr, parseIntList, parseObject } from "../../src/loadgen/options.js"
import { parseRssKb, parseStat } from "../../src/loadgen/procSampler.js"
import { table } from "../../src/loadgen/report.js"

describe("loadgen flag parsers", () => {
  it("reads conns lists, addresses and object names", () => {
    expect(parseIntList("--conns", "1,64, 256,1024")).toEqual(Either.right([1, 64, 256, 1024]))
    expect(Either.isLeft(parseIntList("--conns", "1,0"))).toBe(true)
    expect(parseAddr("--addr", "127.0.0.1:7001")).toEqual(Either.right({ host: "127.0.0.1", port: 7001 }))
    expect(Either.isLeft(parseAddr("--addr", "127.0.0.1"))).toBe(true)
    expect(parseObject("--object", "az://c/p/q", "s3", undefined)).toEqual(
      Either.right({ backend: Backend.Azure, bucket: "c", objectPath: "p/q" })
    )
    expect(parseObject("--object", "data/x.bin", "az", "ctr")).toEqual(
      Either.right({ backend: Backend.Azure, bucket: "ctr", objectPath: "data/x.bin" })
    )
    expect(Either.getLeft(parseObject("--object", "x.bin", "s3", undefined)).pipe((o) => o._tag)).toBe("Some")
  })
})

describe("/proc parsing", () => {
  it("takes utime and stime after a comm holding spaces and parentheses", () => {
    const line = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 1234 0 0 0 517 1033 0 0 20 0 3 0 100 1000 200"
    expect(parseStat(line)).toEqual({ utime: 517, stime: 1033 })
    expect(parseStat("garbage")).toBeUndefined()
  })

  it("reads VmRSS in kB", () => {
    expect(parseRssKb("Name:\tx\nVmPeak:\t 9999 kB\nVmRSS:\t    2048 kB\n")).toBe(2048)
    expect(parseRssKb("Name:\tx\n")).toBeUndefined()
  })
})

describe("report", () => {
  it("adds miss columns only when a run had misses", () => {
    const base = {
      addr: "a", conns: 64, depth: 16, range: 65536, threads: 1, seconds: 5, rps: 1000, mib_s: 62.5, p50_us: 10, p90_us: 20,
      p99_us: 30, p999_us: 40, max_us: 50, samples: 5000, errors: 0, error_frames: 0, first_error: null, bytes: 0, cpu_percent: null,
      kernel_share: null, rss_kb: null, cpu_us_per_req: null, client_cores: 0.5, client_us_per_req: 100, client_reads_per_req: 1, client_writes_per_req: 0.5, miss_share: 0, hit_samples: 5000, miss_samples: 0,
      hit_p50_us: 10, hit_p99_us: 30, miss_p50_us: null, miss_p99_us: null
    }
    expect(table([base])).not.toContain("miss")
    expect(table([base, { ...base, miss_share: 0.1 }])).toContain("miss p50/p99 µs")
    expect(table([base]).split("\n")[2]).toContain("1,000")
  })
})
