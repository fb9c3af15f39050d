/**
 * TLS for the control plane (coordinator ↔ worker, client ↔ coordinator), after Talon's
 * control identity: each side presents a certificate from PEM files; with a CA the server
 * requires and verifies client certificates (mTLS); with a trust domain a peer's certificate
 * must also carry a URI SAN `spiffe://<trust domain>/talon/<cluster>/<role>/<node>` (Talon's
 * workload identity), which stands in for host-name checks (pods have no stable names).
 *
 * Files are read again for every new client connection and, on the server, whenever one
 * changes (polled), so a rotated certificate applies without a restart; connections already
 * open keep the certificate they were made with.
 */
import * as fs from "node:fs"
import type * as net from "node:net"
import * as tls from "node:tls"
import { Data } from "effect"

export interface ControlTlsFiles {
  /** PEM certificate (chain) this side presents. */
  readonly certPath: string
  readonly keyPath: string
  /** PEM CA bundle peers' certificates must chain to; on a server it turns client certificates on (mTLS). */
  readonly caCertPath?: string | undefined
  /** Peers must carry a `spiffe://<trustDomain>/talon/...` URI SAN. */
  readonly trustDomain?: string | undefined
}

/** The TLS files of Talon's four control settings, or none (plain TCP) without a certificate and key. */
export const controlTlsFilesOf = (o: {
  readonly controlTlsCertPath?: string | undefined
  readonly controlTlsKeyPath?: string | undefined
  readonly controlTlsCaCertPath?: string | undefined
  readonly controlTlsTrustDomain?: string | undefined
}): ControlTlsFiles | undefined =>
  o.controlTlsCertPath === undefined || o.controlTlsKeyPath === undefined
    ? undefined
    : { certPath: o.controlTlsCertPath, keyPath: o.controlTlsKeyPath, caCertPath: o.controlTlsCaCertPath, trustDomain: o.controlTlsTrustDomain }

export class ControlTlsError extends Data.TaggedError("ControlTlsError")<{ readonly detail: string }> {
  override get message() {
    return `control-plane TLS: ${this.detail}`
  }
}

/** The PEMs as a context's options, checked to load (a key that does not match its certificate fails here). */
export const readControlTls = (files: ControlTlsFiles): { cert: Buffer; key: Buffer; ca?: Buffer } => {
  let pems: { cert: Buffer; key: Buffer; ca?: Buffer }
  try {
    pems = {
      cert: fs.readFileSync(files.certPath),
      key: fs.readFileSync(files.keyPath),
      ...(files.caCertPath === undefined ? {} : { ca: fs.readFileSync(files.caCertPath) })
    }
  } catch (e) {
    throw new ControlTlsError({ detail: `cannot read a certificate file (${(e as Error).message}); check the control TLS cert, key and CA paths` })
  }
  try {
    tls.createSecureContext(pems)
  } catch (e) {
    throw new ControlTlsError({ detail: `${files.certPath} and ${files.keyPath} do not form a usable certificate and key: ${(e as Error).message}` })
  }
  return pems
}

/** The `spiffe://` URI SANs of a peer certificate. */
export const spiffeIds = (cert: tls.PeerCertificate | undefined): ReadonlyArray<string> =>
  (cert?.subjectaltname ?? "")
    .split(/,\s*/)
    .filter((s) => s.startsWith("URI:spiffe://"))
    .map((s) => s.slice(4))

/** Why a peer's identity is not in `trustDomain` (Talon's `/talon/<cluster>/<role>/<node>` path), or undefined when it is. */
export const trustDomainRefusal = (cert: tls.PeerCertificate | undefined, trustDomain: string): string | undefined => {
  const ids = spiffeIds(cert)
  if (ids.length === 0) return `its certificate has no spiffe:// URI SAN (trust domain ${trustDomain} requires one)`
  const ok = ids.some((id) => {
    try {
      const u = new URL(id)
      const parts = u.pathname.split("/")
      return u.hostname === trustDomain && parts.length === 5 && parts[1] === "talon" && parts.slice(2).every((p) => p !== "")
    } catch {
      return false
    }
  })
  return ok ? undefined : `its identity ${ids.join(", ")} is not spiffe://${trustDomain}/talon/<cluster>/<role>/<node>`
}

