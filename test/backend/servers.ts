import { spawn } from "node:child_process"
import { createRequire } from "node:module"
import * as path from "node:path"
import { Context, Effect, Layer } from "effect"
import { scopedTempDir } from "../support/scopedTempDir.js"

/** A temp dir removed when the scope closes. */
export const tempDir = scopedTempDir

/** A node child process, killed with the scope; resolves the port it prints once listening. */
const childListening = (args: ReadonlyArray<string>, listening: RegExp) =>
  Effect.gen(function* () {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] })),
      (child) =>
        Effect.async<void>((resume) => {
          if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
          child.once("exit", () => resume(Effect.void))
          child.kill("SIGTERM")
        })
    )
    return yield* Effect.async<number, Error>((resume) => {
      let out = ""
      let err = ""
      child.stdout!.on("data", (data: Buffer) => {
        out += data.toString()
        const match = listening.exec(out)
        if (match) resume(Effect.succeed(Number(match[1])))
      })
      child.stderr!.on("data", (data: Buffer) => (err += data.toString()))
      child.once("exit", (code) => resume(Effect.fail(new Error(`${args.join(" ")} exited with ${code}: ${out}${err}`))))
    }).pipe(Effect.timeout("30 seconds"), Effect.orDie)
  })

export class Azurite extends Context.Tag("test/Azurite")<Azurite, { readonly endpoint: string }>() {}

const require = createRequire(import.meta.url)

/** Azurite's blob service on a free loopback port. */
export const azuriteLayer = Layer.scoped(
  Azurite,
  Effect.gen(function* () {
    const dir = yield* tempDir("talon-azurite-")
    const main = path.join(path.dirname(require.resolve("azurite/package.json")), "dist/src/blob/main.js")
    const port = yield* childListening(
      [main, "--blobHost", "127.0.0.1", "--blobPort", "0", "--location", dir, "--silent", "--skipApiVersionCheck", "--loose", "--disableTelemetry"],
      /listens on http:\/\/127\.0\.0\.1:(\d+)/
    )
    return { endpoint: `http://127.0.0.1:${port}` }
  })
)

export class S3rver extends Context.Tag("test/S3rver")<S3rver, { readonly endpoint: string }>() {}

/**
 * s3rver (npm) in a child process with one bucket. It checks access key ids but not SigV4
 * signatures; its continuation tokens use DES, hence the legacy OpenSSL provider on Node 20.
 */
export const s3rverLayer = (bucket: string) =>
  Layer.scoped(
    S3rver,
    Effect.gen(function* () {
      const dir = yield* tempDir("talon-s3rver-")
      const bin = path.join(path.dirname(require.resolve("s3rver/package.json")), "bin/s3rver.js")
      const port = yield* childListening(
        ["--openssl-legacy-provider", bin, "-d", dir, "-a", "127.0.0.1", "-p", "0", "-s", "--configure-bucket", bucket],
        /S3rver listening on 127\.0\.0\.1:(\d+)/
      )
      return { endpoint: `http://127.0.0.1:${port}` }
    })
  )
