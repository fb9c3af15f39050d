/**
 * HTTPS for the gateway and the admin endpoints: a certificate and key from files, read at start and read again on
 * SIGHUP or when either file changes (polled, so a renewal written by a tool that replaces
 * the file is seen too). A pair that does not load (half-written, mismatched) is refused
 * and the one in use stays; the reason goes to stderr.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import * as tls from "node:tls"
import { Effect, type Scope } from "effect"

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
export const watchTls = (server: https.Server, files: TlsFiles, intervalMs = 1000, who = "gateway"): (() => void) => {
  const reload = () => {
    try {
      server.setSecureContext(loadTls(files))
    } catch (e) {
      process.stderr.write(`talon ${who}: TLS reload refused, keeping the current certificate: ${(e as Error).message}\n`)
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

/**
 * The server factory of an admin endpoint: HTTPS from `files` (reloaded like the gateway's on
 * SIGHUP or a file change, for as long as the scope lives), else plain HTTP.
 */
export const adminServer = (
  files: TlsFiles | undefined,
  who: string
): Effect.Effect<() => http.Server, TlsLoadError, Scope.Scope> => {
  if (files === undefined) return Effect.succeed(() => http.createServer())
  return Effect.gen(function* () {
    const pair = yield* Effect.try({ try: () => loadTls(files), catch: (e) => (e instanceof TlsLoadError ? e : new TlsLoadError(String(e))) })
    const server = https.createServer(pair)
    const stop = watchTls(server, files, 1000, who)
    yield* Effect.addFinalizer(() => Effect.sync(stop))
    return () => server as unknown as http.Server
  })
}
