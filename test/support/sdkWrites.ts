/**
 * The write half of the official-SDK suite, runnable against the origin stub or the
 * gateway (same `SdkTarget`): S3 multipart (parts, UploadPartCopy, ListParts,
 * ListMultipartUploads, Complete, Abort and its refusals), CopyObject; Azure Put Block /
 * Put Block List / Get Block List, uploadData in blocks, Copy Blob, Set Blob Metadata and
 * HTTP headers. Every read back is compared byte for byte with what was written and
 * hashed against the same read at the origin.
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  ListMultipartUploadsCommand,
  ListPartsCommand,
  PutObjectCommand,
  type S3ServiceException,
  UploadPartCommand,
  UploadPartCopyCommand
} from "@aws-sdk/client-s3"
import type { RestError } from "@azure/storage-blob"
import { expect } from "@effect/vitest"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { failure, sameBytes, send } from "./checks.js"
import { blobServiceFor, s3ClientFor, sha256, SdkTarget } from "./sdkSuite.js"

type It = Parameters<typeof import("./sdkSuite.js").s3SdkSuite>[0]

const MiB = 1024 * 1024
const BUCKET = "sdk-writes"

export const s3WriteSuite = (it: It) => {
  const clients = Effect.map(SdkTarget, (target) => {
    const s3 = s3ClientFor(target.endpoint)
    const origin = s3ClientFor(target.origin)
    const read = (Key: string, Range?: string) =>
      Effect.gen(function* () {
        const get = (c: typeof s3) =>
          send(() => c.send(new GetObjectCommand({ Bucket: BUCKET, Key, Range })).then(async (o) => Buffer.from(await o.Body!.transformToByteArray())))
        const bytes = yield* get(s3)
        expect(sha256(bytes), `${target.name} ${Key} vs origin`).toBe(sha256(yield* get(origin)))
        return bytes
      })
    return { s3, read }
  })

  it.effect("multipart: parts, ListParts, ListMultipartUploads, Complete; every byte read back", () =>
    Effect.gen(function* () {
      const { s3, read } = yield* clients
      yield* send(() => s3.send(new CreateBucketCommand({ Bucket: BUCKET })))
      const parts = [randomBytes(5 * MiB), randomBytes(5 * MiB), randomBytes(MiB + 17)]
      const whole = Buffer.concat(parts)
      const { UploadId } = yield* send(() => s3.send(new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: "mp/big.bin" })))
      expect(UploadId).toBeTruthy()
      const etags: Array<string> = []
      for (const [i, Body] of parts.entries()) {
        const up = yield* send(() => s3.send(new UploadPartCommand({ Bucket: BUCKET, Key: "mp/big.bin", UploadId, PartNumber: i + 1, Body })))
        etags.push(up.ETag!)
      }
      const listed = yield* send(() => s3.send(new ListPartsCommand({ Bucket: BUCKET, Key: "mp/big.bin", UploadId })))
      expect(listed.Parts?.map((p) => [p.PartNumber, p.Size, p.ETag])).toEqual(parts.map((p, i) => [i + 1, p.length, etags[i]]))
      const uploads = yield* send(() => s3.send(new ListMultipartUploadsCommand({ Bucket: BUCKET })))
      expect(uploads.Uploads?.map((u) => [u.Key, u.UploadId])).toContainEqual(["mp/big.bin", UploadId])
      const done = yield* send(() =>
        s3.send(
          new CompleteMultipartUploadCommand({
            Bucket: BUCKET,
            Key: "mp/big.bin",
            UploadId,
            MultipartUpload: { Parts: etags.map((ETag, i) => ({ ETag, PartNumber: i + 1 })) }
          })
        )
      )
      expect(done.ETag).toMatch(/^"[0-9a-f-]+"$/)
      expect(sameBytes(yield* read("mp/big.bin"), whole)).toBe("equal")
      // A range across the first part boundary.
      expect(sameBytes(yield* read("mp/big.bin", `bytes=${5 * MiB - 100}-${5 * MiB + 99}`), whole.subarray(5 * MiB - 100, 5 * MiB + 100))).toBe("equal")
      const gone = yield* failure<S3ServiceException>(() => s3.send(new ListPartsCommand({ Bucket: BUCKET, Key: "mp/big.bin", UploadId })))
      expect(gone.$metadata.httpStatusCode).toBe(404)
      expect(gone.name).toBe("NoSuchUpload")
    })
  )

  it.effect("multipart refusals keep their 4xx: small part, wrong ETag, wrong order, aborted upload", () =>
    Effect.gen(function* () {
      const { s3 } = yield* clients
      const { UploadId } = yield* send(() => s3.send(new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: "mp/refused.bin" })))
      const a = yield* send(() => s3.send(new UploadPartCommand({ Bucket: BUCKET, Key: "mp/refused.bin", UploadId, PartNumber: 1, Body: randomBytes(1000) })))
      const b = yield* send(() => s3.send(new UploadPartCommand({ Bucket: BUCKET, Key: "mp/refused.bin", UploadId, PartNumber: 2, Body: randomBytes(1000) })))
      const complete = (Parts: Array<{ ETag: string; PartNumber: number }>) =>
        failure<S3ServiceException>(() =>
          s3.send(new CompleteMultipartUploadCommand({ Bucket: BUCKET, Key: "mp/refused.bin", UploadId, MultipartUpload: { Parts } }))
        )
      const small = yield* complete([{ ETag: a.ETag!, PartNumber: 1 }, { ETag: b.ETag!, PartNumber: 2 }])
      expect([small.$metadata.httpStatusCode, small.name]).toEqual([400, "EntityTooSmall"])
      const wrong = yield* complete([{ ETag: '"00000000000000000000000000000000"', PartNumber: 1 }])
      expect([wrong.$metadata.httpStatusCode, wrong.name]).toEqual([400, "InvalidPart"])
      const order = yield* complete([{ ETag: b.ETag!, PartNumber: 2 }, { ETag: a.ETag!, PartNumber: 1 }])
      expect([order.$metadata.httpStatusCode, order.name]).toEqual([400, "InvalidPartOrder"])
      yield* send(() => s3.send(new AbortMultipartUploadCommand({ Bucket: BUCKET, Key: "mp/refused.bin", UploadId })))
      const aborted = yield* failure<S3ServiceException>(() =>
        s3.send(new UploadPartCommand({ Bucket: BUCKET, Key: "mp/refused.bin", UploadId, PartNumber: 3, Body: "x" }))
      )
      expect([aborted.$metadata.httpStatusCode, aborted.name]).toEqual([404, "NoSuchUpload"])
      const missing = yield* failure<S3ServiceException>(() => s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: "mp/refused.bin" })))
      expect(missing.name).toBe("NoSuchKey")
    })
  )

  it.effect("UploadPartCopy and CopyObject copy exact bytes; a copy onto itself needs REPLACE; a re-copy is read fresh", () =>
    Effect.gen(function* () {
      const { s3, read } = yield* clients
      const source = randomBytes(6 * MiB + 5)
      yield* send(() => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: "copy/src.bin", Body: source })))
      const { UploadId } = yield* send(() => s3.send(new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: "copy/assembled.bin" })))
      const p1 = yield* send(() =>
        s3.send(new UploadPartCopyCommand({ Bucket: BUCKET, Key: "copy/assembled.bin", UploadId, PartNumber: 1, CopySource: `${BUCKET}/copy/src.bin`, CopySourceRange: `bytes=0-${5 * MiB - 1}` }))
      )
      const tail = randomBytes(1234)
      const p2 = yield* send(() => s3.send(new UploadPartCommand({ Bucket: BUCKET, Key: "copy/assembled.bin", UploadId, PartNumber: 2, Body: tail })))
      yield* send(() =>
        s3.send(
          new CompleteMultipartUploadCommand({
            Bucket: BUCKET,
            Key: "copy/assembled.bin",
            UploadId,
            MultipartUpload: { Parts: [{ ETag: p1.CopyPartResult!.ETag!, PartNumber: 1 }, { ETag: p2.ETag!, PartNumber: 2 }] }
          })
        )
      )
      expect(sameBytes(yield* read("copy/assembled.bin"), Buffer.concat([source.subarray(0, 5 * MiB), tail]))).toBe("equal")

      const copied = yield* send(() => s3.send(new CopyObjectCommand({ Bucket: BUCKET, Key: "copy/dst key+ü.bin", CopySource: `${BUCKET}/${encodeURIComponent("copy/src.bin")}` })))
      expect(copied.CopyObjectResult?.ETag).toMatch(/^"[0-9a-f]+"$/)
      expect(sameBytes(yield* read("copy/dst key+ü.bin"), source)).toBe("equal")
      const self = yield* failure<S3ServiceException>(() => s3.send(new CopyObjectCommand({ Bucket: BUCKET, Key: "copy/src.bin", CopySource: `${BUCKET}/copy/src.bin` })))
      expect([self.$metadata.httpStatusCode, self.name]).toEqual([400, "InvalidRequest"])
      const nope = yield* failure<S3ServiceException>(() => s3.send(new CopyObjectCommand({ Bucket: BUCKET, Key: "copy/x.bin", CopySource: `${BUCKET}/copy/none.bin` })))
      expect([nope.$metadata.httpStatusCode, nope.name]).toEqual([404, "NoSuchKey"])
      // The destination is read, then replaced by another copy: the next read is the new bytes.
      const next = randomBytes(4096)
      yield* send(() => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: "copy/src.bin", Body: next })))
      yield* send(() => s3.send(new CopyObjectCommand({ Bucket: BUCKET, Key: "copy/dst key+ü.bin", CopySource: `${BUCKET}/copy/src.bin` })))
      expect(sameBytes(yield* read("copy/dst key+ü.bin"), next)).toBe("equal")
    })
  )

  it.effect("an origin 4xx keeps its status and code: a key that collides with a prefix is 409, not 503", () =>
    Effect.gen(function* () {
      const { s3 } = yield* clients
      yield* send(() => s3.send(new CreateBucketCommand({ Bucket: BUCKET })))
      yield* send(() => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: "clash/inner", Body: "x" })))
      const clash = yield* failure<S3ServiceException>(() => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: "clash", Body: "y" })))
      expect(clash.$metadata.httpStatusCode).toBe(409)
      expect(clash.name).toBe("KeyConflict")
    })
  )
}

const CONTAINER = "sdk-writes"

export const azureWriteSuite = (it: It) => {
  const clients = Effect.map(SdkTarget, (target) => {
    const container = blobServiceFor(target.endpoint).getContainerClient(CONTAINER)
    const origin = blobServiceFor(target.origin).getContainerClient(CONTAINER)
    const read = (name: string) =>
      Effect.gen(function* () {
        const bytes = yield* send(() => container.getBlockBlobClient(name).downloadToBuffer())
        expect(sha256(bytes), `${target.name} ${name} vs origin`).toBe(sha256(yield* send(() => origin.getBlockBlobClient(name).downloadToBuffer())))
        return bytes
      })
    return { container, read, originOf: (name: string) => origin.getBlockBlobClient(name) }
  })

  it.effect("Put Block, Get Block List, Put Block List; an unknown block is InvalidBlockList", () =>
    Effect.gen(function* () {
      const { container, read } = yield* clients
      yield* send(() => container.createIfNotExists())
      const blob = container.getBlockBlobClient("blocks/a.bin")
      const blocks = [randomBytes(300_000), randomBytes(5), randomBytes(200_001)]
      const ids = blocks.map((_, i) => Buffer.from(`block-${String(i).padStart(4, "0")}`).toString("base64"))
      for (const [i, b] of blocks.entries()) yield* send(() => blob.stageBlock(ids[i]!, b, b.length))
      const staged = yield* send(() => blob.getBlockList("uncommitted"))
      expect(staged.uncommittedBlocks?.map((b) => [b.name, b.size]).sort()).toEqual(ids.map((id, i) => [id, blocks[i]!.length]).sort())
      const bad = yield* failure<RestError>(() => blob.commitBlockList([ids[0]!, Buffer.from("never-staged").toString("base64")]))
      expect([bad.statusCode, bad.code]).toEqual([400, "InvalidBlockList"])
      // Listed order, not staging order.
      yield* send(() => blob.commitBlockList([ids[2]!, ids[0]!, ids[1]!]))
      expect(sameBytes(yield* read("blocks/a.bin"), Buffer.concat([blocks[2]!, blocks[0]!, blocks[1]!]))).toBe("equal")
      const committed = yield* send(() => blob.getBlockList("committed"))
      expect(committed.committedBlocks?.map((b) => b.name)).toEqual([ids[2], ids[0], ids[1]])
    })
  )

  it.effect("uploadData in blocks, Copy Blob (beginCopyFromURL), Set Blob Metadata and HTTP headers", () =>
    Effect.gen(function* () {
      const { container, read, originOf } = yield* clients
      yield* send(() => container.createIfNotExists())
      const data = randomBytes(1_500_000)
      const blob = container.getBlockBlobClient("blocks/uploaded.bin")
      yield* send(() => blob.uploadData(data, { maxSingleShotSize: 256 * 1024, blockSize: 256 * 1024, concurrency: 3 }))
      expect(sameBytes(yield* read("blocks/uploaded.bin"), data)).toBe("equal")

      const copy = container.getBlockBlobClient("blocks/copy of uploaded.bin")
      const poller = yield* send(() => copy.beginCopyFromURL(blob.url))
      const result = yield* send(() => poller.pollUntilDone())
      expect(result.copyStatus).toBe("success")
      expect(sameBytes(yield* read("blocks/copy of uploaded.bin"), data)).toBe("equal")

      // HTTP headers are stored by the origin (the gateway's reads carry the cached version, size and
      // user metadata, not Content-Type and the like), so they are read back there; the new ETag shows
      // through both. User metadata through the gateway: test/support/sdkMetadata.ts.
      const atOrigin = originOf(copy.name)
      const before = yield* send(() => copy.getProperties())
      const set = yield* send(() => copy.setMetadata({ owner: "talon", purpose: "test" }))
      expect(set.etag).not.toBe(before.etag)
      expect((yield* send(() => copy.getProperties())).etag).toBe(set.etag)
      const withMeta = yield* send(() => atOrigin.getProperties())
      expect(withMeta.metadata).toEqual({ owner: "talon", purpose: "test" })
      expect(withMeta.etag).toBe(set.etag)
      const headers = yield* send(() => copy.setHTTPHeaders({ blobContentType: "text/x-talon", blobCacheControl: "no-cache" }))
      expect((yield* send(() => copy.getProperties())).etag).toBe(headers.etag)
      const withHeaders = yield* send(() => atOrigin.getProperties())
      expect(withHeaders.contentType).toBe("text/x-talon")
      expect(withHeaders.cacheControl).toBe("no-cache")
      expect(withHeaders.metadata).toEqual({ owner: "talon", purpose: "test" })
      // Properties do not touch the bytes.
      expect(sameBytes(yield* read("blocks/copy of uploaded.bin"), data)).toBe("equal")
    })
  )
}
