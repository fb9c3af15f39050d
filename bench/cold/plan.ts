/**
 * cold-bench's pure parts: what each reader reads (sequential slices or a shuffled tiling of
 * 1–8 MiB ranges), how a piece is checked against the expected bytes, and the targets of
 * issue #22 evaluated from per-round ratios. No I/O here, so all of it is unit-tested.
 */

export const MiB = 1024 * 1024

export type Pattern = "seq" | "rand"

/** One byte range a reader asks for. */
export interface Piece {
  readonly offset: number
  readonly length: number
}

/** A workload: the access pattern and how many readers share one object. */
export interface Workload {
  readonly pattern: Pattern
  readonly readers: number
}

export const workloadName = (w: Workload): string => `${w.pattern}-${w.readers}`

/** mulberry32: small, seedable, the same stream on every machine. */
export const rng = (seed: number): (() => number) => {
  let s = seed >>> 0
  return () => {
    let t = (s = (s + 0x6d2b79f5) >>> 0)
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * Sequential: the object cut into `readers` contiguous slices, reader i streams slice i (one
 * reader = the whole object). Slices differ by at most one byte in length and cover the object.
 */
export const sequentialSlices = (size: number, readers: number): ReadonlyArray<Piece> => {
  const n = Math.max(1, Math.min(readers, size))
  const out: Array<Piece> = []
  for (let i = 0; i < n; i++) {
    const from = Math.floor((size * i) / n)
    const to = Math.floor((size * (i + 1)) / n)
    out.push({ offset: from, length: to - from })
  }
  return out
}

/**
 * Random: the object tiled into ranges of 1–8 MiB (unaligned ends, as records of a shuffled
 * dataset are), in a seeded random order. Every byte is read exactly once per run, so bytes
 * fetched from the origin ÷ bytes read measures over-fetch and read-ahead waste, not re-reads.
 * The last range may be shorter than `minLen`.
 */
export const shuffledRanges = (size: number, seed: number, minLen = MiB, maxLen = 8 * MiB): ReadonlyArray<Piece> => {
  const next = rng(seed)
  const out: Array<Piece> = []
  for (let off = 0; off < size; ) {
    const len = Math.min(size - off, minLen + Math.floor(next() * (maxLen - minLen + 1)))
    out.push({ offset: off, length: len })
    off += len
  }
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1))
    const t = out[i]!
    out[i] = out[j]!
    out[j] = t
  }
  return out
}

/** Splits a range into consecutive parts of at most `part` bytes (the aws CLI's multipart GET). */
export const parts = (piece: Piece, part: number): ReadonlyArray<Piece> => {
  const out: Array<Piece> = []
  for (let off = piece.offset; off < piece.offset + piece.length; off += part) {
    out.push({ offset: off, length: Math.min(part, piece.offset + piece.length - off) })
  }
  return out
}

/** Where a piece's bytes first differ from the expected object's, or -1 when they match (and fit). */
export const firstMismatch = (expected: Uint8Array, offset: number, bytes: Uint8Array): number => {
  if (offset < 0 || offset + bytes.length > expected.length) return Math.max(0, Math.min(bytes.length, expected.length - offset))
  const want = Buffer.from(expected.buffer, expected.byteOffset + offset, bytes.length)
  const got = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length)
  if (want.equals(got)) return -1
  for (let i = 0; i < bytes.length; i++) if (want[i] !== got[i]) return i
  return -1
}

/**
 * Tracks which bytes of a read arrived, in order, and that each matched: a reader feeds it the
 * chunks of one ranged response; `done` is true only when exactly `length` good bytes came.
 */
export class RangeCheck {
  private got = 0
  constructor(
    private readonly expected: Uint8Array,
    readonly piece: Piece
  ) {}

  /** Checks the next chunk; returns an error message or undefined. */
  push(chunk: Uint8Array): string | undefined {
    if (this.got + chunk.length > this.piece.length) {
      return `${this.got + chunk.length} bytes for a range of ${this.piece.length} at ${this.piece.offset}`
    }
    const at = firstMismatch(this.expected, this.piece.offset + this.got, chunk)
    if (at >= 0) return `wrong byte at object offset ${this.piece.offset + this.got + at} (range ${this.piece.offset}+${this.piece.length})`
    this.got += chunk.length
    return undefined
  }

