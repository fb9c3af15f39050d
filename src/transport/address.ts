/**
 * `host:port` and `[v6]:port` addresses, as membership lists, flags and config carry them:
 * the one parser every component uses. Listeners may ask for port 0 (the OS picks); dialers
 * may not. A host is a name or IPv4 address (letters, digits, `.`, `-`, `_`), or an IPv6
 * address in brackets: an unbracketed `::1:7000` is refused rather than guessed at.
 */
import { Either } from "effect"
import { isIPv6 } from "node:net"

export interface HostPort {
  readonly host: string
  readonly port: number
}

export interface HostPortOptions {
  /** Accept port 0: a listen address whose port the OS picks. */
  readonly allowPortZero?: boolean
}

const NAME = /^[A-Za-z0-9._-]+$/

/** The address, or a message saying what is wrong with it and what a good one looks like. */
export const decodeHostPort = (address: string, options: HostPortOptions = {}): Either.Either<HostPort, string> => {
  const bad = (why: string) => Either.left(`bad address ${JSON.stringify(address)}: ${why}`)
  const colon = address.lastIndexOf(":")
  if (colon < 0) return bad("want HOST:PORT, e.g. 127.0.0.1:7000 or [::1]:7000")
  const rawHost = address.slice(0, colon)
  const portText = address.slice(colon + 1)
  let host: string
  if (rawHost.startsWith("[") && rawHost.endsWith("]")) {
    host = rawHost.slice(1, -1)
    if (!isIPv6(host)) return bad("brackets hold an IPv6 address, e.g. [::1]:7000")
  } else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(address)) {
    return bad("an address has no scheme; want HOST:PORT, e.g. 127.0.0.1:7000")
  } else if (isIPv6(rawHost)) {
    return bad(`an IPv6 host goes in brackets: [${rawHost}]:${portText}`)
  } else {
    host = rawHost
    if (host.length === 0) return bad("the host is missing; want HOST:PORT, e.g. 127.0.0.1:7000")
    if (!NAME.test(host)) return bad("a host is a name or IP address (letters, digits, '.', '-', '_')")
  }
  const min = options.allowPortZero === true ? 0 : 1
  // No leading zeros: an address reads back exactly as it was written (`a:01` is not `a:1`).
  if (!/^(0|[1-9]\d{0,4})$/.test(portText) || Number(portText) < min || Number(portText) > 65535) {
    return bad(`the port must be a number from ${min} to 65535 (no sign, no leading zeros)`)
  }
  return Either.right({ host, port: Number(portText) })
}

/** decodeHostPort without the reason, for callers that report their own. */
export const parseHostPort = (address: string, options: HostPortOptions = {}): HostPort | undefined =>
  Either.getOrUndefined(decodeHostPort(address, options))

export const formatHostPort = (host: string, port: number): string =>
  `${host.includes(":") ? `[${host}]` : host}:${port}`

/**
 * A comma-separated list of dial addresses (`a:7000,b:7000`): the form every
 * `coordinator` setting takes so a node can fail over between coordinators.
 * Undefined when the list is empty or any entry is not a dialable address.
 */
export const parseHostPortList = (list: string): ReadonlyArray<HostPort> | undefined => {
  const entries = list.split(",").map((e) => e.trim()).filter((e) => e.length > 0)
  if (entries.length === 0) return undefined
  const out: Array<HostPort> = []
  for (const e of entries) {
    const hp = parseHostPort(e)
    if (hp === undefined) return undefined
    out.push(hp)
  }
  return out
}
