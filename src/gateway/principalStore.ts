/**
 * The principal directory a gateway judges requests against, re-read from its files every
 * `reloadMs` (Talon polls too: a watch misses files replaced through a symlink, as Kubernetes
 * does with a mounted Secret). A reload that parses replaces the whole directory at once; one
 * that does not keeps the last good directory and logs which file is wrong, once per change.
 */
import { FileSystem } from "@effect/platform"
import { Duration, Effect, Either, Schedule, type Scope } from "effect"
import { compile, type Directory, PrincipalFileError, type PrincipalFiles, type PrincipalTexts, readTexts } from "./principals.js"

export interface PrincipalStore {
  readonly current: () => Directory
  /** Re-read the files now (the poll does this every `reloadMs`). */
  readonly reload: Effect.Effect<void>
  readonly summary: () => string
}

const same = (a: PrincipalTexts, b: PrincipalTexts) =>
  a.s3Identities === b.s3Identities && a.azureIdentities === b.azureIdentities && a.authorization === b.authorization

const describe = (d: Directory) => {
  let azure = 0
  for (const keys of d.azure.values()) azure += keys.length
  return `${d.s3.size} S3 and ${azure} Azure client identities, ${d.grants.length} grants`
}

export const makePrincipalStore = (
  files: PrincipalFiles,
  reloadMs: number
): Effect.Effect<PrincipalStore, PrincipalFileError, Scope.Scope | FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const read = (path: string) =>
      fs.readFileString(path).pipe(Effect.mapError((e) => new PrincipalFileError({ file: "identity or authorization", path, detail: `cannot read it (${e.message})` })))
    let texts = yield* readTexts(files, read)
    let directory = yield* Either.match(compile(files, texts), { onLeft: Effect.fail, onRight: Effect.succeed })
    let failing: PrincipalTexts | undefined

    const reload = readTexts(files, read).pipe(
      Effect.flatMap((next) => {
        if (same(next, texts) || (failing !== undefined && same(next, failing))) return Effect.void
        return Either.match(compile(files, next), {
          onLeft: (e) => Effect.sync(() => (failing = next)).pipe(Effect.zipRight(Effect.logWarning(e.message))),
          onRight: (d) =>
            Effect.sync(() => {
              texts = next
              directory = d
              failing = undefined
            }).pipe(Effect.zipRight(Effect.logInfo(`gateway principals reloaded: ${describe(d)}`)))
        })
      }),
      Effect.catchAll((e) => Effect.logWarning(e.message))
    )
    yield* Effect.forkScoped(Effect.repeat(reload, Schedule.spaced(Duration.millis(reloadMs))))
    return { current: () => directory, reload, summary: () => describe(directory) }
  })