/** Options for one new client connection to `host`, from the files as they are now. */
export const clientTlsOptions = (files: ControlTlsFiles, host: string): tls.ConnectionOptions => {
  const pems = readControlTls(files)
  const trustDomain = files.trustDomain
  return {
    ...pems,
    ...(net_isIp(host) ? {} : { servername: host }),
    // With a trust domain the coordinator is known by its workload identity, not by a host name.
    ...(trustDomain === undefined
      ? {}
      : {
          checkServerIdentity: (_host: string, cert: tls.PeerCertificate) => {
            const why = trustDomainRefusal(cert, trustDomain)
            return why === undefined ? undefined : new Error(`the server's ${why}`)
          }
        })
  }
}

const net_isIp = (host: string) => /^[\d.]+$/.test(host) || host.includes(":")

export interface ControlTlsServer {
  readonly server: tls.Server
  /** Stops watching the files. */
  readonly stop: () => void
}

/**
 * A TLS server for `onConnection` (called only for peers that passed every check). `refused`
 * hears each refused handshake or identity with the peer's address and why.
 */
export const controlTlsServer = (
  files: ControlTlsFiles,
  onConnection: (socket: net.Socket) => void,
  refused: (peer: string, why: string) => void,
  reloaded: (outcome: string) => void,
  pollMs = 1000
): ControlTlsServer => {
  const mutual = files.caCertPath !== undefined
  // Verification is judged here rather than by rejectUnauthorized, which drops the peer without saying why.
  const server = tls.createServer({ ...readControlTls(files), requestCert: mutual, rejectUnauthorized: false, allowHalfOpen: true }, (socket) => {
    if (mutual && !socket.authorized) {
      const presented = Object.keys(socket.getPeerCertificate() ?? {}).length > 0
      refused(`${socket.remoteAddress}:${socket.remotePort}`, presented ? `its certificate failed verification (${String(socket.authorizationError)})` : "it presented no client certificate")
      socket.destroy()
      return
    }
    if (files.trustDomain !== undefined) {
      const why = trustDomainRefusal(socket.getPeerCertificate(), files.trustDomain)
      if (why !== undefined) {
        refused(`${socket.remoteAddress}:${socket.remotePort}`, why)
        socket.destroy()
        return
      }
    }
    onConnection(socket)
  })
  // With a listener here Node leaves the failed socket open: close it, or the peer would hang.
  server.on("tlsClientError", (err, socket) => {
    refused(`${socket.remoteAddress}:${socket.remotePort}`, err.message)
    socket.destroy()
  })
  // Connections still in their handshake are closed with the server too.
  const raw = new Set<net.Socket>()
  server.on("connection", (socket: net.Socket) => {
    raw.add(socket)
    socket.once("close", () => raw.delete(socket))
  })
  const reload = () => {
    try {
      server.setSecureContext(readControlTls(files))
      reloaded("new connections use the new certificate")
    } catch (e) {
      reloaded(`refused, keeping the current certificate: ${(e as Error).message}`)
    }
  }
  const paths = [files.certPath, files.keyPath, ...(files.caCertPath === undefined ? [] : [files.caCertPath])]
  const onChange = (now: fs.Stats, before: fs.Stats) => {
    if (now.mtimeMs !== before.mtimeMs || now.ino !== before.ino || now.size !== before.size) reload()
  }
  for (const p of paths) fs.watchFile(p, { interval: pollMs, persistent: false }, onChange)
  return {
    server,
    stop: () => {
      for (const p of paths) fs.unwatchFile(p, onChange)
      for (const socket of raw) socket.destroy()
    }
  }
}
