// Preloaded (`node --import`) into a gateway by the nginx bench when GW_MEM_PROBE_DIR is set
// (bench/gateway-nginx-bench.ts --mem-probe): every GW_MEM_PROBE_MS (default 1000) it appends one
// JSON line to $GW_MEM_PROBE_DIR/<pid>.jsonl saying what the process's RSS is made of, which
// VmRSS alone cannot tell: file-backed pages, the main malloc arena ([heap]), the threads' malloc
// arenas (64 MiB-aligned anonymous reservations), other anonymous memory (V8's pages, large
// mallocs), and V8's own view (committed and used bytes per heap space, its malloced zones,
// external and ArrayBuffer memory). Diagnostics only: reading smaps costs ~1-3 ms per sample.
import { appendFileSync, readFileSync } from "node:fs"
import { join } from "node:path"
import * as v8 from "node:v8"

const dir = process.env.GW_MEM_PROBE_DIR
const every = Number(process.env.GW_MEM_PROBE_MS ?? "1000")
const ARENA = 64 * 1024 * 1024
const mib = (bytes) => Math.round((bytes / 1048576) * 10) / 10

/** RSS by kind of mapping, from /proc/self/smaps. */
export const mappings = (pid = "self") => {
  const maps = []
  let cur
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(.*)$/.exec(line)
    if (head !== null) {
      cur = { start: parseInt(head[1], 16), end: parseInt(head[2], 16), perms: head[3], inode: Number(head[4]), path: head[5], rss: 0 }
      maps.push(cur)
      continue
    }
    const m = /^Rss:\s+(\d+) kB/.exec(line)
    if (m !== null && cur !== undefined) cur.rss = Number(m[1]) * 1024
  }
  const out = { file: 0, brk: 0, arenas: 0, arenaCount: 0, stacks: 0, anon: 0 }
  for (let i = 0; i < maps.length; i++) {
    const m = maps[i]
    if (m.inode !== 0 || (m.path !== "" && !m.path.startsWith("["))) out.file += m.rss
    else if (m.path === "[heap]") out.brk += m.rss
    else if (m.path.startsWith("[stack")) out.stacks += m.rss
    else if (m.start % ARENA === 0 && m.perms.startsWith("rw")) {
      // glibc's thread arena: a 64 MiB-aligned reservation, its used part rw-p, the rest ---p.
      let end = m.end
      for (let j = i + 1; j < maps.length && maps[j].start === end && maps[j].perms === "---p" && maps[j].inode === 0; j++) end = maps[j].end
      if (end - m.start === ARENA) {
        out.arenas += m.rss
        out.arenaCount++
      } else out.anon += m.rss
    } else out.anon += m.rss
  }
  return out
}

export const sample = () => {
  const u = process.memoryUsage()
  const h = v8.getHeapStatistics()
  const spaces = {}
  for (const s of v8.getHeapSpaceStatistics()) spaces[s.space_name.replace("_space", "")] = [mib(s.physical_space_size), mib(s.space_used_size)]
  const m = mappings()
  return {
    t: Date.now(),
    rss: mib(u.rss),
    file: mib(m.file),
    brk: mib(m.brk),
    arenas: mib(m.arenas),
    arenaCount: m.arenaCount,
    otherAnon: mib(m.anon),
    stacks: mib(m.stacks),
    heapCommitted: mib(h.total_physical_size),
    heapUsed: mib(h.used_heap_size),
    v8Malloced: mib(h.malloced_memory),
    external: mib(u.external),
    arrayBuffers: mib(u.arrayBuffers),
    spaces
  }
}

if (dir !== undefined) {
  const file = join(dir, `${process.pid}.jsonl`)
  const tick = () => appendFileSync(file, JSON.stringify(sample()) + "\n")
  setInterval(tick, every).unref()
}
