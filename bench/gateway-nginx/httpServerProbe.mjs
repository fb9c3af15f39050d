// The same Range GETs of one file as bodyProbeServer.mjs's "copy" mode, on @effect/platform's
// HttpServer and HttpRouter (NodeHttpServer underneath): a fiber, the request and response
// wrappers and the router per request, the body read into a reused buffer as there. Measures
// what the platform front end would add to the gateway's cache route (issue #29's "only if its
// bench holds"). Usage: node httpServerProbe.mjs FILE (prints "port N").
import fs from "node:fs"
import http from "node:http"
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer } from "effect"

const [file] = process.argv.slice(2)
const fd = fs.openSync(file, "r")
const size = fs.fstatSync(fd).size
const buf = Buffer.allocUnsafe(size)

const read = Effect.gen(function* () {
  const req = yield* HttpServerRequest.HttpServerRequest
  const m = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? "")
  const [from, to] = m ? [Number(m[1]), Number(m[2])] : [0, size - 1]
  const n = fs.readSync(fd, buf, 0, to - from + 1, from)
  return HttpServerResponse.uint8Array(buf.subarray(0, n), {
    status: m ? 206 : 200,
    contentType: "application/octet-stream",
    headers: { "content-range": `bytes ${from}-${to}/${size}`, etag: '"v1"' }
  })
})

const router = HttpRouter.empty.pipe(HttpRouter.get("/*", read))
const server = http.createServer()
server.keepAliveTimeout = 60_000
const main = Layer.launch(
  Layer.merge(
    HttpServer.serve(router),
    Layer.effectDiscard(Effect.flatMap(HttpServer.HttpServer, (s) => Console.log(`port ${s.address.port}`)))
  ).pipe(Layer.provide(NodeHttpServer.layer(() => server, { port: 0, host: "127.0.0.1" })))
)
NodeRuntime.runMain(main)
