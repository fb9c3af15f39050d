/**
 * What durable, verified cache files cost (BENCHMARKS.md "Durable cache files").
 *
 *   npx tsx bench/store-durability.ts [--rounds 6] [--pages 48] [--page-size 1M] [--dir DIR]
 *
 * 1. Miss path, fsync vs none: the worker's own Fetcher fills `--pages` pages into a fresh
 *    DiskStore on the cache dir's filesystem (default: the OS temp dir) from an in-memory
 *    origin that hands 64 KiB chunks, so only the store's work is timed: write, XXH64, then
 *    fdatasync (arm "fsync") or not (arm "nofsync"), rename, index. Paired rounds, order
 *    swapped every round (bench/lib/rounds.ts); reports per-page fill time and the ratio.
 * 2. Hashing: MB/s of XXH64 (the store's checksum) and node:crypto SHA-256 over 1 MiB, in
 *    64 KiB updates, alternated in rounds.
 * 3. Verify: the time to re-hash one cached page from the page cache (checkFile), which is
 *    what a verify-on-every-hit would add to each hit, and the CPU share of the background
 *    scrub at its default 16 MiB/s; and a size check (stat) per open page.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { median, roundOrder, spread } from "./lib/rounds.js"
import { Backend, type BlockId } from "../src/core/ids.js"
import { Flag, parseFlags } from "./lib/driver.js"
import { fetchRun, type RangeFetch } from "../src/worker/miss/fetchRun.js"
import { checkFile, hasher, loadHasher } from "../src/worker/store/checksum.js"
import { DiskStore } from "../src/worker/store/DiskStore.js"
import { blockKey } from "../src/worker/store/layout.js"

const flags = await parseFlags("store-durability", "What durable, verified cache files cost: fill with and without fsync, hashing, verify and size checks.", {
  rounds: Flag.number("rounds", 6, "Paired rounds of the fill comparison."),
  pages: Flag.number("pages", 48, "Pages filled per run."),
  pageSize: Flag.size("page-size", "1M", "Page size."),
  dir: Flag.text("dir", os.tmpdir(), "Directory on the filesystem to measure (the cache dir's).")
})
const ROUNDS = flags.rounds
const PAGES = flags.pages
const PAGE = flags.pageSize
const BASE = flags.dir
const CHUNK = 64 * 1024

const source = Buffer.alloc(PAGES * PAGE)
for (let i = 0; i < source.length; i += 4) source.writeUInt32LE((i * 2654435761) >>> 0, i)

/** Fills PAGES pages into a fresh store; ms per page. */
const fillOnce = async (fsync: boolean): Promise<number> => {
  const dir = await fsp.mkdtemp(path.join(BASE, "talon-durability-"))
  try {
    const store = await DiskStore.open({ dirs: [dir], capacity: 4 * PAGES * PAGE, pageSize: PAGE, fsync })
    const fetchRange: RangeFetch = async (_o, _v, offset, length, sink) => {
      for (let at = offset; at < offset + length; at += CHUNK) await sink(source.subarray(at, Math.min(at + CHUNK, offset + length)))
    }
    const id: BlockId = { object: { backend: Backend.S3, bucket: "b", objectPath: "o" }, offset: 0, blockSize: PAGES * PAGE, version: "v" }
    const started = performance.now()
    await fetchRun({ store, pageSize: PAGE, fetchRange }, id, blockKey(id), PAGES * PAGE, PAGES * PAGE, 0, PAGES, () => {})
    const ms = (performance.now() - started) / PAGES
    await store.close()
    return ms
  } finally {
    await fsp.rm(dir, { recursive: true, force: true })
  }
}

const fmt = (n: number, d = 3) => n.toFixed(d)

