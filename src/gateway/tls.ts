/**
 * HTTPS for the gateway: a certificate and key from files, read at start and read again on
 * SIGHUP or when either file changes (polled, so a renewal written by a tool that replaces
 * the file is seen too). A pair that does not load (half-written, mismatched) is refused
 * and the one in use stays; the reason goes to stderr.
 */
import * as fs from "node:fs"
import type * as https from "node:https"
import * as tls from "node:tls"

export interface TlsFiles {
  readonly cert: string
  readonly key: string
}

export class TlsLoadError extends Error {}

/** The PEM pair, checked to form a usable context (a key that does not match its certificate fails here). */
export const loadTls = (files: TlsFiles): { cert: Buffer; key: Buffer } => {
  let pair: { cert: Buffer; key: Buffer }
  try {
    pair = { cert: fs.readFileSync(files.cert), key: fs.readFileSync(files.key) }
  } catch (e) {
    throw new TlsLoadError(`cannot read the TLS certificate/key (${(e as Error).message}); check --tls-cert and --tls-key`)
  }
  try {
    tls.createSecureContext(pair)
  } catch (e) {
    throw new TlsLoadError(`the TLS certificate and key in ${files.cert} and ${files.key} do not form a usable pair: ${(e as Error).message}`)
  }
  return pair
}

/** Reloads `server`'s certificate on SIGHUP and on file changes; returns the function that stops watching. */
export const watchTls = (server: https.Server, files: TlsFiles, intervalMs = 1000): (() => void) => {
  const reload = () => {
    try {
      server.setSecureContext(loadTls(files))
    } catch (e) {
      process.stderr.write(`talon gateway: TLS reload refused, keeping the current certificate: ${(e as Error).message}\n`)
    }
  }
  const onChange = (now: fs.Stats, before: fs.Stats) => {
    if (now.mtimeMs !== before.mtimeMs || now.ino !== before.ino || now.size !== before.size) reload()
  }
  fs.watchFile(files.cert, { interval: intervalMs, persistent: false }, onChange)
  fs.watchFile(files.key, { interval: intervalMs, persistent: false }, onChange)
  process.on("SIGHUP", reload)
  return () => {
    fs.unwatchFile(files.cert, onChange)
    fs.unwatchFile(files.key, onChange)
    process.off("SIGHUP", reload)
  }
}
