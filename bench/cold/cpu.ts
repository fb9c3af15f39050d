/**
 * CPU seconds per role (origin stub, workers, gateway, coordinator, this process with its
 * TalonClient and checks) over one run: on a 2-core box every arm competes for the same cores,
 * so where the CPU goes per byte read tells which process caps the speed.
 */
import { readdirSync, readFileSync } from "node:fs"

/** USER_HZ: /proc/<pid>/stat counts CPU time in these ticks. */
const CLK_TCK = 100

const ticks = (pid: number): number => {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8")
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ")
    return Number(f[11]) + Number(f[12])
  } catch {
    return 0
  }
}

/** `pid` and its descendants (a launcher may run the server in a child). */
const tree = (pid: number): ReadonlyArray<number> => {
  const out = [pid]
  for (let i = 0; i < out.length; i++) {
    try {
      for (const tid of readdirSync(`/proc/${out[i]}/task`)) {
        const kids = readFileSync(`/proc/${out[i]}/task/${tid}/children`, "utf8").trim()
        if (kids !== "") for (const k of kids.split(" ")) out.push(Number(k))
      }
    } catch {
      // gone: counts as nothing more
    }
  }
  return out
}

/** CPU seconds (user + system) used so far by each role's processes and this process. */
export const cpuSnapshot = (roles: Readonly<Record<string, ReadonlyArray<number>>>): Record<string, number> => {
  const out: Record<string, number> = {}
  for (const [role, pids] of Object.entries(roles)) {
    out[role] = pids.reduce((n, p) => n + tree(p).reduce((m, q) => m + ticks(q), 0), 0) / CLK_TCK
  }
  const self = process.cpuUsage()
  out["client"] = (self.user + self.system) / 1e6
  return out
}

/** CPU seconds per role between two snapshots. */
export const cpuDelta = (a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>): Record<string, number> => {
  const out: Record<string, number> = {}
  for (const k of Object.keys(b)) out[k] = Math.round(((b[k] ?? 0) - (a[k] ?? 0)) * 100) / 100
  return out
}
