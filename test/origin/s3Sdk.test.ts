/**
 * The official AWS SDK v3 S3 client, unchanged apart from endpoint and dummy
 * credentials, against the origin stub.
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
  S3ServiceException
} from "@aws-sdk/client-s3"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Readable } from "node:stream"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { sampleBytes } from "../../src/origin/seed.js"
import { sameBytes, TestOrigin } from "./fixtures/testOrigin.js"

const BUCKET = "sdk-s3"

const client = Effect.map(OriginStub, (stub) => {
  const seen: Array<Record<string, string>> = []
  const s3 = new S3Client({
    endpoint: stub.url,
    forcePathStyle: true,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" }
  })
  // Record outgoing headers so a test can prove which body encoding the SDK chose.
  s3.middlewareStack.add(
    (next) => async (args) => {
      const req = (args as { request?: { headers?: Record<string, string> } }).request
      if (req?.headers) seen.push({ ...req.headers })
      return next(args)
    },
    { step: "finalizeRequest", name: "recordHeaders", priority: "low" }
  )
  return { s3, seen, stub }
})

const send = <O>(p: () => Promise<O>) => Effect.promise(p)
/** The SDK's rejection, as a value. */
const failure = (p: () => Promise<unknown>) =>
  Effect.promise(() => p().then(
    () => {
      throw new Error("expected the request to fail")
    },
    (e: unknown) => e as S3ServiceException
  ))

const body = async (out: { Body?: { transformToByteArray(): Promise<Uint8Array> } | undefined }) =>
  Buffer.from(await out.Body!.transformToByteArray())

const DATA = sampleBytes(0, 1000)

