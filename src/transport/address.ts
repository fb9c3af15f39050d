/**
 * `host:port` and `[v6]:port` addresses, as membership lists and flags carry them.
 * Listeners may ask for port 0 (the OS picks); dialers may not.
 */
export interface HostPort {
  readonly host: string
  readonly port: number
}

export const parseHostPort = (address: string, options: { allowPortZero?: boolean } = {}): HostPort | undefined => {
  const colon = address.lastIndexOf(":")
  if (colon <= 0) return undefined
  let host = address.slice(0, colon)
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1)
  const portText = address.slice(colon + 1)
  if (!/^\d{1,5}$/.test(portText)) return undefined
  const port = Number(portText)
  const min = options.allowPortZero === true ? 0 : 1
  if (port < min || port > 65535 || host.length === 0) return undefined
  return { host, port }
}

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
