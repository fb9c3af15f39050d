/**
 * CPU per byte of the fill's disk side, in a bare process, so that the kernel's share of a fill
 * can be split without the origin stub and the sockets around it. Arms, alternated and
 * order-swapped per round, each writing `--size` bytes as 1 MiB units into a fresh dir:
 *
 * - page-sync: what DiskStore does per page: open a temp file, one pwrite, fdatasync, rename, close.
 * - page-nosync: the same without the fdatasync (`--no-sync-fills`).
 * - run4-sync: four pages per file with one pwritev and one fdatasync (fewer, larger units).
 * - copy: no disk at all; one extra memmove of every byte from 256 KiB receive buffers into a
 *   page staging buffer, the copy that reading straight into the stage would save.
 *
 * Prints user and system ns per byte of this process per arm and round (JSON lines).
 *
 *   npx tsx bench/miss-path/write-cost.ts [--size 256M] [--rounds 2] [--dir DIR]
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Flag, parseFlags } from "../lib/driver.js"

const flags = await parseFlags("miss-path-write-cost", "CPU ns per byte of the fill's disk writes, per way of writing.", {
  size: Flag.size("size", "256M", "Bytes written per arm and round."),
  rounds: Flag.number("rounds", 2, "Rounds; odd rounds run the arms in reverse order."),
  dir: Flag.text("dir", "", "Directory to write under (empty: the OS temp dir, a real disk here).")
})
const PAGE = 1024 * 1024
const RECV = 256 * 1024
const pages = Math.max(4, Math.floor(flags.size / PAGE))
const page = Buffer.allocUnsafeSlow(PAGE)
for (let i = 0; i < PAGE; i++) page[i] = (i * 31 + 7) & 0xff
const recv = Buffer.allocUnsafeSlow(RECV)
recv.set(page.subarray(0, RECV))
const root = fs.mkdtempSync(path.join(flags.dir || os.tmpdir(), "talon-write-cost-"))

const unitFiles = (dir: string, perFile: number, sync: boolean) => {
  for (let p = 0; p < pages; p += perFile) {
    const tmp = path.join(dir, `tmp-${p}`)
    const fd = fs.openSync(tmp, "w+", 0o644)
    if (perFile === 1) fs.writeSync(fd, page, 0, PAGE, 0)
    else fs.writevSync(fd, Array.from({ length: Math.min(perFile, pages - p) }, () => page), 0)
    if (sync) fs.fdatasyncSync(fd)
    fs.renameSync(tmp, path.join(dir, `unit-${p}`))
    fs.closeSync(fd)
  }
}

const arms: Record<string, (dir: string) => void> = {
  "page-sync": (dir) => unitFiles(dir, 1, true),
  "page-nosync": (dir) => unitFiles(dir, 1, false),
  "run4-sync": (dir) => unitFiles(dir, 4, true),
  copy: () => {
    for (let p = 0; p < pages; p++) for (let at = 0; at < PAGE; at += RECV) page.set(recv, at)
  }
}

const bytes = pages * PAGE
for (let round = 0; round < flags.rounds; round++) {
  const order = Object.keys(arms)
  if (round % 2 === 1) order.reverse()
  for (const arm of order) {
    const dir = path.join(root, `${arm}-${round}`)
    fs.mkdirSync(dir)
    const before = process.cpuUsage()
    arms[arm]!(dir)
    const used = process.cpuUsage(before)
    fs.rmSync(dir, { recursive: true, force: true })
    console.log(JSON.stringify({ bench: "miss-path-write-cost", round, arm, bytes, userNsPerByte: +((used.user * 1000) / bytes).toFixed(3), systemNsPerByte: +((used.system * 1000) / bytes).toFixed(3) }))
  }
}
fs.rmSync(root, { recursive: true, force: true })
