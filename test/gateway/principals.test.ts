/**
 * Gateway principals from Talon's identity and authorization files: unmodified SDK clients
 * sign with a principal's own key; a request outside the principal's grants is refused with
 * the provider's 403 and audited; the files are re-read while the gateway runs (a new
 * principal works without a restart, a broken file keeps the last good set).
 */
import { GetObjectCommand, ListBucketsCommand, ListObjectsV2Command, PutObjectCommand, S3Client, type S3ServiceException } from "@aws-sdk/client-s3"
import { BlobServiceClient, type RestError, StorageSharedKeyCredential } from "@azure/storage-blob"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Router from "../../src/backend/Router.js"
import { Gateway } from "../../src/gateway/Gateway.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { failure, send } from "../support/checks.js"
import { scopedTempDir } from "../support/scopedTempDir.js"

const AZ_KEY = Buffer.from("principal azure account key 32b!").toString("base64")

const s3Identity = (key: string, principal: string) => ({ access_key_id: key, secret_access_key: `secret-of-${key}`, principal, provider_account: "tenant-a" })
const grant = (id: string, principal: string, prefix: string, operations: Array<string>, protocol = "s3", account = "tenant-a") => ({
  id,
  principal,
  protocol,
  provider_account: account,
  namespace: "data",
  prefix,
  operations
})

