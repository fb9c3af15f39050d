/**
 * `talon origin` as a command, run in-process: flags, `TALON_ORIGIN_*` fallbacks,
 * seeding, serving until interrupted.
 */
import { Command } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber } from "effect"
import * as path from "node:path"
import { vi } from "vitest"
import { origin } from "../../src/origin/cli.js"
import { raw, rawEffect, tempDir } from "./fixtures/testOrigin.js"
import { eventually } from "../support/eventually.js"

it.scopedLive("serves until interrupted, taking options from flags and TALON_ORIGIN_* env", () =>
  Effect.gen(function* () {
    const dir = yield* tempDir
    const root = path.join(dir, "from-env")
    const logged: string[] = []
    const spy = vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
      logged.push(args.map(String).join(" "))
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => spy.mockRestore()))

    const run = Command.run(origin, { name: "talon-origin", version: "test" })
    const fiber = yield* run(["node", "talon-origin", "--port", "0", "--seed", "--failure-mode", "503"]).pipe(
      Effect.provide(NodeContext.layer),
      Effect.withConfigProvider(
        ConfigProvider.fromMap(
          new Map([
            ["TALON_ORIGIN_ROOT", root],
            ["TALON_ORIGIN_LATENCY_MS", "5"],
            ["TALON_ORIGIN_FAILURE_MODE", "reset"],
            ["TALON_ORIGIN_PORT", "1"]
          ])
        )
      ),
      Effect.forkScoped
    )
    const url = yield* eventually(
      Effect.sync(() => {
        const m = logged.join("\n").match(/listening on (http:\/\/127\.0\.0\.1:\d+)/)
        if (m === null) throw new Error(`not in the log yet:\n${logged.join("\n")}`)
        return m[1]!
      }),
      { what: "the origin to report its endpoint", within: "30 seconds", every: "50 millis" }
    )
    expect(logged.join("\n")).toMatch(/seeded bucket talon: 7 objects \(7 written\) under .*from-env/)
    // Flag beats env (--port 0 over TALON_ORIGIN_PORT=1, --failure-mode over env); env beats default.
    expect(url).not.toMatch(/:1$/)
    const faults = JSON.parse((yield* rawEffect(url, "GET", "/_talon/faults")).body.toString())
    expect(faults.latency).toEqual({ kind: "fixed", ms: 5 })
    expect(faults.failureMode).toBe("503")
    const hello = yield* rawEffect(url, "GET", "/talon/hello.txt")
    expect(hello.body.toString()).toBe("hello from the talon origin stub\n")

    yield* Fiber.interrupt(fiber)
    const after = yield* Effect.flip(Effect.tryPromise(() => raw(url, "GET", "/talon/hello.txt")))
    expect(String((after.cause as NodeJS.ErrnoException).code)).toBe("ECONNREFUSED")
  })
)
