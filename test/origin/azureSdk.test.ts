/**
 * The official @azure/storage-blob client, unchanged apart from the endpoint and
 * Azurite's well-known credentials, against the origin stub; plus the cross-protocol
 * contract (S3 writes readable through Azure and vice versa).
 */
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3"
import { BlobServiceClient, RestError, StorageSharedKeyCredential } from "@azure/storage-blob"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Readable } from "node:stream"
import { AZURITE_ACCOUNT, AZURITE_KEY, OriginStub } from "../../src/origin/OriginStub.js"
import { sampleBytes } from "../../src/origin/seed.js"
import { sameBytes, TestOrigin } from "./fixtures/testOrigin.js"

const CONTAINER = "sdk-azure"

const clients = Effect.map(OriginStub, (stub) => {
  const svc = new BlobServiceClient(stub.azureUrl, new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_KEY))
  const s3 = new S3Client({
    endpoint: stub.url,
    forcePathStyle: true,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" }
  })
  return { svc, container: svc.getContainerClient(CONTAINER), s3, stub }
})

const send = <O>(p: () => Promise<O>) => Effect.promise(p)
const failure = (p: () => Promise<unknown>) =>
  Effect.promise(() =>
    p().then(
      () => {
        throw new Error("expected the request to fail")
      },
      (e: unknown) => e as RestError
    )
  )

const collect = async (stream: NodeJS.ReadableStream | undefined): Promise<Buffer> => {
  const chunks: Buffer[] = []
  for await (const c of stream!) chunks.push(Buffer.from(c as Uint8Array))
  return Buffer.concat(chunks)
}

const DATA = sampleBytes(777, 1000)
const unquote = (etag: string | undefined) => etag?.replace(/^"|"$/g, "")