  get received(): number {
    return this.got
  }

  /** An error message when the range ended short, else undefined. */
  finish(): string | undefined {
    return this.got === this.piece.length ? undefined : `${this.got} of ${this.piece.length} bytes at ${this.piece.offset} arrived`
  }
}

/** What one arm's run measured. */
export interface ColdResult {
  /** Decimal MB/s of verified bytes over the run's wall time (the unit). */
  readonly mb_s: number
  readonly seconds: number
  readonly bytes: number
  /** Bytes the origin sent during the run (and until its GETs drained) ÷ bytes read. */
  readonly origin_ratio: number
  readonly origin_gets: number
  readonly origin_heads: number
  /** The slowest reader's time to its first byte, ms. */
  readonly first_byte_ms: number
  readonly load1: number
  /** CPU seconds over the run (until the origin drained) per role: origin, workers, gateway, coordinator, client (the bench process). */
  readonly cpu_origin_s?: number
  readonly cpu_workers_s?: number
  readonly cpu_gateway_s?: number
  readonly cpu_coordinator_s?: number
  readonly cpu_client_s?: number
}

const r3 = (x: number): number => Math.round(x * 1000) / 1000

export const coldResult = (m: {
  readonly bytes: number
  readonly seconds: number
  readonly originBytes: number
  readonly originGets: number
  readonly originHeads: number
  readonly firstByteMs: number
  readonly load1: number
  readonly cpu?: Readonly<Record<string, number>>
}): ColdResult => ({
  mb_s: r3(m.bytes / 1e6 / m.seconds),
  seconds: r3(m.seconds),
  bytes: m.bytes,
  origin_ratio: m.bytes === 0 ? 0 : r3(m.originBytes / m.bytes),
  origin_gets: m.originGets,
  origin_heads: m.originHeads,
  first_byte_ms: r3(m.firstByteMs),
  load1: m.load1,
  ...(m.cpu === undefined
    ? {}
    : {
        cpu_origin_s: m.cpu["origin"] ?? 0,
        cpu_workers_s: m.cpu["workers"] ?? 0,
        cpu_gateway_s: m.cpu["gateway"] ?? 0,
        cpu_coordinator_s: m.cpu["coordinator"] ?? 0,
        cpu_client_s: m.cpu["client"] ?? 0
      })
})

/** A target of the issue, as a ratio of two arms' MB/s (per round) or a bound on one arm's origin ratio. */
export type Target =
  | { readonly kind: "speed"; readonly workload: string; readonly arm: string; readonly baseline: string; readonly atLeast: number; readonly label: string }
  | { readonly kind: "fetch"; readonly workload: string; readonly arm: string; readonly atMost: number; readonly label: string }

/** The targets for the workloads a run measured (arms it did not run are left out). */
export const targetsFor = (workloads: ReadonlyArray<string>, arms: (workload: string) => ReadonlyArray<string>): ReadonlyArray<Target> => {
  const out: Array<Target> = []
  for (const w of workloads) {
    const has = (a: string) => arms(w).includes(a)
    const speed = (arm: string, baseline: string, atLeast: number, label: string) => {
      if (has(arm) && has(baseline)) out.push({ kind: "speed", workload: w, arm, baseline, atLeast, label })
    }
    const fetch = (arm: string, atMost: number, label: string) => {
      if (has(arm)) out.push({ kind: "fetch", workload: w, arm, atMost, label })
    }
    if (w.startsWith("seq-")) {
      // One reader is compared with 8 ranged streams; N readers already are N direct streams.
      const direct = has("origin-8x") ? "origin-8x" : "origin"
      const streams = direct === "origin-8x" ? 8 : Number(w.slice(4))
      speed("client-cold", direct, 1.0, `cold sequential through TalonClient ≥ 1.0× the ${streams}-stream direct read`)
      if (w === "seq-1") speed("gateway-cold", "origin", 2.0, "cold sequential through the gateway, one stream ≥ 2× one direct stream")
      speed("client-warm", direct, 5.0, `warm ≥ 5× the ${streams}-stream direct read`)
      speed("client-into-warm", direct, 5.0, `warm ≥ 5× the ${streams}-stream direct read (readInto, reused buffers)`)
      fetch("client-cold", 1.25, "origin bytes ÷ bytes read ≤ 1.25 sequential")
      fetch("gateway-cold", 1.25, "origin bytes ÷ bytes read ≤ 1.25 sequential")
    } else {
      speed("client-cold", "origin", 0.9, "cold random ranges ≥ 0.9× direct for the same readers")
      speed("gateway-cold", "origin", 0.9, "cold random ranges ≥ 0.9× direct for the same readers")
      fetch("client-cold", 1.1, "origin bytes ÷ bytes read ≤ 1.1 random")
      fetch("gateway-cold", 1.1, "origin bytes ÷ bytes read ≤ 1.1 random")
    }
  }
  return out
}

