/**
 * The official-SDK suite (origin issue), runnable against any endpoint: the origin
 * stub itself, or the gateway on either route. The clients are the official
 * `@aws-sdk/client-s3` and `@azure/storage-blob`, unchanged apart from endpoint and
 * credentials. Every body read through the endpoint under test is checked by SHA-256
 * against the same read made directly at the origin, besides the expected bytes.
 *
 * A test file provides an `SdkTarget` layer and calls `s3SdkSuite(it)` /
 * `azureSdkSuite(it)` inside `layer(targetLayer)(...)`.
 */
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ServiceException
} from "@aws-sdk/client-s3"
import { BlobServiceClient, type ContainerClient, type RestError, StorageSharedKeyCredential } from "@azure/storage-blob"
import type { Vitest } from "@effect/vitest"
import { expect } from "@effect/vitest"
import { Context, Effect } from "effect"
import { createHash } from "node:crypto"
import { Readable } from "node:stream"
import { sampleBytes } from "../../src/origin/seed.js"
import { failure, sameBytes, send } from "./checks.js"

export interface Endpoint {
  /** S3 endpoint, path-style. */
  readonly s3Url: string
  readonly s3Credentials: { readonly accessKeyId: string; readonly secretAccessKey: string }
  /** What a `BlobServiceClient` takes: `http://host:port/<account>`. */
  readonly azureUrl: string
  readonly azureCredentials: { readonly account: string; readonly key: string }
}

export interface SdkTargetShape {
  readonly name: string
  /** The endpoint under test. */
  readonly endpoint: Endpoint
  /** The origin itself: reference reads for the SHA-256 checks, and setup the endpoint does not offer. */
  readonly origin: Endpoint
  /**
   * The endpoint offers the origin's administrative and extended surface (create bucket and
   * container, DeleteObjects, Put Block, list containers, conditional writes). When false
   * (the gateway), setup goes to the origin and those requests must be refused with NotImplemented.
   */
  readonly full: boolean
}

export class SdkTarget extends Context.Tag("test/SdkTarget")<SdkTarget, SdkTargetShape>() {}

type It = Vitest.MethodsNonLive<SdkTarget, true>

export const s3ClientFor = (e: Endpoint, record?: Array<Record<string, string>>): S3Client => {
  const s3 = new S3Client({
    endpoint: e.s3Url,
    forcePathStyle: true,
    region: "us-east-1",
    credentials: e.s3Credentials,
    maxAttempts: 1
  })
  if (record !== undefined) {
    // Record outgoing headers so a test can prove which body encoding the SDK chose.
    s3.middlewareStack.add(
      (next) => async (args) => {
        const req = (args as { request?: { headers?: Record<string, string> } }).request
        if (req?.headers) record.push({ ...req.headers })
        return next(args)
      },
      { step: "finalizeRequest", name: "recordHeaders", priority: "low" }
    )
  }
  return s3
}

export const blobServiceFor = (e: Endpoint): BlobServiceClient =>
  new BlobServiceClient(e.azureUrl, new StorageSharedKeyCredential(e.azureCredentials.account, e.azureCredentials.key), {
    retryOptions: { maxTries: 1 }
  })

export const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")

const s3Body = async (out: { Body?: { transformToByteArray(): Promise<Uint8Array> } | undefined }) =>
  Buffer.from(await out.Body!.transformToByteArray())

const collect = async (stream: NodeJS.ReadableStream | undefined): Promise<Buffer> => {
  const chunks: Buffer[] = []
  for await (const c of stream!) chunks.push(Buffer.from(c as Uint8Array))
  return Buffer.concat(chunks)
}

const S3_BUCKET = "sdk-s3"
const S3_DATA = sampleBytes(0, 1000)