layer(TestOrigin(), { excludeTestServices: true })("Azure Blob SDK against the origin stub", (it) => {
  it.effect("creates a container, uploads, reads properties and downloads", () =>
    Effect.gen(function* () {
      const { container } = yield* clients
      yield* send(() => container.create())
      const again = yield* failure(() => container.create())
      expect(again.statusCode).toBe(409)
      expect(again.code).toBe("ContainerAlreadyExists")
      expect((yield* send(() => container.createIfNotExists())).succeeded).toBe(false)

      const blob = container.getBlockBlobClient("obj.bin")
      const up = yield* send(() => blob.upload(DATA, DATA.length))
      expect(up.etag).toMatch(/^"[0-9a-f]+"$/)
      const props = yield* send(() => blob.getProperties())
      expect(props.contentLength).toBe(1000)
      expect(props.etag).toBe(up.etag)
      expect(props.blobType).toBe("BlockBlob")
      expect(props.lastModified).toBeInstanceOf(Date)
      expect(yield* send(() => blob.downloadToBuffer())).toEqual(DATA)
      expect(yield* send(() => blob.exists())).toBe(true)
    })
  )

  it.effect("serves x-ms-range reads (closed, open-ended, clamped) and 416 InvalidRange", () =>
    Effect.gen(function* () {
      const { container } = yield* clients
      const blob = container.getBlockBlobClient("obj.bin")
      const cases: Array<[number, number | undefined, number, number]> = [
        [0, 10, 0, 9],
        [990, undefined, 990, 999],
        [500, 4500, 500, 999]
      ]
      for (const [offset, count, start, end] of cases) {
        const out = yield* send(() => blob.download(offset, count))
        expect(out._response.status).toBe(206)
        expect(out.contentRange).toBe(`bytes ${start}-${end}/1000`)
        expect(yield* send(() => collect(out.readableStreamBody))).toEqual(DATA.subarray(start, end + 1))
      }
      const e = yield* failure(() => blob.download(1000, 10))
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
      const nm = yield* failure(() => blob.download(0, undefined, { conditions: { ifNoneMatch: props.etag! } }))
      expect(nm.statusCode).toBe(304)
      const ims = yield* failure(() => blob.download(0, undefined, { conditions: { ifModifiedSince: later } }))
      expect(ims.statusCode).toBe(304)
      const im = yield* failure(() => blob.download(0, undefined, { conditions: { ifMatch: '"stale"' } }))
      expect(im.statusCode).toBe(412)
      expect(im.code).toBe("ConditionNotMet")
      const headIm = yield* failure(() => blob.getProperties({ conditions: { ifMatch: '"stale"' } }))
      expect(headIm.statusCode).toBe(412)
      const ok = yield* send(() => blob.download(0, 4, { conditions: { ifMatch: props.etag! } }))
      expect(yield* send(() => collect(ok.readableStreamBody))).toEqual(DATA.subarray(0, 4))
    })
  )

  it.effect("lists flat with pagination and by hierarchy with BlobPrefix", () =>
    Effect.gen(function* () {
      const { container } = yield* clients
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

      const containers: string[] = []
      const { svc } = yield* clients
      yield* send(async () => {
        for await (const c of svc.listContainers()) containers.push(c.name)
      })
      expect(containers).toContain(CONTAINER)
    })
  )

  it.effect("deletes blobs, and reports BlobNotFound/ContainerNotFound", () =>
    Effect.gen(function* () {
      const { container, svc } = yield* clients
      const blob = container.getBlockBlobClient("doomed.txt")
      const up = yield* send(() => blob.upload("bye", 3))
      const wrong = yield* failure(() => blob.delete({ conditions: { ifMatch: '"stale"' } }))
      expect(wrong.statusCode).toBe(412)
      yield* send(() => blob.delete({ conditions: { ifMatch: up.etag! } }))
      expect(yield* send(() => blob.exists())).toBe(false)
      const again = yield* failure(() => blob.delete())
      expect(again.statusCode).toBe(404)
      expect(again.code).toBe("BlobNotFound")
      const dl = yield* failure(() => blob.download())
      expect(dl.code).toBe("BlobNotFound")
      const nc = yield* failure(() => svc.getContainerClient("no-such-container").getBlockBlobClient("x").download())
      expect(nc.code).toBe("ContainerNotFound")
    })
  )

  it.effect("changes the ETag on overwrite and honours upload conditions", () =>
    Effect.gen(function* () {
      const { container } = yield* clients
      const blob = container.getBlockBlobClient("overwrite.txt")
      const a = yield* send(() => blob.upload("one", 3))
      const b = yield* send(() => blob.upload("two", 3))
      expect(b.etag).not.toBe(a.etag)
      const ifNone = yield* failure(() => blob.upload("three", 5, { conditions: { ifNoneMatch: "*" } }))
      expect(ifNone.statusCode).toBe(412)
      expect((yield* send(() => blob.downloadToBuffer())).toString()).toBe("two")
    })
  )

  it.effect("commits staged blocks (uploadStream) and handles odd names", () =>
    Effect.gen(function* () {
      const { container } = yield* clients
      const big = sampleBytes(0, 700_000)
      const staged = container.getBlockBlobClient("staged/big.bin")
      yield* send(() => staged.uploadStream(Readable.from([big.subarray(0, 350_000), big.subarray(350_000)]), 256 * 1024, 2))
      expect(sameBytes(yield* send(() => staged.downloadToBuffer()), big)).toBe("equal")

      const names = ["odd/with space.txt", "odd/ünïcödé/日本語.bin", "odd/a+b=c&d.txt", "odd/100% sure.txt"]
      for (const n of names) yield* send(() => container.getBlockBlobClient(n).upload(`body of ${n}`, Buffer.byteLength(`body of ${n}`)))
      for (const n of names) {
        expect((yield* send(() => container.getBlockBlobClient(n).downloadToBuffer())).toString()).toBe(`body of ${n}`)
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
      const { container, s3 } = yield* clients
      const viaS3 = sampleBytes(5, 5000)
      const put = yield* send(() => s3.send(new PutObjectCommand({ Bucket: CONTAINER, Key: "x/from-s3.bin", Body: viaS3 })))
      const blob = container.getBlockBlobClient("x/from-s3.bin")
      const props = yield* send(() => blob.getProperties())
      expect(unquote(props.etag)).toBe(unquote(put.ETag))
      expect(yield* send(() => blob.downloadToBuffer())).toEqual(viaS3)
      const part = yield* send(() => blob.download(100, 50))
      expect(yield* send(() => collect(part.readableStreamBody))).toEqual(viaS3.subarray(100, 150))

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
})
