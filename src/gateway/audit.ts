/**
 * The gateway's audit log: one JSON line per request, after its response ends, with who
 * (the principal, or "anonymous" when no signature was accepted), what (operation, bucket or
 * container, key or listing prefix), the outcome (status, response bytes) and, for refusals,
 * why. Never a secret: keys and signatures are not in it. Written to stdout or appended to a
 * file; the line is built on the request path, so it is plain string work.
 */
import * as fs from "node:fs"
import { Data, Effect, Runtime, type Scope } from "effect"

export interface AuditRecord {
  readonly requestId: string
  readonly protocol: "s3" | "azure"
  readonly principal: string
  readonly operation: string
  readonly bucket: string
  readonly key: string
  readonly status: number
  readonly bytes: number
  readonly decision: "allow" | "deny"
  readonly reason?: string | undefined
}

export interface AuditLog {
  readonly write: (record: AuditRecord) => void
}

export class AuditLogError extends Data.TaggedError("AuditLogError")<{ readonly path: string; readonly detail: string }> {
  override get message() {
    return `cannot open the audit log ${this.path}: ${this.detail}; give a writable file or "stdout" (--audit-log)`
  }
}

/** `stdout`, or a file path appended to (created if absent, opened at start so a bad path fails there); closed with the scope. */
export const openAuditLog = (target: string): Effect.Effect<AuditLog, AuditLogError, Scope.Scope> =>
  target === "stdout"
    ? Effect.succeed({ write: (r) => void process.stdout.write(line(r)) })
    : Effect.gen(function* () {
        const fd = yield* Effect.try({
          try: () => fs.openSync(target, "a", 0o640),
          catch: (e) => new AuditLogError({ path: target, detail: (e as Error).message })
        })
        const stream = yield* Effect.acquireRelease(
          Effect.sync(() => fs.createWriteStream("", { fd })),
          (s) => Effect.async<void>((resume) => void s.end(() => resume(Effect.void)))
        )
        // A write failing later (disk full) must not take requests down: it is reported once.
        let reported = false
        const runtime = yield* Effect.runtime<never>()
        stream.on("error", (e) => {
          if (reported) return
          reported = true
          Runtime.runFork(runtime)(Effect.logError(`audit log ${target}: ${e.message}; audit lines are being lost`))
        })
        return { write: (r: AuditRecord) => void stream.write(line(r)) }
      })

const line = (r: AuditRecord) => `${JSON.stringify({ time: new Date().toISOString(), audit: "gateway", ...r })}\n`
