/**
 * `talon gateway` as a command, run in-process: flags over `TALON_GATEWAY_*` over
 * defaults, the origin from `TALON_S3_*`, a loud warning when auth is off, and
 * actionable refusals when auth is on without credentials or no origin is set.
 */
import { Command } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber } from "effect"
import * as path from "node:path"
import { vi } from "vitest"
import { gateway } from "../../src/gateway/cli.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { raw, tempDir } from "../origin/fixtures/testOrigin.js"
import { eventually } from "../support/eventually.js"

const run = Command.run(gateway, { name: "talon-gateway", version: "test" })

const captureLogs = Effect.acquireRelease(
  Effect.sync(() => {
    const logged: Array<string> = []
    const spy = vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
      logged.push(args.map(String).join(" "))
    })
    return { logged, spy }
  }),
  ({ spy }) => Effect.sync(() => spy.mockRestore())
)

it.scopedLive("serves with flags over TALON_GATEWAY_* env, origin from TALON_S3_*, and says loudly that auth is off", () =>
  Effect.gen(function* () {
    const dir = yield* tempDir
    const origin = yield* OriginStub.make({ root: path.join(dir, "origin") })
    yield* Effect.promise(() => raw(origin.url, "PUT", "/clibucket"))
    yield* Effect.promise(() => raw(origin.url, "PUT", "/clibucket/hello.txt", {}, "hello via the gateway"))
    const { logged } = yield* captureLogs
    const fiber = yield* run(["node", "talon-gateway", "--listen", "127.0.0.1:0", "--route", "origin", "--auth", "off", "--max-body-bytes", "10"]).pipe(
      Effect.provide(NodeContext.layer),
      Effect.withConfigProvider(
        ConfigProvider.fromMap(
          new Map([
            ["TALON_GATEWAY_LISTEN", "127.0.0.1:1"],
            ["TALON_GATEWAY_AUTH", "true"],
            ["TALON_GATEWAY_MAX_CONCURRENT_REQUESTS", "7"],
            ["TALON_S3_ENDPOINT", origin.url],
            ["TALON_S3_ACCESS_KEY_ID", "talon"],
            ["TALON_S3_SECRET_ACCESS_KEY", "talon-secret"]
          ])
        )
      ),
      Effect.forkScoped
    )
    const url = yield* eventually(
      Effect.sync(() => {
        const m = logged.join("\n").match(/listening on (http:\/\/127\.0\.0\.1:\d+) \(origin route\)/)
        if (m === null) throw new Error(`not in the log yet:\n${logged.join("\n")}`)
        return m[1]!
      }),
      { what: "the gateway to report its endpoint", within: "30 seconds", every: "50 millis" }
    )
    // Flags beat env (--listen port 0 over :1, --auth off over TALON_GATEWAY_AUTH=true).
    expect(url).not.toMatch(/:1$/)
    expect(logged.join("\n")).toContain("AUTH IS OFF")
    expect(logged.join("\n")).toContain(`aws --endpoint-url ${url}`)
    const got = yield* Effect.promise(() => raw(url, "GET", "/clibucket/hello.txt"))
    expect(got.status).toBe(200)
    expect(got.body.toString()).toBe("hello via the gateway")
    const big = yield* Effect.promise(() => raw(url, "PUT", "/clibucket/big.txt", {}, "more than ten bytes"))
    expect(big.body.toString()).toContain("EntityTooLarge")
    yield* Fiber.interrupt(fiber)
    const after = yield* Effect.flip(Effect.tryPromise(() => raw(url, "GET", "/clibucket/hello.txt")))
    expect(String((after.cause as NodeJS.ErrnoException).code)).toBe("ECONNREFUSED")
  })
)

const failureOf = (argv: ReadonlyArray<string>, env: ReadonlyArray<readonly [string, string]>) =>
  run(["node", "talon-gateway", ...argv]).pipe(
    Effect.provide(NodeContext.layer),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(env))),
    Effect.flip,
    Effect.map((e) => String((e as { message?: string }).message ?? e))
  )

it.scopedLive("refuses to start with auth on and no credentials, or with no origin, saying what to set", () =>
  Effect.gen(function* () {
    yield* captureLogs
    const origin = [["TALON_S3_ENDPOINT", "http://127.0.0.1:9"], ["TALON_S3_ACCESS_KEY_ID", "a"], ["TALON_S3_SECRET_ACCESS_KEY", "b"]] as const
    const noCreds = yield* failureOf(["--listen", "127.0.0.1:0"], origin)
    expect(noCreds).toContain("TALON_GATEWAY_ACCESS_KEY_ID")
    expect(noCreds).toContain("--auth off")
    const noOrigin = yield* failureOf(["--listen", "127.0.0.1:0", "--auth", "off"], [])
    expect(noOrigin).toContain("TALON_S3_ENDPOINT")
    const halfCreds = yield* failureOf(["--listen", "127.0.0.1:0"], [...origin, ["TALON_GATEWAY_ACCESS_KEY_ID", "only-the-id"]])
    expect(halfCreds).toContain("set both TALON_GATEWAY_ACCESS_KEY_ID and TALON_GATEWAY_SECRET_ACCESS_KEY")
  })
)
