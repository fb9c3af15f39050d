import * as fs from "node:fs/promises"
import * as path from "node:path"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mountedType, prepareMountpoint } from "../../src/mount/mountpoint.js"
import { scopedTempDir } from "../support/scopedTempDir.js"

const tempDir = scopedTempDir("talon-mountpoint-")

const refusal = (mountpoint: string) =>
  prepareMountpoint(mountpoint).pipe(
    Effect.flip,
    Effect.map((e) => e.message),
    Effect.provide(NodeContext.layer)
  )

describe("mountpoint checks", () => {
  it.scoped("an empty directory is accepted", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* prepareMountpoint(dir).pipe(Effect.provide(NodeContext.layer))
    })
  )

  it.scoped("a non-empty directory, a file and a missing path are refused, each saying what to do", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const full = path.join(dir, "full")
      yield* Effect.promise(() => fs.mkdir(full))
      yield* Effect.promise(() => fs.writeFile(path.join(full, "mine.txt"), "x"))
      expect(yield* refusal(full)).toMatch(/not empty \(1 entry, e.g. "mine.txt"\); mount on an empty directory/)
      expect(yield* refusal(path.join(full, "mine.txt"))).toMatch(/not a directory/)
      expect(yield* refusal(path.join(dir, "nope"))).toMatch(/no such directory; create it first/)
    })
  )

  it.scoped("a directory with something mounted on it is refused (/proc is)", () =>
    Effect.gen(function* () {
      expect(yield* mountedType("/proc").pipe(Effect.provide(NodeContext.layer))).toBe("proc")
      expect(yield* refusal("/proc")).toMatch(/already mounted there/)
    })
  )
})
