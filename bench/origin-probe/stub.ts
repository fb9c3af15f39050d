/**
 * One origin stub for the probe, from the tree at argv[2] (so two trees can be compared in one
 * run): prints its URL, then serves until stdin closes.
 */
import { Effect, Exit, Scope } from "effect"
import * as path from "node:path"
import { pathToFileURL } from "node:url"

const [treeRoot = ".", root = "/dev/shm/talon-origin-probe"] = process.argv.slice(2)
const mod = (await import(pathToFileURL(path.resolve(treeRoot, "src/origin/OriginStub.ts")).href)) as typeof import("../../src/origin/OriginStub.js")
const scope = Effect.runSync(Scope.make())
const stub = await Effect.runPromise(Scope.extend(mod.OriginStub.make({ root }), scope))
process.stdout.write(`${stub.url}\n`)
process.stdin.resume()
process.stdin.on("end", () => void Effect.runPromise(Scope.close(scope, Exit.void)).then(() => process.exit(0)))
