/**
 * User metadata round trips with the official SDKs, runnable against the origin stub or the
 * gateway (same `SdkTarget`): S3 PutObject, multipart, CopyObject with the COPY (default) and
 * REPLACE directives, the 2 KB MetadataTooLarge rule; Azure Put Blob, Put Block List, Set
 * Blob Metadata, Copy Blob; and an object written through one protocol read through the
 * other. Every HEAD and GET through the endpoint must carry exactly the pairs last written.
 */
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  type S3ServiceException,
  UploadPartCommand
} from "@aws-sdk/client-s3"
import { expect } from "@effect/vitest"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { failure, sameBytes, send } from "./checks.js"
import { blobServiceFor, s3ClientFor, SdkTarget } from "./sdkSuite.js"

type It = Parameters<typeof import("./sdkSuite.js").s3SdkSuite>[0]

export const META_BUCKET = "sdk-meta"

export const metadataSuite = (it: It) => {
  const clients = Effect.gen(function* () {
    const target = yield* SdkTarget
    const s3 = s3ClientFor(target.endpoint)
    // The gateway forwards CreateBucket too, but the stub alone is the reference for setup.
    yield* send(() => s3ClientFor(target.origin).send(new CreateBucketCommand({ Bucket: META_BUCKET })))
    /** HEAD and GET through the endpoint: both must carry the same metadata; returns it and the bytes. */
    const readBack = (Key: string) =>
      Effect.gen(function* () {
        const head = yield* send(() => s3.send(new HeadObjectCommand({ Bucket: META_BUCKET, Key })))
        const get = yield* send(() => s3.send(new GetObjectCommand({ Bucket: META_BUCKET, Key })))
        const bytes = Buffer.from(yield* send(() => get.Body!.transformToByteArray()))
        expect(get.Metadata, `${target.name}: GET and HEAD of ${Key} disagree`).toEqual(head.Metadata)
        return { metadata: head.Metadata ?? {}, bytes }
      })
    const container = blobServiceFor(target.endpoint).getContainerClient(META_BUCKET)
    return { s3, readBack, container, target }
  })

  it.effect("S3 PutObject: HEAD and GET return the x-amz-meta-* pairs (names lower-cased); an overwrite without any has none", () =>
    Effect.gen(function* () {
      const { s3, readBack } = yield* clients
      const body = randomBytes(70_000)
      yield* send(() => s3.send(new PutObjectCommand({ Bucket: META_BUCKET, Key: "put/a.bin", Body: body, Metadata: { Color: "blue", "run-id": "42" } })))
      const first = yield* readBack("put/a.bin")
      expect(first.metadata).toEqual({ color: "blue", "run-id": "42" })
      expect(sameBytes(first.bytes, body)).toBe("equal")
      // The same bytes again (same content ETag) without metadata: none is left.
      yield* send(() => s3.send(new PutObjectCommand({ Bucket: META_BUCKET, Key: "put/a.bin", Body: body })))
      expect((yield* readBack("put/a.bin")).metadata).toEqual({})
    })
  )

  it.effect("S3 multipart: CreateMultipartUpload's metadata is the completed object's", () =>
    Effect.gen(function* () {
      const { s3, readBack } = yield* clients
      const Key = "mp/meta.bin"
      const parts = [randomBytes(5 * 1024 * 1024), randomBytes(1000)]
      const { UploadId } = yield* send(() => s3.send(new CreateMultipartUploadCommand({ Bucket: META_BUCKET, Key, Metadata: { stage: "multipart" } })))
      const etags: Array<string> = []
      for (const [i, Body] of parts.entries()) {
        etags.push((yield* send(() => s3.send(new UploadPartCommand({ Bucket: META_BUCKET, Key, UploadId, PartNumber: i + 1, Body })))).ETag!)
      }
      yield* send(() =>
        s3.send(new CompleteMultipartUploadCommand({ Bucket: META_BUCKET, Key, UploadId, MultipartUpload: { Parts: etags.map((ETag, i) => ({ ETag, PartNumber: i + 1 })) } }))
      )
      const back = yield* readBack(Key)
      expect(back.metadata).toEqual({ stage: "multipart" })
      expect(sameBytes(back.bytes, Buffer.concat(parts))).toBe("equal")
    })
  )

  it.effect("S3 CopyObject: COPY (the default) keeps the source's metadata, REPLACE takes the request's, also onto itself", () =>
    Effect.gen(function* () {
      const { s3, readBack } = yield* clients
      const body = randomBytes(10_000)
      yield* send(() => s3.send(new PutObjectCommand({ Bucket: META_BUCKET, Key: "copy/src", Body: body, Metadata: { origin: "source" } })))
      const CopySource = `${META_BUCKET}/copy/src`
      // Metadata given with COPY is ignored, as S3 does.
      yield* send(() => s3.send(new CopyObjectCommand({ Bucket: META_BUCKET, Key: "copy/kept", CopySource, Metadata: { ignored: "yes" } })))
      expect((yield* readBack("copy/kept")).metadata).toEqual({ origin: "source" })
      yield* send(() =>
        s3.send(new CopyObjectCommand({ Bucket: META_BUCKET, Key: "copy/replaced", CopySource, MetadataDirective: "REPLACE", Metadata: { origin: "replaced", extra: "1" } }))
      )
      const replaced = yield* readBack("copy/replaced")
      expect(replaced.metadata).toEqual({ origin: "replaced", extra: "1" })
      expect(sameBytes(replaced.bytes, body)).toBe("equal")
      yield* send(() => s3.send(new CopyObjectCommand({ Bucket: META_BUCKET, Key: "copy/src", CopySource, MetadataDirective: "REPLACE", Metadata: { origin: "self" } })))
      expect((yield* readBack("copy/src")).metadata).toEqual({ origin: "self" })
    })
  )

  it.effect("S3: more than 2 KB of metadata is 400 MetadataTooLarge, and nothing is written", () =>
    Effect.gen(function* () {
      const { s3 } = yield* clients
      const Metadata = { big: "x".repeat(2046) } // 3 + 2046 bytes: one over
      const put = yield* failure<S3ServiceException>(() => s3.send(new PutObjectCommand({ Bucket: META_BUCKET, Key: "big/meta", Body: "abc", Metadata })))
      expect([put.$metadata.httpStatusCode, put.name]).toEqual([400, "MetadataTooLarge"])
      const mp = yield* failure<S3ServiceException>(() => s3.send(new CreateMultipartUploadCommand({ Bucket: META_BUCKET, Key: "big/meta", Metadata })))
      expect([mp.$metadata.httpStatusCode, mp.name]).toEqual([400, "MetadataTooLarge"])
      const head = yield* failure<S3ServiceException>(() => s3.send(new HeadObjectCommand({ Bucket: META_BUCKET, Key: "big/meta" })))
      expect(head.$metadata.httpStatusCode).toBe(404)
      // Exactly 2 KB is allowed.
      yield* send(() => s3.send(new PutObjectCommand({ Bucket: META_BUCKET, Key: "big/ok", Body: "abc", Metadata: { big: "x".repeat(2045) } })))
    })
  )

  it.effect("Azure: Put Blob, Put Block List, Set Blob Metadata and Copy Blob carry x-ms-meta-* to Get Blob Properties and Get Blob", () =>
    Effect.gen(function* () {
      const { container } = yield* clients
      const props = (name: string) =>
        Effect.gen(function* () {
          const blob = container.getBlockBlobClient(name)
          const p = yield* send(() => blob.getProperties())
          const d = yield* send(() => blob.download())
          d.readableStreamBody?.resume()
          expect(d.metadata, `Get Blob and Get Blob Properties of ${name} disagree`).toEqual(p.metadata)
          return p.metadata
        })
      const a = container.getBlockBlobClient("az/put.bin")
      yield* send(() => a.upload(randomBytes(5000), 5000, { metadata: { team: "ml", tier: "hot" } }))
      expect(yield* props("az/put.bin")).toEqual({ team: "ml", tier: "hot" })

      const b = container.getBlockBlobClient("az/blocks.bin")
      const id = Buffer.from("block-0").toString("base64")
      yield* send(() => b.stageBlock(id, randomBytes(3000), 3000))
      yield* send(() => b.commitBlockList([id], { metadata: { via: "blocklist" } }))
      expect(yield* props("az/blocks.bin")).toEqual({ via: "blocklist" })

      yield* send(() => a.setMetadata({ team: "infra" }))
      expect(yield* props("az/put.bin")).toEqual({ team: "infra" })

      const kept = container.getBlockBlobClient("az/copy-kept.bin")
      yield* send(() => kept.beginCopyFromURL(a.url).then((p) => p.pollUntilDone()))
      expect(yield* props("az/copy-kept.bin")).toEqual({ team: "infra" })
      const given = container.getBlockBlobClient("az/copy-given.bin")
      yield* send(() => given.beginCopyFromURL(a.url, { metadata: { copied: "with-new" } }).then((p) => p.pollUntilDone()))
      expect(yield* props("az/copy-given.bin")).toEqual({ copied: "with-new" })
    })
  )

  it.effect("one namespace: metadata written through S3 reads back through Azure, and the other way", () =>
    Effect.gen(function* () {
      const { s3, readBack, container } = yield* clients
      yield* send(() => s3.send(new PutObjectCommand({ Bucket: META_BUCKET, Key: "cross/s3", Body: "from s3", Metadata: { writer: "s3" } })))
      expect((yield* send(() => container.getBlockBlobClient("cross/s3").getProperties())).metadata).toEqual({ writer: "s3" })
      yield* send(() => container.getBlockBlobClient("cross/azure").upload("from azure", 10, { metadata: { writer: "azure" } }))
      expect((yield* readBack("cross/azure")).metadata).toEqual({ writer: "azure" })
    })
  )
}
