/**
 * How `talon prefetch` shows its progress: a bar redrawn in place on a terminal, a plain line
 * every few seconds otherwise (logs, CI), and the summary at the end. Pure text, no I/O.
 */
import type { PrefetchProgress, PrefetchSummary } from "./prefetch.js"

const MB = 1e6

const size = (bytes: number): string => {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"]
  let v = bytes
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`
}

const duration = (ms: number): string => {
  const s = Math.round(ms / 1000)
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  return m < 60 ? `${m}m${String(s % 60).padStart(2, "0")}s` : `${Math.floor(m / 60)}h${String(m % 60).padStart(2, "0")}m`
}

const rate = (p: PrefetchProgress): number => (p.elapsedMs > 0 ? p.bytesDone / MB / (p.elapsedMs / 1000) : 0)

/** Seconds left at the rate so far, or undefined before anything finished. */
const eta = (p: PrefetchProgress): string => {
  if (p.bytesDone <= 0 || p.elapsedMs <= 0) return "ETA --"
  const left = ((p.bytes - p.bytesDone) / p.bytesDone) * p.elapsedMs
  return `ETA ${duration(Math.max(0, left))}`
}

const counts = (p: PrefetchProgress): string =>
  `${p.objectsDone}/${p.objects} objects  ${size(p.bytesDone)}/${size(p.bytes)}  ${rate(p).toFixed(1)} MB/s  ${eta(p)}` +
  (p.failed > 0 ? `  ${p.failed} failed` : "")

/** One terminal line: `[#####.....]  42%  3/10 objects  1.2 GiB/2.9 GiB  310.4 MB/s  ETA 6s`. */
export const renderBar = (p: PrefetchProgress, width = 24): string => {
  const fraction = p.bytes > 0 ? Math.min(1, p.bytesDone / p.bytes) : 1
  const filled = Math.round(fraction * width)
  return `[${"#".repeat(filled)}${".".repeat(width - filled)}] ${String(Math.floor(fraction * 100)).padStart(3)}%  ${counts(p)}`
}

/** A log line for a non-terminal. */
export const renderLine = (p: PrefetchProgress): string => `prefetch: ${counts(p)}`

/** The closing report: what was warmed, what it cost at the origin, and every failure kept. */
export const renderSummary = (s: PrefetchSummary): string => {
  const lines = [
    `prefetched ${s.prefix}: ${s.objectsDone}/${s.objects} objects, ${size(s.datasetBytes)}` +
      (s.replicas > 1 ? ` x ${s.replicas} replicas` : "") +
      ` on ${s.workers} worker(s) in ${duration(s.elapsedMs)} (${rate(s).toFixed(1)} MB/s)`,
    `  already resident ${size(s.resident)}, fetched from the origin ${size(s.fetched)}` +
      (s.failed > 0 ? `, ${s.failed} Load(s) failed` : ", no failures")
  ]
  if (s.listingCapped) lines.push(`  note: the listing stopped at the coordinator's cap; objects past it were not prefetched`)
  for (const f of s.failures.slice(0, 20)) {
    lines.push(`  failed: ${f.object} [${f.offset}, ${f.offset + f.length})${f.worker === "" ? "" : ` on ${f.worker}`}: ${f.reason}`)
  }
  if (s.failures.length > 20 || s.failed > s.failures.length) lines.push(`  ... ${s.failed - Math.min(20, s.failures.length)} more failure(s)`)
  return lines.join("\n")
}
