/**
 * One control listener for the probe, from the tree at argv[2], answering every request with
 * an Ack: the listener's own cost, without the coordinator's handlers. Prints its port.
 */
import { Effect, Exit, Scope } from "effect"
import * as path from "node:path"
import { pathToFileURL } from "node:url"

const [treeRoot = "."] = process.argv.slice(2)
const load = (file: string) => import(pathToFileURL(path.resolve(treeRoot, file)).href)
const server = (await load("src/coordinator/ControlServer.ts")) as typeof import("../../src/coordinator/ControlServer.js")
const control = (await load("src/protocol/control.ts")) as typeof import("../../src/protocol/control.js")
const scope = Effect.runSync(Scope.make())
const running = await Effect.runPromise(
  Scope.extend(
    server.serveControl({
      host: "127.0.0.1",
      port: 0,
      caps: server.COORDINATOR_CAPS,
      readTimeoutMs: 30_000,
      handle: () => Effect.succeed(new control.Ack({ ok: true, detail: null }))
    }),
    scope
  )
)
process.stdout.write(`${running.port}\n`)
process.stdin.resume()
process.stdin.on("end", () => void Effect.runPromise(Scope.close(scope, Exit.void)).then(() => process.exit(0)))