export const s3SdkSuite = (it: It) => {
  const clients = Effect.map(SdkTarget, (target) => {
    const seen: Array<Record<string, string>> = []
    const s3 = s3ClientFor(target.endpoint, seen)
    const admin = s3ClientFor(target.origin)
    /** GetObject through the endpoint; the body must hash like the origin's answer to the same read. */
    const getChecked = (input: { Key: string; Range?: string; IfMatch?: string; IfModifiedSince?: Date }, bucket = S3_BUCKET) =>
      Effect.gen(function* () {
        const out = yield* send(() => s3.send(new GetObjectCommand({ Bucket: bucket, ...input })))
        const bytes = yield* Effect.promise(() => s3Body(out))
        const ref = yield* send(() => admin.send(new GetObjectCommand({ Bucket: bucket, Key: input.Key, Range: input.Range })))
        expect(sha256(bytes), `${target.name} ${input.Key} ${input.Range ?? ""} vs origin`).toBe(
          sha256(yield* Effect.promise(() => s3Body(ref)))
        )
        return { out, bytes }
      })
    return { s3, admin, seen, target, getChecked, setup: target.full ? s3 : admin }
  })

  it.effect("creates a bucket (idempotently), puts, heads and gets an object", () =>
    Effect.gen(function* () {
      const { s3, setup, getChecked } = yield* clients
      yield* send(() => setup.send(new CreateBucketCommand({ Bucket: S3_BUCKET })))
      yield* send(() => setup.send(new CreateBucketCommand({ Bucket: S3_BUCKET })))
      const put = yield* send(() => s3.send(new PutObjectCommand({ Bucket: S3_BUCKET, Key: "obj.bin", Body: S3_DATA })))
      expect(put.ETag).toMatch(/^"[0-9a-f]+"$/)
      const head = yield* send(() => s3.send(new HeadObjectCommand({ Bucket: S3_BUCKET, Key: "obj.bin" })))
      expect(head.ContentLength).toBe(1000)
      expect(head.ETag).toBe(put.ETag)
      expect(head.LastModified).toBeInstanceOf(Date)
      const { out, bytes } = yield* getChecked({ Key: "obj.bin" })
      expect(out.ContentLength).toBe(1000)
      expect(bytes).toEqual(S3_DATA)
    })
  )

  it.effect("serves each single-range form with 206 and Content-Range", () =>
    Effect.gen(function* () {
      const { getChecked } = yield* clients
      const cases: Array<[string, number, number]> = [
        ["bytes=0-9", 0, 9],
        ["bytes=990-", 990, 999],
        ["bytes=-7", 993, 999],
        ["bytes=500-5000", 500, 999], // clamped at EOF
        ["bytes=-5000", 0, 999], // suffix longer than the object
        ["bytes=999-999", 999, 999]
      ]
      for (const [range, start, end] of cases) {
        const { out, bytes } = yield* getChecked({ Key: "obj.bin", Range: range })
        expect(out.$metadata.httpStatusCode, range).toBe(206)
        expect(out.ContentRange, range).toBe(`bytes ${start}-${end}/1000`)
        expect(out.ContentLength, range).toBe(end - start + 1)
        expect(bytes, range).toEqual(S3_DATA.subarray(start, end + 1))
      }
    })
  )

  it.effect("rejects unsatisfiable and multiple ranges with InvalidRange (416)", () =>
    Effect.gen(function* () {
      const { s3, getChecked } = yield* clients
      for (const range of ["bytes=1000-", "bytes=5000-6000", "bytes=-0", "bytes=0-1,5-6"]) {
        const e = yield* failure<S3ServiceException>(() => s3.send(new GetObjectCommand({ Bucket: S3_BUCKET, Key: "obj.bin", Range: range })))
        expect(e.$metadata.httpStatusCode, range).toBe(416)
        expect(e.name, range).toBe("InvalidRange")
        expect(e.$metadata.requestId, range).toMatch(/^[0-9A-F]{16}$/)
      }
      // A syntactically invalid range is ignored, as S3 does: whole object.
      const { out } = yield* getChecked({ Key: "obj.bin", Range: "bytes=9-2" })
      expect(out.$metadata.httpStatusCode).toBe(200)
      expect(out.ContentLength).toBe(1000)
    })
  )

  it.effect("answers conditional reads with 304 and 412", () =>
    Effect.gen(function* () {
      const { s3, getChecked } = yield* clients
      const head = yield* send(() => s3.send(new HeadObjectCommand({ Bucket: S3_BUCKET, Key: "obj.bin" })))
      const etag = head.ETag!
      const later = new Date(head.LastModified!.getTime() + 60_000)
      const earlier = new Date(head.LastModified!.getTime() - 60_000)
      const get = (extra: Record<string, unknown>) => () =>
        s3.send(new GetObjectCommand({ Bucket: S3_BUCKET, Key: "obj.bin", ...extra }))

      const nm = yield* failure<S3ServiceException>(get({ IfNoneMatch: etag }))
      expect(nm.$metadata.httpStatusCode).toBe(304)
      const ims = yield* failure<S3ServiceException>(get({ IfModifiedSince: later }))
      expect(ims.$metadata.httpStatusCode).toBe(304)
      const im = yield* failure<S3ServiceException>(get({ IfMatch: '"nope"' }))
      expect(im.$metadata.httpStatusCode).toBe(412)
      expect(im.name).toBe("PreconditionFailed")
      const ius = yield* failure<S3ServiceException>(get({ IfUnmodifiedSince: earlier }))
      expect(ius.$metadata.httpStatusCode).toBe(412)
      const headNm = yield* failure<S3ServiceException>(() =>
        s3.send(new HeadObjectCommand({ Bucket: S3_BUCKET, Key: "obj.bin", IfNoneMatch: etag }))
      )
      expect(headNm.$metadata.httpStatusCode).toBe(304)

      // Conditions that hold: the object is served.
      const { out, bytes } = yield* getChecked({ Key: "obj.bin", IfMatch: etag, IfModifiedSince: earlier, Range: "bytes=0-3" })
      expect(out.$metadata.httpStatusCode).toBe(206)
      expect(bytes).toEqual(S3_DATA.subarray(0, 4))
    })
  )

  it.effect("decodes the SDK's default aws-chunked streaming upload", () =>
    Effect.gen(function* () {
      const { s3, seen, getChecked } = yield* clients
      const big = sampleBytes(12345, 300_000)
      seen.length = 0
      yield* send(() =>
        s3.send(
          new PutObjectCommand({
            Bucket: S3_BUCKET,
            Key: "streamed.bin",
            Body: Readable.from([big.subarray(0, 100_000), big.subarray(100_000)]),
            ContentLength: big.length
          })
        )
      )
      const put = seen.find((h) => h["x-amz-content-sha256"] !== undefined)!
      expect(put["x-amz-content-sha256"]).toBe("STREAMING-UNSIGNED-PAYLOAD-TRAILER")
      expect(put["content-encoding"]).toContain("aws-chunked")
      const { out, bytes } = yield* getChecked({ Key: "streamed.bin" })
      expect(out.ContentLength).toBe(big.length)
      expect(sameBytes(bytes, big)).toBe("equal")
    })
  )

  it.effect("changes the ETag when content changes, and deletes", () =>
    Effect.gen(function* () {
      const { s3, getChecked } = yield* clients
      const etags = new Set<string>()
      for (let i = 0; i < 5; i++) {
        const put = yield* send(() => s3.send(new PutObjectCommand({ Bucket: S3_BUCKET, Key: "versioned.txt", Body: `version ${i}` })))
        etags.add(put.ETag!)
        const head = yield* send(() => s3.send(new HeadObjectCommand({ Bucket: S3_BUCKET, Key: "versioned.txt" })))
        expect(head.ETag).toBe(put.ETag)
        // A read right after the write is the new version, never the old one.
        const { bytes } = yield* getChecked({ Key: "versioned.txt" })
        expect(bytes.toString()).toBe(`version ${i}`)
      }
      expect(etags.size).toBe(5)
      yield* send(() => s3.send(new DeleteObjectCommand({ Bucket: S3_BUCKET, Key: "versioned.txt" })))
      const gone = yield* failure<S3ServiceException>(() => s3.send(new HeadObjectCommand({ Bucket: S3_BUCKET, Key: "versioned.txt" })))
      expect(gone.$metadata.httpStatusCode).toBe(404)
      expect(gone.name).toBe("NotFound")
      const missing = yield* failure<S3ServiceException>(() => s3.send(new GetObjectCommand({ Bucket: S3_BUCKET, Key: "versioned.txt" })))
      expect(missing.name).toBe("NoSuchKey")
      // Deleting a missing key succeeds, as on S3.
      yield* send(() => s3.send(new DeleteObjectCommand({ Bucket: S3_BUCKET, Key: "versioned.txt" })))
      const nb = yield* failure<S3ServiceException>(() => s3.send(new GetObjectCommand({ Bucket: "no-such-bucket", Key: "x" })))
      expect(nb.name).toBe("NoSuchBucket")
    })
  )

  it.effect("stores keys with spaces, unicode, + and % exactly", () =>
    Effect.gen(function* () {
      const { s3, setup, target, getChecked } = yield* clients
      const keys = ["odd/with space.txt", "odd/ünïcödé/日本語.bin", "odd/a+b=c&d.txt", "odd/100% sure%2F.txt", "odd/emoji 🚀", "odd/trailing/"]
      for (const key of keys) {
        yield* send(() => s3.send(new PutObjectCommand({ Bucket: S3_BUCKET, Key: key, Body: `body of ${key}` })))
      }
      for (const key of keys) {
        const { bytes } = yield* getChecked({ Key: key })
        expect(bytes.toString()).toBe(`body of ${key}`)
      }
      const list = yield* send(() => s3.send(new ListObjectsV2Command({ Bucket: S3_BUCKET, Prefix: "odd/" })))
      const byUtf8 = [...keys].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
      expect(list.Contents?.map((c) => c.Key)).toEqual(byUtf8)
      const bulk = () => s3.send(new DeleteObjectsCommand({ Bucket: S3_BUCKET, Delete: { Objects: keys.map((Key) => ({ Key })) } }))
      if (!target.full) {
        const refused = yield* failure<S3ServiceException>(bulk)
        expect(refused.$metadata.httpStatusCode).toBe(501)
        expect(refused.name).toBe("NotImplemented")
      }
      yield* send(() => setup.send(new DeleteObjectsCommand({ Bucket: S3_BUCKET, Delete: { Objects: keys.map((Key) => ({ Key })) } })))
      const after = yield* send(() => s3.send(new ListObjectsV2Command({ Bucket: S3_BUCKET, Prefix: "odd/" })))
      expect(after.KeyCount).toBe(0)
    })
  )

  it.effect("lists with ListObjectsV2 (pagination, delimiter, start-after) and V1 (marker)", () =>
    Effect.gen(function* () {
      const { s3 } = yield* clients
      const keys = ["l/a/1", "l/a/2", "l/b/1", "l/c", "l/d/x/y", "l/e", "l/f"]
      for (const key of keys) yield* send(() => s3.send(new PutObjectCommand({ Bucket: S3_BUCKET, Key: key, Body: key })))

      const all: string[] = []
      let token: string | undefined
      let pages = 0
      do {
        const page = yield* send(() =>
          s3.send(new ListObjectsV2Command({ Bucket: S3_BUCKET, Prefix: "l/", MaxKeys: 3, ContinuationToken: token }))
        )
        pages++
        expect(page.KeyCount).toBeLessThanOrEqual(3)
        all.push(...(page.Contents ?? []).map((c) => c.Key!))
        token = page.IsTruncated ? page.NextContinuationToken : undefined
      } while (token)
      expect(all).toEqual(keys)
      expect(pages).toBe(3)

      const tree = yield* send(() => s3.send(new ListObjectsV2Command({ Bucket: S3_BUCKET, Prefix: "l/", Delimiter: "/" })))
      expect(tree.CommonPrefixes?.map((p) => p.Prefix)).toEqual(["l/a/", "l/b/", "l/d/"])
      expect(tree.Contents?.map((c) => c.Key)).toEqual(["l/c", "l/e", "l/f"])
      expect(tree.KeyCount).toBe(6)

      // Paginating a delimited listing: a page that ends on a prefix continues after it.
      const seenItems: string[] = []
      token = undefined
      do {
        const page = yield* send(() =>
          s3.send(new ListObjectsV2Command({ Bucket: S3_BUCKET, Prefix: "l/", Delimiter: "/", MaxKeys: 2, ContinuationToken: token }))
        )
        seenItems.push(...(page.CommonPrefixes ?? []).map((p) => p.Prefix!), ...(page.Contents ?? []).map((c) => c.Key!))
        token = page.IsTruncated ? page.NextContinuationToken : undefined
      } while (token)
      expect(seenItems.sort()).toEqual(["l/a/", "l/b/", "l/c", "l/d/", "l/e", "l/f"])

      const after = yield* send(() => s3.send(new ListObjectsV2Command({ Bucket: S3_BUCKET, Prefix: "l/", StartAfter: "l/c" })))
      expect(after.Contents?.map((c) => c.Key)).toEqual(["l/d/x/y", "l/e", "l/f"])

      const v1a = yield* send(() => s3.send(new ListObjectsCommand({ Bucket: S3_BUCKET, Prefix: "l/", MaxKeys: 4 })))
      expect(v1a.IsTruncated).toBe(true)
      expect(v1a.Contents?.map((c) => c.Key)).toEqual(keys.slice(0, 4))
      expect(v1a.NextMarker).toBe("l/c")
      const v1b = yield* send(() => s3.send(new ListObjectsCommand({ Bucket: S3_BUCKET, Prefix: "l/", Marker: v1a.NextMarker })))
      expect(v1b.IsTruncated).toBe(false)
      expect(v1b.Contents?.map((c) => c.Key)).toEqual(keys.slice(4))
      const v1d = yield* send(() => s3.send(new ListObjectsCommand({ Bucket: S3_BUCKET, Prefix: "l/", Delimiter: "/", MaxKeys: 2 })))
      expect(v1d.CommonPrefixes?.map((p) => p.Prefix)).toEqual(["l/a/", "l/b/"])
      expect(v1d.NextMarker).toBe("l/b/")
      const v1e = yield* send(() => s3.send(new ListObjectsCommand({ Bucket: S3_BUCKET, Prefix: "l/", Delimiter: "/", Marker: "l/b/" })))
      expect(v1e.Contents?.map((c) => c.Key)).toEqual(["l/c", "l/e", "l/f"])
      expect(v1e.CommonPrefixes?.map((p) => p.Prefix)).toEqual(["l/d/"])
    })
  )
}

