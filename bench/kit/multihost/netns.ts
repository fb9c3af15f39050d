/**
 * Hosts as Linux network namespaces: one namespace per host, each with an `eth0` veth whose
 * other end sits on a bridge in a switch namespace of its own. Each switch port shapes the
 * traffic toward its host (tbf for the rate, netem for the one-way delay), so a transfer from
 * A to B is paced by B's port and a round trip pays the delay twice; shaping at the switch,
 * not in the sender's own qdisc, keeps TCP small-queue accounting out of the measurement.
 *
 * Every name starts with a prefix, so a run that died (kill -9, power loss) is cleaned up by
 * the next one: `sweep(prefix)` kills the processes left in matching namespaces (by pid, from
 * `ip netns pids`) and deletes the namespaces and their /etc/netns hosts files. Deleting a
 * namespace deletes its veth ends and the bridge with it; nothing is created in the root one.
 */
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Data, Effect, type Scope } from "effect"

export class NetnsError extends Data.TaggedError("NetnsError")<{ readonly command: string; readonly detail: string }> {
  override get message() {
    return `\`${this.command}\` failed: ${this.detail}`
  }
}

export class NetnsUnavailable extends Data.TaggedError("NetnsUnavailable")<{ readonly reason: string }> {
  override get message() {
    return `network namespaces are not available here: ${this.reason}`
  }
}

export interface Shape {
  /** Link rate in bits per second (0 = unshaped). */
  readonly rateBps: number
  /** One-way delay added at the switch port, microseconds. */
  readonly delayUs: number
}

export interface Host {
  readonly name: string
  /** The namespace, `<prefix>-<name>`. */
  readonly ns: string
  readonly ip: string
}

export interface Topology {
  readonly prefix: string
  /** The root namespace's own address on the bridge (unshaped), from which the harness probes. */
  readonly probeIp: string
  readonly switchNs: string
  readonly hosts: ReadonlyMap<string, Host>
  readonly shape: Shape
  readonly host: (name: string) => Host
}

const run = (cmd: string, args: ReadonlyArray<string>): string => {
  try {
    return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
  } catch (e) {
    const err = e as { stderr?: string; message: string }
    throw new NetnsError({ command: [cmd, ...args].join(" "), detail: (err.stderr ?? "").trim() || err.message })
  }
}

const ip = (...args: ReadonlyArray<string>) => run("ip", args)

/** Why namespaces cannot be made here, or undefined when they can (root and `ip` present). */
export const unavailableReason = (): string | undefined => {
  if (process.platform !== "linux") return `needs Linux, this is ${process.platform}`
  if (process.getuid?.() !== 0) return "needs root (ip netns add); run as root, e.g. sudo"
  try {
    execFileSync("ip", ["netns", "list"], { stdio: "ignore" })
  } catch {
    return "the `ip` command (iproute2) is missing or cannot list namespaces; apt-get install iproute2"
  }
  try {
    execFileSync("tc", ["-V"], { stdio: "ignore" })
  } catch {
    return "the `tc` command (iproute2) is missing; apt-get install iproute2"
  }
  return undefined
}

export const listNamespaces = (): ReadonlyArray<string> =>
  ip("netns", "list")
    .split("\n")
    .map((l) => l.trim().split(/\s+/)[0] ?? "")
    .filter((n) => n !== "")

/** Pids of the processes running in a namespace. */
export const pidsIn = (ns: string): ReadonlyArray<number> => {
  try {
    return ip("netns", "pids", ns)
      .split("\n")
      .map((l) => Number(l.trim()))
      .filter((n) => Number.isInteger(n) && n > 0)
  } catch {
    return []
  }
}

const etcNetns = (ns: string) => join("/etc/netns", ns)

/** Kills what runs in every `<prefix>-*` namespace and deletes those namespaces. Returns what it removed. */
export const sweep = (prefix: string): ReadonlyArray<string> => {
  const mine = listNamespaces().filter((n) => n.startsWith(`${prefix}-`))
  for (const ns of mine) {
    for (const pid of pidsIn(ns)) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
  }
  try {
    ip("link", "del", `${prefix}0`)
  } catch {
    // not there (or went with the switch namespace)
  }
  for (const ns of mine) {
    try {
      ip("netns", "del", ns)
    } catch {
      // a namespace still pinned by an exiting process goes when that process does
    }
    rmSync(etcNetns(ns), { recursive: true, force: true })
  }
  return mine
}