describe("gateway principals", () => {
  it.scopedLive("grants, 403s, audit lines and reloads, with the AWS and Azure SDKs", () =>
    Effect.gen(function* () {
      const dir = yield* scopedTempDir("talon-principals-")
      const root = path.join(dir, "origin")
      for (const [key, body] of [["datasets/a.txt", "hello"], ["private/b.txt", "secret"]] as const) {
        fs.mkdirSync(path.dirname(path.join(root, "data", key)), { recursive: true })
        fs.writeFileSync(path.join(root, "data", key), body)
      }
      // A bucket no principal has a grant in: listing buckets must not name it.
      fs.mkdirSync(path.join(root, "hidden"), { recursive: true })
      fs.writeFileSync(path.join(root, "hidden", "x.txt"), "x")
      const origin = yield* OriginStub.make({ root })
      const files = { s3: path.join(dir, "s3.json"), azure: path.join(dir, "azure.json"), grants: path.join(dir, "grants.json"), audit: path.join(dir, "audit.log") }
      const write = (file: string, value: unknown) => fs.writeFileSync(file, JSON.stringify(value))
      write(files.s3, { identities: [s3Identity("reader-key", "reader")] })
      write(files.azure, { identities: [{ account_key: AZ_KEY, principal: "az-reader", provider_account: "azacct" }] })
      const grants = [
        grant("reader-datasets", "reader", "datasets/", ["read", "stat", "list"]),
        grant("az-datasets", "az-reader", "datasets/", ["read", "stat"], "azure", "azacct")
      ]
      write(files.grants, { grants })

      const gw = Context.get(
        yield* Layer.build(
          Gateway.layerDeployment({
            gateway: {
              listen: "127.0.0.1:0",
              auth: true,
              credentials: {},
              s3ClientIdentitiesPath: files.s3,
              azureClientIdentitiesPath: files.azure,
              authorizationPath: files.grants,
              authReloadMs: 50,
              auditLog: files.audit
            },
            route: "origin",
            router: Router.localOptions(origin.url)
          })
        ),
        Gateway
      )
      const s3 = (key: string) =>
        new S3Client({ endpoint: gw.url, forcePathStyle: true, region: "us-east-1", credentials: { accessKeyId: key, secretAccessKey: `secret-of-${key}` }, maxAttempts: 1 })
      const reader = s3("reader-key")

      // Inside the grant: an unmodified SDK client with the principal's own key.
      const got = yield* send(() => reader.send(new GetObjectCommand({ Bucket: "data", Key: "datasets/a.txt" })))
      expect(yield* send(() => got.Body!.transformToString())).toBe("hello")
      const listed = yield* send(() => reader.send(new ListObjectsV2Command({ Bucket: "data", Prefix: "datasets/" })))
      expect(listed.Contents?.map((o) => o.Key)).toEqual(["datasets/a.txt"])

      // Outside it: another prefix, the whole bucket's listing, a write.
      const outside = yield* failure<S3ServiceException>(() => reader.send(new GetObjectCommand({ Bucket: "data", Key: "private/b.txt" })))
      expect(outside.$metadata.httpStatusCode).toBe(403)
      expect(outside.name).toBe("AccessDenied")
      expect(outside.message).toContain("reader has no grant for read on data/private/b.txt")
      const wholeBucket = yield* failure<S3ServiceException>(() => reader.send(new ListObjectsV2Command({ Bucket: "data" })))
      expect(wholeBucket.$metadata.httpStatusCode).toBe(403)
      const put = yield* failure<S3ServiceException>(() => reader.send(new PutObjectCommand({ Bucket: "data", Key: "datasets/new.txt", Body: "x" })))
      expect(put.$metadata.httpStatusCode).toBe(403)
      expect(fs.existsSync(path.join(root, "data", "datasets/new.txt"))).toBe(false)
      const stranger = yield* failure<S3ServiceException>(() => s3("nobody-key").send(new GetObjectCommand({ Bucket: "data", Key: "datasets/a.txt" })))
      expect(stranger.name).toBe("InvalidAccessKeyId")

      // Azure: Shared Key with the principal's account key, judged by its own grants.
      const blob = new BlobServiceClient(`${gw.url}/azacct`, new StorageSharedKeyCredential("azacct", AZ_KEY), { retryOptions: { maxTries: 1 } })
      const container = blob.getContainerClient("data")
      const az = yield* send(() => container.getBlobClient("datasets/a.txt").downloadToBuffer())
      expect(az.toString()).toBe("hello")
      const azOutside = yield* failure<RestError>(() => container.getBlobClient("private/b.txt").download())
      expect(azOutside.statusCode).toBe(403)
      expect(azOutside.code).toBe("AuthorizationPermissionMismatch")

      // Listing buckets (containers) names only those the principal holds a grant in.
      const buckets = yield* send(() => reader.send(new ListBucketsCommand({})))
      expect(buckets.Buckets?.map((b) => b.Name)).toEqual(["data"])
      const containers = yield* send(async () => {
        const names: Array<string> = []
        for await (const c of blob.listContainers()) names.push(c.name)
        return names
      })
      expect(containers).toEqual(["data"])

      // Every request has its audit line: the refused read names the principal, the key and the status.
      const audit = () =>
        fs
          .readFileSync(files.audit, "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as Record<string, unknown>)
      // Lines are written when each response closes, which may trail the client's read of it.
      yield* Effect.sync(() => audit().length).pipe(
        Effect.filterOrFail((n) => n >= 8),
        Effect.retry({ times: 100, schedule: Schedule.spaced("20 millis") }),
        Effect.orDie
      )
      const lines = audit()
      expect(lines).toContainEqual(
        expect.objectContaining({ protocol: "s3", principal: "reader", operation: "read", bucket: "data", key: "private/b.txt", status: 403, decision: "deny", reason: "no grant" })
      )
      expect(lines).toContainEqual(
        expect.objectContaining({ principal: "reader", operation: "read", bucket: "data", key: "datasets/a.txt", status: 200, bytes: 5, decision: "allow" })
      )
      expect(lines).toContainEqual(expect.objectContaining({ principal: "anonymous", status: 403, reason: "InvalidAccessKeyId" }))
      expect(lines).toContainEqual(expect.objectContaining({ protocol: "azure", principal: "az-reader", key: "private/b.txt", status: 403, decision: "deny" }))
      expect(fs.readFileSync(files.audit, "utf8")).not.toContain("secret-of-")

      // Reload: a new principal with a write grant works without a restart.
      write(files.s3, { identities: [s3Identity("reader-key", "reader"), s3Identity("writer-key", "writer")] })
      write(files.grants, { grants: [...grants, grant("writer-all", "writer", "", ["write", "read"])] })
      const writer = s3("writer-key")
      // Until the next poll it is an unknown key; retried, not slept on.
      yield* Effect.tryPromise(() => writer.send(new PutObjectCommand({ Bucket: "data", Key: "private/c.txt", Body: "new" }))).pipe(
        Effect.retry({ times: 100, schedule: Schedule.spaced("30 millis") }),
        Effect.orDie
      )
      expect(fs.readFileSync(path.join(root, "data", "private/c.txt"), "utf8")).toBe("new")

      // A broken file keeps the last good set: the writer still works after it.
      fs.writeFileSync(files.grants, "{ not json")
      yield* Effect.sleep("200 millis")
      yield* send(() => writer.send(new PutObjectCommand({ Bucket: "data", Key: "private/d.txt", Body: "still" })))
      expect(fs.readFileSync(path.join(root, "data", "private/d.txt"), "utf8")).toBe("still")
    })
  )
})