layer(TestOrigin(), { excludeTestServices: true })("S3 SDK against the origin stub", (it) => {
  it.effect("creates a bucket (idempotently), puts, heads and gets an object", () =>
    Effect.gen(function* () {
      const { s3 } = yield* client
      yield* send(() => s3.send(new CreateBucketCommand({ Bucket: BUCKET })))
      yield* send(() => s3.send(new CreateBucketCommand({ Bucket: BUCKET })))
      const put = yield* send(() => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: "obj.bin", Body: DATA })))
      expect(put.ETag).toMatch(/^"[0-9a-f]+"$/)
      const head = yield* send(() => s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: "obj.bin" })))
      expect(head.ContentLength).toBe(1000)
      expect(head.ETag).toBe(put.ETag)
      expect(head.LastModified).toBeInstanceOf(Date)
      const get = yield* send(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "obj.bin" })))
      expect(get.ContentLength).toBe(1000)
      expect(yield* Effect.promise(() => body(get))).toEqual(DATA)
    })
  )

  it.effect("serves each single-range form with 206 and Content-Range", () =>
    Effect.gen(function* () {
      const { s3 } = yield* client
      const cases: Array<[string, number, number]> = [
        ["bytes=0-9", 0, 9],
        ["bytes=990-", 990, 999],
        ["bytes=-7", 993, 999],
        ["bytes=500-5000", 500, 999], // clamped at EOF
        ["bytes=-5000", 0, 999], // suffix longer than the object
        ["bytes=999-999", 999, 999]
      ]
      for (const [range, start, end] of cases) {
        const out = yield* send(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "obj.bin", Range: range })))
        expect(out.$metadata.httpStatusCode, range).toBe(206)
        expect(out.ContentRange, range).toBe(`bytes ${start}-${end}/1000`)
        expect(out.ContentLength, range).toBe(end - start + 1)
        expect(yield* Effect.promise(() => body(out)), range).toEqual(DATA.subarray(start, end + 1))
      }
    })
  )

  it.effect("rejects unsatisfiable and multiple ranges with InvalidRange (416)", () =>
    Effect.gen(function* () {
      const { s3 } = yield* client
      for (const range of ["bytes=1000-", "bytes=5000-6000", "bytes=-0", "bytes=0-1,5-6"]) {
        const e = yield* failure(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "obj.bin", Range: range })))
        expect(e.$metadata.httpStatusCode, range).toBe(416)
        expect(e.name, range).toBe("InvalidRange")
        expect(e.$metadata.requestId, range).toMatch(/^[0-9A-F]{16}$/)
      }
      // A syntactically invalid range is ignored, as S3 does: whole object.
      const out = yield* send(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "obj.bin", Range: "bytes=9-2" })))
      expect(out.$metadata.httpStatusCode).toBe(200)
      expect(out.ContentLength).toBe(1000)
    })
  )

  it.effect("answers conditional reads with 304 and 412", () =>
    Effect.gen(function* () {
      const { s3 } = yield* client
      const head = yield* send(() => s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: "obj.bin" })))
      const etag = head.ETag!
      const later = new Date(head.LastModified!.getTime() + 60_000)
      const earlier = new Date(head.LastModified!.getTime() - 60_000)

      const nm = yield* failure(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "obj.bin", IfNoneMatch: etag })))
      expect(nm.$metadata.httpStatusCode).toBe(304)
      const ims = yield* failure(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "obj.bin", IfModifiedSince: later })))
      expect(ims.$metadata.httpStatusCode).toBe(304)
      const im = yield* failure(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "obj.bin", IfMatch: '"nope"' })))
      expect(im.$metadata.httpStatusCode).toBe(412)
      expect(im.name).toBe("PreconditionFailed")
      const ius = yield* failure(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "obj.bin", IfUnmodifiedSince: earlier })))
      expect(ius.$metadata.httpStatusCode).toBe(412)
      const headNm = yield* failure(() => s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: "obj.bin", IfNoneMatch: etag })))
      expect(headNm.$metadata.httpStatusCode).toBe(304)

      // Conditions that hold: the object is served.
      const ok = yield* send(() =>
        s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "obj.bin", IfMatch: etag, IfModifiedSince: earlier, Range: "bytes=0-3" }))
      )
      expect(ok.$metadata.httpStatusCode).toBe(206)
      expect(yield* Effect.promise(() => body(ok))).toEqual(DATA.subarray(0, 4))
    })
  )

  it.effect("decodes the SDK's default aws-chunked streaming upload", () =>
    Effect.gen(function* () {
      const { s3, seen } = yield* client
      const big = sampleBytes(12345, 300_000)
      seen.length = 0
      yield* send(() =>
        s3.send(
          new PutObjectCommand({ Bucket: BUCKET, Key: "streamed.bin", Body: Readable.from([big.subarray(0, 100_000), big.subarray(100_000)]), ContentLength: big.length })
        )
      )
      const put = seen.find((h) => h["x-amz-content-sha256"] !== undefined)!
      expect(put["x-amz-content-sha256"]).toBe("STREAMING-UNSIGNED-PAYLOAD-TRAILER")
      expect(put["content-encoding"]).toContain("aws-chunked")
      const get = yield* send(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "streamed.bin" })))
      expect(get.ContentLength).toBe(big.length)
      expect(sameBytes(yield* Effect.promise(() => body(get)), big)).toBe("equal")
    })
  )

  it.effect("changes the ETag when content changes, and deletes", () =>
    Effect.gen(function* () {
      const { s3 } = yield* client
      const etags = new Set<string>()
      for (let i = 0; i < 5; i++) {
        const put = yield* send(() => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: "versioned.txt", Body: `version ${i}` })))
        etags.add(put.ETag!)
        const head = yield* send(() => s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: "versioned.txt" })))
        expect(head.ETag).toBe(put.ETag)
      }
      expect(etags.size).toBe(5)
      yield* send(() => s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: "versioned.txt" })))
      const gone = yield* failure(() => s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: "versioned.txt" })))
      expect(gone.$metadata.httpStatusCode).toBe(404)
      expect(gone.name).toBe("NotFound")
      const missing = yield* failure(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "versioned.txt" })))
      expect(missing.name).toBe("NoSuchKey")
      // Deleting a missing key succeeds, as on S3.
      yield* send(() => s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: "versioned.txt" })))
      const nb = yield* failure(() => s3.send(new GetObjectCommand({ Bucket: "no-such-bucket", Key: "x" })))
      expect(nb.name).toBe("NoSuchBucket")
    })
  )

  it.effect("stores keys with spaces, unicode, + and % exactly", () =>
    Effect.gen(function* () {
      const { s3 } = yield* client
      const keys = ["odd/with space.txt", "odd/ünïcödé/日本語.bin", "odd/a+b=c&d.txt", "odd/100% sure%2F.txt", "odd/emoji 🚀", "odd/trailing/"]
      for (const key of keys) {
        yield* send(() => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: `body of ${key}` })))
      }
      for (const key of keys) {
        const out = yield* send(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key })))
        expect((yield* Effect.promise(() => body(out))).toString()).toBe(`body of ${key}`)
      }
      const list = yield* send(() => s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: "odd/" })))
      const byUtf8 = [...keys].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
      expect(list.Contents?.map((c) => c.Key)).toEqual(byUtf8)
      yield* send(() => s3.send(new DeleteObjectsCommand({ Bucket: BUCKET, Delete: { Objects: keys.map((Key) => ({ Key })) } })))
      const after = yield* send(() => s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: "odd/" })))
      expect(after.KeyCount).toBe(0)
    })
  )

  it.effect("lists with ListObjectsV2 (pagination, delimiter, start-after) and V1 (marker)", () =>
    Effect.gen(function* () {
      const { s3 } = yield* client
      const keys = ["l/a/1", "l/a/2", "l/b/1", "l/c", "l/d/x/y", "l/e", "l/f"]
      for (const key of keys) yield* send(() => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: key })))

      const all: string[] = []
      let token: string | undefined
      let pages = 0
      do {
        const page = yield* send(() =>
          s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: "l/", MaxKeys: 3, ContinuationToken: token }))
        )
        pages++
        expect(page.KeyCount).toBeLessThanOrEqual(3)
        all.push(...(page.Contents ?? []).map((c) => c.Key!))
        token = page.IsTruncated ? page.NextContinuationToken : undefined
      } while (token)
      expect(all).toEqual(keys)
      expect(pages).toBe(3)

      const tree = yield* send(() => s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: "l/", Delimiter: "/" })))
      expect(tree.CommonPrefixes?.map((p) => p.Prefix)).toEqual(["l/a/", "l/b/", "l/d/"])
      expect(tree.Contents?.map((c) => c.Key)).toEqual(["l/c", "l/e", "l/f"])
      expect(tree.KeyCount).toBe(6)

      // Paginating a delimited listing: a page that ends on a prefix continues after it.
      const seenItems: string[] = []
      token = undefined
      do {
        const page = yield* send(() =>
          s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: "l/", Delimiter: "/", MaxKeys: 2, ContinuationToken: token }))
        )
        seenItems.push(...(page.CommonPrefixes ?? []).map((p) => p.Prefix!), ...(page.Contents ?? []).map((c) => c.Key!))
        token = page.IsTruncated ? page.NextContinuationToken : undefined
      } while (token)
      expect(seenItems.sort()).toEqual(["l/a/", "l/b/", "l/c", "l/d/", "l/e", "l/f"])

      const after = yield* send(() => s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: "l/", StartAfter: "l/c" })))
      expect(after.Contents?.map((c) => c.Key)).toEqual(["l/d/x/y", "l/e", "l/f"])

      const v1a = yield* send(() => s3.send(new ListObjectsCommand({ Bucket: BUCKET, Prefix: "l/", MaxKeys: 4 })))
      expect(v1a.IsTruncated).toBe(true)
      expect(v1a.Contents?.map((c) => c.Key)).toEqual(keys.slice(0, 4))
      expect(v1a.NextMarker).toBe("l/c")
      const v1b = yield* send(() => s3.send(new ListObjectsCommand({ Bucket: BUCKET, Prefix: "l/", Marker: v1a.NextMarker })))
      expect(v1b.IsTruncated).toBe(false)
      expect(v1b.Contents?.map((c) => c.Key)).toEqual(keys.slice(4))
      const v1d = yield* send(() => s3.send(new ListObjectsCommand({ Bucket: BUCKET, Prefix: "l/", Delimiter: "/", MaxKeys: 2 })))
      expect(v1d.CommonPrefixes?.map((p) => p.Prefix)).toEqual(["l/a/", "l/b/"])
      expect(v1d.NextMarker).toBe("l/b/")
      const v1e = yield* send(() => s3.send(new ListObjectsCommand({ Bucket: BUCKET, Prefix: "l/", Delimiter: "/", Marker: "l/b/" })))
      expect(v1e.Contents?.map((c) => c.Key)).toEqual(["l/c", "l/e", "l/f"])
      expect(v1e.CommonPrefixes?.map((p) => p.Prefix)).toEqual(["l/d/"])
    })
  )
})