const shapePort = (ns: string, dev: string, shape: Shape) => {
  if (shape.rateBps <= 0 && shape.delayUs <= 0) return
  const tc = (...args: ReadonlyArray<string>) => run("ip", ["netns", "exec", ns, "tc", ...args])
  if (shape.rateBps > 0) {
    // A bucket of at least 2 ms at line rate, and never below one 64 KiB GSO segment.
    const burst = Math.max(256 * 1024, Math.ceil((shape.rateBps / 8) * 0.002))
    tc("qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate", `${shape.rateBps}bit`, "burst", String(burst), "latency", "50ms")
    if (shape.delayUs > 0) tc("qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "netem", "delay", `${shape.delayUs}us`, "limit", "100000")
  } else {
    tc("qdisc", "add", "dev", dev, "root", "handle", "10:", "netem", "delay", `${shape.delayUs}us`, "limit", "100000")
  }
}

/**
 * Builds the hosts on 10.<net>.0.0/24 (first host .10) and writes each namespace an /etc/hosts
 * naming every host, so processes resolve each other by name as they do under compose.
 * Torn down (processes killed, namespaces deleted) when the scope closes.
 */
export const topology = (options: {
  readonly prefix: string
  readonly hosts: ReadonlyArray<string>
  readonly shape: Shape
  readonly net?: number
}): Effect.Effect<Topology, NetnsError | NetnsUnavailable, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        const reason = unavailableReason()
        if (reason !== undefined) throw new NetnsUnavailable({ reason })
        const { prefix, shape } = options
        const net = options.net ?? 213
        sweep(prefix)
        const switchNs = `${prefix}-switch`
        ip("netns", "add", switchNs)
        ip("-n", switchNs, "link", "add", "br0", "type", "bridge")
        ip("-n", switchNs, "link", "set", "br0", "up")
        // The harness's leg: `<prefix>0` in the root namespace, gone when the switch namespace is.
        const probeIp = `10.${net}.0.1`
        ip("link", "add", `${prefix}0`, "type", "veth", "peer", "name", "probe", "netns", switchNs)
        ip("-n", switchNs, "link", "set", "probe", "master", "br0")
        ip("-n", switchNs, "link", "set", "probe", "up")
        ip("addr", "add", `${probeIp}/24`, "dev", `${prefix}0`)
        ip("link", "set", `${prefix}0`, "up")
        const hosts = new Map<string, Host>()
        options.hosts.forEach((name, i) => {
          const host: Host = { name, ns: `${prefix}-${name}`, ip: `10.${net}.0.${10 + i}` }
          const port = `p${i}`
          ip("netns", "add", host.ns)
          ip("link", "add", "eth0", "netns", host.ns, "type", "veth", "peer", "name", port, "netns", switchNs)
          ip("-n", switchNs, "link", "set", port, "master", "br0")
          ip("-n", switchNs, "link", "set", port, "up")
          ip("-n", host.ns, "link", "set", "lo", "up")
          ip("-n", host.ns, "addr", "add", `${host.ip}/24`, "dev", "eth0")
          ip("-n", host.ns, "link", "set", "eth0", "up")
          shapePort(switchNs, port, shape)
          hosts.set(name, host)
        })
        const hostsFile = ["127.0.0.1 localhost", ...[...hosts.values()].map((h) => `${h.ip} ${h.name}`)].join("\n") + "\n"
        for (const h of hosts.values()) {
          mkdirSync(etcNetns(h.ns), { recursive: true })
          writeFileSync(join(etcNetns(h.ns), "hosts"), hostsFile)
        }
        const host = (name: string): Host => {
          const h = hosts.get(name)
          if (h === undefined) throw new Error(`no host ${name} in this topology (hosts: ${[...hosts.keys()].join(", ")})`)
          return h
        }
        return { prefix, probeIp, switchNs, hosts, shape, host }
      },
      catch: (e) => (e instanceof NetnsError || e instanceof NetnsUnavailable ? e : new NetnsError({ command: "topology", detail: String(e) }))
    }).pipe(Effect.tapError(() => Effect.sync(() => sweep(options.prefix)))),
    (t) => Effect.sync(() => sweep(t.prefix))
  )

/**
 * Drops every packet between `host` and `peerIps` (both directions), silently, as a cut cable
 * would: clsact filters on eth0 redirect them (mirred, the one tc action small kernels tend to
 * have; gact `drop` often is not built) into a veth whose peer is down, which discards them.
 */
export const cutOff = (host: Host, peerIps: ReadonlyArray<string>): Effect.Effect<void, NetnsError> =>
  Effect.try({
    try: () => {
      const tc = (...args: ReadonlyArray<string>) => run("ip", ["netns", "exec", host.ns, "tc", ...args])
      ip("-n", host.ns, "link", "add", "cut0", "type", "veth", "peer", "name", "cut1")
      ip("-n", host.ns, "link", "set", "cut0", "up")
      tc("qdisc", "add", "dev", "eth0", "clsact")
      for (const peer of peerIps) {
        tc("filter", "add", "dev", "eth0", "egress", "protocol", "ip", "u32", "match", "ip", "dst", `${peer}/32`, "action", "mirred", "egress", "redirect", "dev", "cut0")
        tc("filter", "add", "dev", "eth0", "ingress", "protocol", "ip", "u32", "match", "ip", "src", `${peer}/32`, "action", "mirred", "egress", "redirect", "dev", "cut0")
      }
    },
    catch: (e) => (e instanceof NetnsError ? e : new NetnsError({ command: "cutOff", detail: String(e) }))
  })

/** Undoes `cutOff`. */
export const heal = (host: Host): Effect.Effect<void, NetnsError> =>
  Effect.try({
    try: () => {
      run("ip", ["netns", "exec", host.ns, "tc", "qdisc", "del", "dev", "eth0", "clsact"])
      ip("-n", host.ns, "link", "del", "cut0")
    },
    catch: (e) => (e instanceof NetnsError ? e : new NetnsError({ command: "heal", detail: String(e) }))
  })

/**
 * Whether this kernel has a queueing discipline (`netem` is often built out of small VM kernels,
 * e.g. CONFIG_NET_SCH_NETEM unset), tried on a veth pair in a throwaway namespace.
 */
export const qdiscAvailable = (prefix: string, kind: string): boolean => {
  const ns = `${prefix}-qdisc-probe`
  try {
    if (listNamespaces().includes(ns)) ip("netns", "del", ns)
    ip("netns", "add", ns)
    ip("-n", ns, "link", "add", "a", "type", "veth", "peer", "name", "b")
    run("ip", ["netns", "exec", ns, "tc", "qdisc", "add", "dev", "a", "root", kind])
    return true
  } catch {
    return false
  } finally {
    try {
      ip("netns", "del", ns)
    } catch {
      // never created
    }
  }
}

/** Whether `/etc/netns/<ns>` exists (left by a crashed run until the next sweep). */
export const hasHostsFile = (ns: string): boolean => existsSync(etcNetns(ns))
