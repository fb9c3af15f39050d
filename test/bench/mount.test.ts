import { existsSync, readFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { checkBenchData } from "../../bench/lib/chartsData.js"
import { benchData, type Sample } from "../../bench/lib/mountData.js"

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..")
const params = { quick: true, objectBytes: 2 ** 28, rounds: 1, randomSeconds: 2, command: "npx tsx bench/mount-bench.ts --quick" }

const sample = (scenario: string, pass: number, arm: string, mibPerSec: number, readerCpuMsPerMiB?: number): Sample => ({
  scenario,
  pass,
  position: 0,
  arm,
  mibPerSec,
  bytes: 2 ** 28,
  seconds: 256 / mibPerSec,
  readerCpuMsPerMiB,
  clusterCpuMsPerMiB: 1
})

type R = Record<string, unknown>

describe("mount bench data", () => {
  // Pass 1 is slow for every arm (drift); ratios pair arms within a pass, so they do not see it.
  const samples: ReadonlyArray<Sample> = [
    sample("seq-cold", 1, "mount (dd)", 50, 1),
    sample("seq-cold", 1, "TalonClient", 100, 5),
    sample("seq-cold", 1, "gateway", 50),
    sample("seq-cold", 2, "mount (dd)", 400, 1),
    sample("seq-cold", 2, "TalonClient", 500, 5),
    sample("seq-warm", 1, "mount (dd, O_DIRECT)", 100, 1),
    sample("seq-warm", 1, "TalonClient", 50, 2),
    sample("seq-warm", 2, "mount (dd, O_DIRECT)", 900, 1),
    sample("seq-warm", 2, "TalonClient", 300, 2)
  ]
  const d = benchData(samples, params)

  it("is a bench data file whose ratios pair arms within a pass", () => {
    expect(checkBenchData(d, "mount")).toEqual([])
    const cold = d.ratios.find((r) => r["kind"] === "ratio" && r["scenario"] === "seq-cold" && r["arm"] === "mount (dd)") as R
    expect(cold["per_round"]).toBe("0.5 0.8")
    // The gateway ran in pass 1 only: its missing pass is shown, not paired with another.
    const gateway = d.ratios.find((r) => r["kind"] === "ratio" && r["arm"] === "gateway") as R
    expect(gateway["per_round"]).toBe("0.5 -")
    expect(gateway["n"]).toBe(1)
  })

  it("judges each target on the median of its per-pass ratios (nearest rank)", () => {
    const targets = d.ratios.filter((r) => r["kind"] === "target") as ReadonlyArray<R>
    expect(targets.map((t) => [t["scenario"], t["median"], t["verdict"]])).toEqual([
      ["seq-warm", 2, "met"],
      ["seq-cold", 0.5, "not met"]
    ])
  })

  it("reports reader CPU only for arms that have a reader process", () => {
    const reader = d.summary.filter((r) => r["metric"] === "reader_cpu_ms_per_mib").map((r) => r["arm"])
    expect(reader).not.toContain("gateway")
    expect(reader).toContain("mount (dd)")
    expect(d.summary.filter((r) => r["metric"] === "cluster_cpu_ms_per_mib").map((r) => r["arm"])).toContain("gateway")
  })

  it("says a target is not measured when its arms did not run", () => {
    const none = benchData([sample("seq-cold", 1, "TalonClient", 100)], params)
    expect(none.ratios.filter((r) => r["kind"] === "target").map((t) => t["verdict"])).toEqual(["not measured", "not measured"])
  })
})

describe("bench/data/mount.json", () => {
  const path = join(repoRoot, "bench/data/mount.json")
  it.skipIf(!existsSync(path))("is a bench data file with both targets judged and every sequential run reading the whole object", () => {
    const d = JSON.parse(readFileSync(path, "utf8"))
    expect(checkBenchData(d, "mount")).toEqual([])
    const targets = d.ratios.filter((r: R) => r["kind"] === "target")
    expect(targets).toHaveLength(2)
    for (const t of targets) expect(["met", "not met"]).toContain(t.verdict)
    for (const r of d.runs.filter((r: R) => String(r["scenario"]).startsWith("seq-"))) expect(r.bytes).toBe(d.params.object_bytes)
  })
})
