/**
 * User metadata end to end through the gateway: the shared SDK suite (S3 and Azure: put,
 * multipart, Copy COPY/REPLACE, Set Blob Metadata, Copy Blob) on both routes; an object
 * written straight to the origin read through the cache route (HEAD/GET answered from the
 * gateway's cached stat and the cluster's blocks, metadata included); and the aws CLI
 * (`s3 cp --metadata`, `s3api head-object`) against the gateway and the stub.
 */
import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Gateway } from "../../src/gateway/Gateway.js"
import { sameBytes, send } from "../support/checks.js"
import { META_BUCKET, metadataSuite } from "../support/sdkMetadata.js"
import { s3ClientFor, SdkTarget } from "../support/sdkSuite.js"
import { findTool, run } from "./fixtures/realClients.js"
import { sdkOnBothRoutes } from "./fixtures/sdkRoutes.js"
import { gatewayFixture } from "./fixtures/targets.js"

sdkOnBothRoutes("s3", "metadata SDKs", (it) => {
  metadataSuite(it)
})

/** The AWS CLI: the Debian package's, else a pyenv install's real script (its shim needs pyenv's environment). */
const awsBin = (): string | undefined => {
  const found = findTool("aws")
  if (found !== undefined) return found
  try {
    const p = execFileSync("pyenv", ["which", "aws"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
    return p === "" ? undefined : p
  } catch {
    return undefined
  }
}
const AWS = awsBin()
if (AWS === undefined) console.warn("\n!!! userMetadata: the aws CLI is not installed; its metadata round trips are NOT tested !!!\n")

/** The CLI (v1 or v2) in a temp HOME: path-style, the endpoint's keys only, no retries. */
const awsAt = (bin: string, home: string, endpoint: string, creds: { accessKeyId: string; secretAccessKey: string }) => {
  const config = path.join(home, "config")
  fs.writeFileSync(config, "[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n  multipart_threshold = 8MB\n  multipart_chunksize = 8MB\n")
  const env = {
    PATH: "/usr/bin:/bin",
    HOME: home,
    LANG: "C.UTF-8",
    AWS_CONFIG_FILE: config,
    AWS_SHARED_CREDENTIALS_FILE: path.join(home, "credentials-none"),
    AWS_ACCESS_KEY_ID: creds.accessKeyId,
    AWS_SECRET_ACCESS_KEY: creds.secretAccessKey,
    AWS_EC2_METADATA_DISABLED: "true",
    AWS_PAGER: "",
    AWS_MAX_ATTEMPTS: "1"
  }
  return (args: ReadonlyArray<string>) =>
    Effect.promise(async () => {
      const r = await run(bin, ["--endpoint-url", endpoint, ...args], env, home)
      if (r.code !== 0) throw new Error(`aws ${args.join(" ")} exited ${r.code}:\n${r.stderr}`)
      return r.stdout
    })
}

const headMetadata = (json: Buffer): Record<string, string> => (JSON.parse(json.toString("utf8")) as { Metadata?: Record<string, string> }).Metadata ?? {}

layer(gatewayFixture("cache"), { excludeTestServices: true, timeout: "120 seconds" })("user metadata on the cache route", (it) => {
  it.effect("an object written at the origin reads through the cache with its metadata (HEAD and GET, cached stat)", () =>
    Effect.gen(function* () {
      const target = yield* SdkTarget
      const gw = yield* Gateway
      const origin = s3ClientFor(target.origin)
      const s3 = s3ClientFor(target.endpoint)
      yield* send(() => origin.send(new CreateBucketCommand({ Bucket: META_BUCKET })))
      const body = randomBytes(600_000)
      // Straight to the origin: no fresh-after-write window keeps the gateway's reads off the cache.
      yield* send(() => origin.send(new PutObjectCommand({ Bucket: META_BUCKET, Key: "placed.bin", Body: body, Metadata: { dataset: "imagenet", shard: "7" } })))
      const before = gw.stats().cachePieces
      for (let i = 0; i < 2; i++) {
        const head = yield* send(() => s3.send(new HeadObjectCommand({ Bucket: META_BUCKET, Key: "placed.bin" })))
        expect(head.Metadata).toEqual({ dataset: "imagenet", shard: "7" })
        const get = yield* send(() => s3.send(new GetObjectCommand({ Bucket: META_BUCKET, Key: "placed.bin", Range: "bytes=1000-299999" })))
        expect(get.Metadata).toEqual({ dataset: "imagenet", shard: "7" })
        expect(sameBytes(Buffer.from(yield* send(() => get.Body!.transformToByteArray())), body.subarray(1000, 300_000))).toBe("equal")
      }
      expect(gw.stats().cachePieces).toBeGreaterThan(before)
    })
  )

  it.effect.skipIf(AWS === undefined)("aws CLI: s3 cp --metadata (single and multipart), s3 cp with --metadata-directive REPLACE, s3api head-object; through the gateway and at the stub", () =>
    Effect.gen(function* () {
      const target = yield* SdkTarget
      yield* send(() => s3ClientFor(target.origin).send(new CreateBucketCommand({ Bucket: META_BUCKET })))
      const home = fs.mkdtempSync(path.join(os.tmpdir(), "talon-meta-aws-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(home, { recursive: true, force: true })))
      const small = path.join(home, "small.bin")
      const big = path.join(home, "big.bin")
      fs.writeFileSync(small, randomBytes(50_000))
      fs.writeFileSync(big, randomBytes(9 * 1024 * 1024)) // over the CLI's 8 MB multipart threshold
      // Each CLI run is a Python start-up: the two endpoints, and the commands within a round that
      // touch different keys, run side by side; a round starts once what it reads was written.
      yield* Effect.all(
        (
          [
            ["gateway", target.endpoint],
            ["stub", target.origin]
          ] as const
        ).map(([name, endpoint]) =>
          Effect.gen(function* () {
            const cliHome = path.join(home, name)
            fs.mkdirSync(cliHome)
            const aws = awsAt(AWS!, cliHome, endpoint.s3Url, endpoint.s3Credentials)
            const uri = (key: string) => `s3://${META_BUCKET}/cli-${name}/${key}`
            const head = (key: string) => aws(["s3api", "head-object", "--bucket", META_BUCKET, "--key", `cli-${name}/${key}`]).pipe(Effect.map(headMetadata))
            const replace = aws(["s3", "cp", uri("small.bin"), uri("replaced.bin"), "--metadata-directive", "REPLACE", "--metadata", "owner=infra"])
            // The multipart upload and server-side copies through the gateway; the stub keeps to the single-part round trip.
            if (name === "stub") {
              yield* aws(["s3", "cp", small, uri("small.bin"), "--metadata", "owner=ml,purpose=eval"])
              const [smallMeta] = yield* Effect.all([head("small.bin"), replace], { concurrency: "unbounded" })
              expect(smallMeta, name).toEqual({ owner: "ml", purpose: "eval" })
              expect(yield* head("replaced.bin"), name).toEqual({ owner: "infra" })
              return
            }
            yield* Effect.all(
              [aws(["s3", "cp", small, uri("small.bin"), "--metadata", "owner=ml,purpose=eval"]), aws(["s3", "cp", big, uri("big.bin"), "--metadata", "parts=many"])],
              { concurrency: "unbounded" }
            )
            const fetched = path.join(cliHome, "big.out")
            const [smallMeta, bigMeta] = yield* Effect.all(
              [head("small.bin"), head("big.bin"), aws(["s3", "cp", uri("small.bin"), uri("kept.bin")]), replace, aws(["s3", "cp", uri("big.bin"), fetched])],
              { concurrency: "unbounded" }
            )
            expect(smallMeta, name).toEqual({ owner: "ml", purpose: "eval" })
            expect(bigMeta, name).toEqual({ parts: "many" })
            expect(sameBytes(fs.readFileSync(fetched), fs.readFileSync(big))).toBe("equal")
            const [kept, replaced] = yield* Effect.all([head("kept.bin"), head("replaced.bin")], { concurrency: "unbounded" })
            expect(kept, name).toEqual({ owner: "ml", purpose: "eval" })
            expect(replaced, name).toEqual({ owner: "infra" })
          })
        ),
        { concurrency: "unbounded" }
      )
    }).pipe(Effect.scoped),
    // Each CLI run starts a Python interpreter: seconds apiece on a loaded machine.
    240_000
  )
})
