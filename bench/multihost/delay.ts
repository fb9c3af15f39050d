/**
 * One-way delay where the kernel has no netem: every host's inbound packets go through an
 * iptables NFQUEUE rule to talon-netdelay (netdelay.c, built here with the system C compiler),
 * which holds each for the delay and lets it go in order. Each direction of a round trip is
 * delayed once, at the receiving host, as netem at the switch port would. The rule and the
 * process live in the host's namespace and go with it.
 */
import { execFileSync } from "node:child_process"
import { mkdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, type Scope } from "effect"
import { NetnsError, type Topology } from "../kit/multihost/netns.js"
import { type ProcessFailed, start } from "../kit/multihost/procs.js"

const source = join(dirname(fileURLToPath(import.meta.url)), "netdelay.c")

/** Why the user-space delay cannot run here, or undefined. */
export const userDelayUnavailable = (): string | undefined => {
  try {
    execFileSync("iptables", ["--version"], { stdio: "ignore" })
  } catch {
    return "iptables is missing (apt-get install iptables)"
  }
  return undefined
}

export const buildNetdelay = (outDir: string): string => {
  mkdirSync(outDir, { recursive: true })
  const out = join(outDir, "talon-netdelay")
  const cc = process.env.CC || "cc"
  try {
    execFileSync(cc, ["-O2", "-Wall", "-Wextra", "-o", out, source], { stdio: "pipe" })
  } catch (e) {
    const err = e as { code?: string; stderr?: Buffer }
    throw new Error(err.code === "ENOENT" ? `building netdelay.c needs a C compiler: ${cc} was not found` : `${cc} failed on netdelay.c:\n${err.stderr?.toString() ?? String(e)}`)
  }
  return out
}

/** Delays every host's inbound traffic by `delayUs` until the scope closes. */
export const userDelay = (topo: Topology, delayUs: number, binary: string, logDir: string): Effect.Effect<void, NetnsError | ProcessFailed, Scope.Scope> =>
  Effect.gen(function* () {
    mkdirSync(logDir, { recursive: true })
    for (const h of topo.hosts.values()) {
      yield* Effect.try({
        try: () =>
          execFileSync("ip", ["netns", "exec", h.ns, "iptables", "-t", "mangle", "-A", "PREROUTING", "-i", "eth0", "-j", "NFQUEUE", "--queue-num", "0", "--queue-bypass"], { stdio: "pipe" }),
        catch: (e) => new NetnsError({ command: `iptables NFQUEUE in ${h.ns}`, detail: String((e as { stderr?: Buffer }).stderr ?? e) })
      })
      yield* start(h, { name: `netdelay ${h.name}`, argv: [binary, "--queue", "0", "--delay-us", String(delayUs)] }, join(logDir, `netdelay-${h.name}.log`))
    }
  })