export interface TargetVerdict {
  readonly workload: string
  readonly target: string
  readonly measure: string
  readonly median: number | null
  readonly per_round: string
  readonly bound: string
  readonly verdict: "met" | "not met" | "no data"
}

export const nearestRankMedian = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.max(1, Math.ceil(0.5 * s.length)) - 1]!
}

/**
 * Judges one target from per-round results (`byArm[arm][round - 1]`): speed targets on the
 * median of per-round MB/s ratios (arms paired within a round), fetch targets on the worst
 * round, since a bound on waste must hold every time.
 */
export const judge = (t: Target, byArm: Readonly<Record<string, ReadonlyArray<ColdResult>>>): TargetVerdict => {
  const fmt = (xs: ReadonlyArray<number>) => xs.map((x) => (Number.isFinite(x) ? String(r3(x)) : "-")).join(" ")
  if (t.kind === "speed") {
    const a = byArm[t.arm] ?? []
    const b = byArm[t.baseline] ?? []
    const per = a.map((x, i) => (b[i] && b[i]!.mb_s > 0 ? x.mb_s / b[i]!.mb_s : NaN)).filter((x) => Number.isFinite(x))
    const median = per.length === 0 ? null : r3(nearestRankMedian(per))
    return {
      workload: t.workload,
      target: t.label,
      measure: `${t.arm} / ${t.baseline} MB/s`,
      median,
      per_round: fmt(per),
      bound: `≥ ${t.atLeast}`,
      verdict: median === null ? "no data" : median >= t.atLeast ? "met" : "not met"
    }
  }
  const per = (byArm[t.arm] ?? []).map((x) => x.origin_ratio)
  const worst = per.length === 0 ? null : r3(Math.max(...per))
  return {
    workload: t.workload,
    target: t.label,
    measure: `${t.arm} origin bytes ÷ bytes read (worst round)`,
    median: worst,
    per_round: fmt(per),
    bound: `≤ ${t.atMost}`,
    verdict: worst === null ? "no data" : worst <= t.atMost ? "met" : "not met"
  }
}

const CPU_ROLES = ["origin", "workers", "gateway", "client"] as const

/**
 * CPU nanoseconds per byte read, per role and in total, median over an arm's rounds: where the
 * CPU of a run went (origin stub, workers, gateway, the reader process with its TalonClient and
 * checks). Undefined when the runs carry no CPU figures.
 */
export const cpuPerByte = (runs: ReadonlyArray<ColdResult>): Record<string, number> | undefined => {
  if (runs.length === 0 || runs.some((r) => r.cpu_workers_s === undefined || r.bytes === 0)) return undefined
  const per = (r: ColdResult, role: (typeof CPU_ROLES)[number]): number => ((r[`cpu_${role}_s`] ?? 0) * 1e9) / r.bytes
  const out: Record<string, number> = {}
  for (const role of CPU_ROLES) out[role] = Math.round(nearestRankMedian(runs.map((r) => per(r, role))) * 100) / 100
  out["total"] = Math.round(nearestRankMedian(runs.map((r) => CPU_ROLES.reduce((n, role) => n + per(r, role), 0))) * 100) / 100
  return out
}