const CONTAINER = "sdk-azure"
const AZ_DATA = sampleBytes(777, 1000)
const unquote = (etag: string | undefined) => etag?.replace(/^"|"$/g, "")

export const azureSdkSuite = (it: It) => {
  const clients = Effect.map(SdkTarget, (target) => {
    const svc = blobServiceFor(target.endpoint)
    const adminSvc = blobServiceFor(target.origin)
    const container = svc.getContainerClient(CONTAINER)
    const adminContainer = adminSvc.getContainerClient(CONTAINER)
    const s3 = s3ClientFor(target.endpoint)
    /** A download through the endpoint; its bytes must hash like the origin's answer to the same read. */
    const downloadChecked = (name: string, offset = 0, count?: number, c: ContainerClient = container, ref: ContainerClient = adminContainer) =>
      Effect.gen(function* () {
        const out = yield* send(() => c.getBlockBlobClient(name).download(offset, count))
        const bytes = yield* send(() => collect(out.readableStreamBody))
        const reference = yield* send(() => ref.getBlockBlobClient(name).download(offset, count))
        expect(sha256(bytes), `${target.name} ${name} ${offset}+${count ?? "*"} vs origin`).toBe(
          sha256(yield* send(() => collect(reference.readableStreamBody)))
        )
        return { out, bytes }
      })
    return { svc, adminSvc, container, adminContainer, s3, target, downloadChecked, setup: target.full ? container : adminContainer }
  })

  it.effect("creates a container, uploads, reads properties and downloads", () =>
    Effect.gen(function* () {
      const { container, setup, target, downloadChecked } = yield* clients
      yield* send(() => setup.create())
      if (target.full) {
        const again = yield* failure<RestError>(() => container.create())
        expect(again.statusCode).toBe(409)
        expect(again.code).toBe("ContainerAlreadyExists")
        expect((yield* send(() => container.createIfNotExists())).succeeded).toBe(false)
      } else {
        const refused = yield* failure<RestError>(() => container.create())
        expect(refused.statusCode).toBe(501)
        expect(refused.code).toBe("NotImplemented")
      }

      const blob = container.getBlockBlobClient("obj.bin")
      const up = yield* send(() => blob.upload(AZ_DATA, AZ_DATA.length))
      expect(up.etag).toMatch(/^"[0-9a-f]+"$/)
      const props = yield* send(() => blob.getProperties())
      expect(props.contentLength).toBe(1000)
      expect(props.etag).toBe(up.etag)
      expect(props.blobType).toBe("BlockBlob")
      expect(props.lastModified).toBeInstanceOf(Date)
      expect(props._response.headers.get("x-ms-version")).toBeTruthy()
      expect(yield* send(() => blob.downloadToBuffer())).toEqual(AZ_DATA)
      const { bytes } = yield* downloadChecked("obj.bin")
      expect(bytes).toEqual(AZ_DATA)
      expect(yield* send(() => blob.exists())).toBe(true)
    })
  )

  it.effect("serves x-ms-range reads (closed, open-ended, clamped) and 416 InvalidRange", () =>
    Effect.gen(function* () {
      const { container, downloadChecked } = yield* clients
      const cases: Array<[number, number | undefined, number, number]> = [
        [0, 10, 0, 9],
        [990, undefined, 990, 999],
        [500, 4500, 500, 999]
      ]
      for (const [offset, count, start, end] of cases) {
        const { out, bytes } = yield* downloadChecked("obj.bin", offset, count)
        expect(out._response.status).toBe(206)
        expect(out.contentRange).toBe(`bytes ${start}-${end}/1000`)
        expect(bytes).toEqual(AZ_DATA.subarray(start, end + 1))
      }
      const e = yield* failure<RestError>(() => container.getBlockBlobClient("obj.bin").download(1000, 10))
      expect(e.statusCode).toBe(416)
      expect(e.code).toBe("InvalidRange")
      expect(e.response?.headers.get("x-ms-request-id")).toMatch(/^[0-9a-f-]{36}$/)
    })
  )

  it.effect("answers conditional reads with 304 and 412 ConditionNotMet", () =>
    Effect.gen(function* () {
      const { container } = yield* clients
      const blob = container.getBlockBlobClient("obj.bin")
      const props = yield* send(() => blob.getProperties())
      const later = new Date(props.lastModified!.getTime() + 60_000)
      const nm = yield* failure<RestError>(() => blob.download(0, undefined, { conditions: { ifNoneMatch: props.etag! } }))
      expect(nm.statusCode).toBe(304)
      const ims = yield* failure<RestError>(() => blob.download(0, undefined, { conditions: { ifModifiedSince: later } }))
      expect(ims.statusCode).toBe(304)
      const im = yield* failure<RestError>(() => blob.download(0, undefined, { conditions: { ifMatch: '"stale"' } }))
      expect(im.statusCode).toBe(412)
      expect(im.code).toBe("ConditionNotMet")
      const headIm = yield* failure<RestError>(() => blob.getProperties({ conditions: { ifMatch: '"stale"' } }))
      expect(headIm.statusCode).toBe(412)
      const ok = yield* send(() => blob.download(0, 4, { conditions: { ifMatch: props.etag! } }))
      expect(yield* send(() => collect(ok.readableStreamBody))).toEqual(AZ_DATA.subarray(0, 4))
    })
  )

  it.effect("lists flat with pagination and by hierarchy with BlobPrefix", () =>
    Effect.gen(function* () {
      const { container, svc, target } = yield* clients
      const names = ["l/a/1", "l/a/2", "l/b/1", "l/c", "l/d/x/y", "l/e", "l/f"]
      for (const n of names) yield* send(() => container.getBlockBlobClient(n).upload(n, n.length))

      const all: string[] = []
      let pages = 0
      yield* send(async () => {
        for await (const page of container.listBlobsFlat({ prefix: "l/" }).byPage({ maxPageSize: 3 })) {
          pages++
          expect(page.segment.blobItems.length).toBeLessThanOrEqual(3)
          all.push(...page.segment.blobItems.map((b) => b.name))
        }
      })
      expect(all).toEqual(names)
      expect(pages).toBe(3)

      const prefixes: string[] = []
      const blobs: string[] = []
      yield* send(async () => {
        for await (const item of container.listBlobsByHierarchy("/", { prefix: "l/" })) {
          if (item.kind === "prefix") prefixes.push(item.name)
          else {
            blobs.push(item.name)
            expect(item.properties.contentLength).toBe(item.name.length)
          }
        }
      })
      expect(prefixes).toEqual(["l/a/", "l/b/", "l/d/"])
      expect(blobs).toEqual(["l/c", "l/e", "l/f"])

      // Hierarchical pages that end on a prefix continue after it.
      const paged: string[] = []
      yield* send(async () => {
        for await (const page of container.listBlobsByHierarchy("/", { prefix: "l/" }).byPage({ maxPageSize: 2 })) {
          paged.push(...page.segment.blobPrefixes!.map((p) => p.name), ...page.segment.blobItems.map((b) => b.name))
        }
      })
      expect(paged.sort()).toEqual(["l/a/", "l/b/", "l/c", "l/d/", "l/e", "l/f"])

      if (target.full) {
        const containers: string[] = []
        yield* send(async () => {
          for await (const c of svc.listContainers()) containers.push(c.name)
        })
        expect(containers).toContain(CONTAINER)
      }
    })
  )

  it.effect("deletes blobs, and reports BlobNotFound/ContainerNotFound", () =>
    Effect.gen(function* () {
      const { container, svc, target } = yield* clients
      const blob = container.getBlockBlobClient("doomed.txt")
      const up = yield* send(() => blob.upload("bye", 3))
      if (target.full) {
        const wrong = yield* failure<RestError>(() => blob.delete({ conditions: { ifMatch: '"stale"' } }))
        expect(wrong.statusCode).toBe(412)
        yield* send(() => blob.delete({ conditions: { ifMatch: up.etag! } }))
      } else {
        // Conditional writes are not offered (a check-then-write could not be atomic).
        const refused = yield* failure<RestError>(() => blob.delete({ conditions: { ifMatch: up.etag! } }))
        expect(refused.statusCode).toBe(501)
        expect(refused.code).toBe("NotImplemented")
        expect(yield* send(() => blob.exists())).toBe(true)
        yield* send(() => blob.delete())
      }
      expect(yield* send(() => blob.exists())).toBe(false)
      const again = yield* failure<RestError>(() => blob.delete())
      expect(again.statusCode).toBe(404)
      expect(again.code).toBe("BlobNotFound")
      const dl = yield* failure<RestError>(() => blob.download())
      expect(dl.code).toBe("BlobNotFound")
      const nc = yield* failure<RestError>(() => svc.getContainerClient("no-such-container").getBlockBlobClient("x").download())
      expect(nc.code).toBe("ContainerNotFound")
    })
  )

  it.effect("changes the ETag on overwrite and honours (or refuses) upload conditions", () =>
    Effect.gen(function* () {
      const { container, target, downloadChecked } = yield* clients
      const blob = container.getBlockBlobClient("overwrite.txt")
      const a = yield* send(() => blob.upload("one", 3))
      expect((yield* downloadChecked("overwrite.txt")).bytes.toString()).toBe("one")
      const b = yield* send(() => blob.upload("two", 3))
      expect(b.etag).not.toBe(a.etag)
      const ifNone = yield* failure<RestError>(() => blob.upload("three", 5, { conditions: { ifNoneMatch: "*" } }))
      expect(ifNone.statusCode).toBe(target.full ? 412 : 501)
      // The read right after the overwrite is the new version.
      expect((yield* send(() => blob.downloadToBuffer())).toString()).toBe("two")
      expect((yield* downloadChecked("overwrite.txt")).bytes.toString()).toBe("two")
    })
  )

  it.effect("commits staged blocks (uploadStream, where offered) and handles odd names", () =>
    Effect.gen(function* () {
      const { container, target, downloadChecked, setup } = yield* clients
      const big = sampleBytes(0, 700_000)
      const stage = (c: ContainerClient) =>
        c.getBlockBlobClient("staged/big.bin").uploadStream(Readable.from([big.subarray(0, 350_000), big.subarray(350_000)]), 256 * 1024, 2)
      if (!target.full) {
        const refused = yield* failure<RestError>(() => stage(container))
        expect(refused.statusCode).toBe(501)
      }
      yield* send(() => stage(setup))
      expect(sameBytes((yield* downloadChecked("staged/big.bin")).bytes, big)).toBe("equal")

      const names = ["odd/with space.txt", "odd/ünïcödé/日本語.bin", "odd/a+b=c&d.txt", "odd/100% sure.txt"]
      for (const n of names) yield* send(() => container.getBlockBlobClient(n).upload(`body of ${n}`, Buffer.byteLength(`body of ${n}`)))
      for (const n of names) {
        expect((yield* downloadChecked(n)).bytes.toString()).toBe(`body of ${n}`)
      }
      const listed: string[] = []
      yield* send(async () => {
        for await (const b of container.listBlobsFlat({ prefix: "odd/" })) listed.push(b.name)
      })
      expect(listed).toEqual([...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))))
    })
  )

  it.effect("shares one namespace with S3: writes through either protocol read through both", () =>
    Effect.gen(function* () {
      const { container, s3, downloadChecked } = yield* clients
      const viaS3 = sampleBytes(5, 5000)
      const put = yield* send(() => s3.send(new PutObjectCommand({ Bucket: CONTAINER, Key: "x/from-s3.bin", Body: viaS3 })))
      const blob = container.getBlockBlobClient("x/from-s3.bin")
      const props = yield* send(() => blob.getProperties())
      expect(unquote(props.etag)).toBe(unquote(put.ETag))
      expect(yield* send(() => blob.downloadToBuffer())).toEqual(viaS3)
      expect((yield* downloadChecked("x/from-s3.bin", 100, 50)).bytes).toEqual(viaS3.subarray(100, 150))

      const viaAzure = sampleBytes(9, 3000)
      const up = yield* send(() => container.getBlockBlobClient("x/from-azure.bin").upload(viaAzure, viaAzure.length))
      const head = yield* send(() => s3.send(new HeadObjectCommand({ Bucket: CONTAINER, Key: "x/from-azure.bin" })))
      expect(unquote(head.ETag)).toBe(unquote(up.etag))
      const get = yield* send(() => s3.send(new GetObjectCommand({ Bucket: CONTAINER, Key: "x/from-azure.bin", Range: "bytes=-10" })))
      expect(Buffer.from(yield* send(() => get.Body!.transformToByteArray()))).toEqual(viaAzure.subarray(2990))

      // Listing ETags agree too (Azure lists them unquoted, S3 quoted).
      const listed: Array<string | undefined> = []
      yield* send(async () => {
        for await (const b of container.listBlobsFlat({ prefix: "x/from-s3" })) listed.push(unquote(b.properties.etag))
      })
      expect(listed).toEqual([unquote(put.ETag)])
    })
  )
}