const fillRounds = async () => {
  const arms = [
    { name: "nofsync", run: () => fillOnce(false) },
    { name: "fsync", run: () => fillOnce(true) }
  ]
  const per: Record<string, Array<number>> = { nofsync: [], fsync: [] }
  const ratios: Array<number> = []
  await fillOnce(true) // warm-up
  for (let r = 0; r < ROUNDS; r++) {
    const got: Record<string, number> = {}
    for (const a of roundOrder(arms.length, r)) got[arms[a]!.name] = await arms[a]!.run()
    per.nofsync!.push(got.nofsync!)
    per.fsync!.push(got.fsync!)
    ratios.push(got.fsync! / got.nofsync!)
  }
  const s = (v: Array<number>) => spread(v)
  console.log(`fill ${PAGES} pages of ${PAGE} bytes on ${BASE}, ${ROUNDS} paired rounds (order swapped):`)
  for (const k of ["nofsync", "fsync"]) {
    const x = s(per[k]!)
    console.log(`  ${k.padEnd(8)} ms/page median ${fmt(x.median)} (q1 ${fmt(x.q1)}, q3 ${fmt(x.q3)})  MB/s ${fmt(PAGE / 1e6 / (x.median / 1000), 0)}`)
  }
  const rs = s(ratios)
  console.log(`  fsync/nofsync per-round ratio median ${fmt(rs.median, 2)} (min ${fmt(rs.min, 2)}, max ${fmt(rs.max, 2)}): ${ratios.map((r) => fmt(r, 2)).join(" ")}`)
  console.log(`  fsync adds ${fmt(median(per.fsync!) - median(per.nofsync!))} ms per ${PAGE}-byte page (median difference)`)
}

const hashRounds = () => {
  const buf = source.subarray(0, 1 << 20)
  const xxh = () => {
    const h = hasher().create64()
    for (let o = 0; o < buf.length; o += CHUNK) h.update(buf.subarray(o, o + CHUNK))
    return h.digest()
  }
  const sha = () => {
    const h = createHash("sha256")
    for (let o = 0; o < buf.length; o += CHUNK) h.update(buf.subarray(o, o + CHUNK))
    return h.digest()
  }
  const mbps = (f: () => unknown) => {
    const n = 64
    const t = performance.now()
    for (let i = 0; i < n; i++) f()
    return (n * buf.length) / 1e6 / ((performance.now() - t) / 1000)
  }
  mbps(xxh), mbps(sha)
  const x: Array<number> = []
  const s: Array<number> = []
  for (let r = 0; r < ROUNDS * 2; r++) {
    for (const a of roundOrder(2, r)) (a === 0 ? x : s).push(mbps(a === 0 ? xxh : sha))
  }
  console.log(`hash 1 MiB in 64 KiB updates, ${ROUNDS * 2} rounds: XXH64 ${fmt(median(x), 0)} MB/s, SHA-256 ${fmt(median(s), 0)} MB/s (ratio ${fmt(median(x) / median(s), 1)})`)
}

const verifyCost = async () => {
  const dir = await fsp.mkdtemp(path.join(BASE, "talon-verify-"))
  try {
    const file = path.join(dir, "p0")
    const page = source.subarray(0, PAGE)
    fs.writeFileSync(file, page)
    const sum = hasher().h64Raw(page)
    const fd = fs.openSync(file, "r")
    const scratch = new Uint8Array(256 * 1024)
    const times: Array<number> = []
    for (let i = 0; i < 200; i++) {
      const t = performance.now()
      const r = await checkFile(fd, PAGE, sum, scratch)
      times.push(performance.now() - t)
      if (!r.ok) throw new Error("verify failed")
    }
    fs.closeSync(fd)
    const v = spread(times.slice(20))
    console.log(`verify one ${PAGE}-byte page from the page cache: median ${fmt(v.median)} ms (q1 ${fmt(v.q1)}, q3 ${fmt(v.q3)})`)
    console.log(`  scrub at 16 MiB/s = ${fmt((16 * 1024 * 1024) / PAGE)} pages/s: ~${fmt(((16 * 1024 * 1024) / PAGE) * v.median / 10, 2)} % of one core`)
    const files = 1024
    const fds: Array<number> = []
    for (let i = 0; i < files; i++) {
      const f = path.join(dir, `s${i}`)
      fs.writeFileSync(f, "x")
      fds.push(fs.openSync(f, "r"))
    }
    const stats: Array<number> = []
    for (let r = 0; r < 20; r++) {
      const t = performance.now()
      for (const fd of fds) fs.fstatSync(fd)
      stats.push(((performance.now() - t) * 1000) / files)
    }
    for (const f of fds) fs.closeSync(f)
    console.log(`size check: ${fmt(median(stats), 2)} us per open page (fstat on the event loop, ${files} fds, 20 rounds)`)
  } finally {
    await fsp.rm(dir, { recursive: true, force: true })
  }
}

await loadHasher()
await fillRounds()
hashRounds()
await verifyCost()
