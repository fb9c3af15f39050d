/**
 * Shared upload plumbing: optional aws-chunked decoding, digests computed while the
 * body streams to disk, and verification of whatever checksums the client declared
 * (Content-MD5, `x-amz-checksum-*` headers or trailers). Mismatch aborts the write.
 */
import { createHash, type Hash } from "node:crypto"
import * as fs from "node:fs/promises"
import { Readable, Transform, type TransformCallback } from "node:stream"
import * as zlib from "node:zlib"

type Algorithm = "md5" | "crc32" | "sha1" | "sha256"

export class DigestMismatch extends Error {
  constructor(
    readonly algorithm: string,
    message: string
  ) {
    super(message)
  }
}

/** Passes bytes through while hashing them with every requested algorithm. */
export class Digester extends Transform {
  private readonly hashes = new Map<Exclude<Algorithm, "crc32">, Hash>()
  private crc: number | undefined
  length = 0

  constructor(algorithms: ReadonlySet<Algorithm>) {
    super()
    for (const a of algorithms) {
      if (a === "crc32") this.crc = 0
      else this.hashes.set(a, createHash(a))
    }
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.length += chunk.length
    for (const h of this.hashes.values()) h.update(chunk)
    if (this.crc !== undefined) this.crc = zlib.crc32(chunk, this.crc)
    done(null, chunk)
  }

  /** Base64 digest as S3/Azure headers carry it. */
  digest(a: Algorithm): string | undefined {
    if (a === "crc32") {
      if (this.crc === undefined) return undefined
      const b = Buffer.alloc(4)
      b.writeUInt32BE(this.crc >>> 0)
      return b.toString("base64")
    }
    return this.hashes.get(a)?.copy().digest("base64")
  }
}

const CHECKSUM_HEADERS: Record<string, Algorithm> = {
  "x-amz-checksum-crc32": "crc32",
  "x-amz-checksum-sha1": "sha1",
  "x-amz-checksum-sha256": "sha256"
}

/** Which digests to compute, given the request's headers (including declared trailer names). */
export const algorithmsFor = (headers: Record<string, string | string[] | undefined>): Set<Algorithm> => {
  const out = new Set<Algorithm>(["md5"])
  const trailer = String(headers["x-amz-trailer"] ?? "").toLowerCase()
  for (const [name, algorithm] of Object.entries(CHECKSUM_HEADERS)) {
    if (headers[name] !== undefined || trailer.includes(name)) out.add(algorithm)
  }
  return out
}

/** Throws `DigestMismatch` when a declared checksum disagrees with the received bytes. */
export const verifyDigests = (
  digester: Digester,
  headers: Record<string, string | string[] | undefined>,
  trailers: ReadonlyMap<string, string>
): void => {
  const contentMd5 = headers["content-md5"]
  if (typeof contentMd5 === "string" && contentMd5 !== digester.digest("md5")) {
    throw new DigestMismatch("md5", "The Content-MD5 you specified did not match what we received.")
  }
  for (const [name, algorithm] of Object.entries(CHECKSUM_HEADERS)) {
    const declared = trailers.get(name) ?? headers[name]
    if (typeof declared === "string" && declared !== digester.digest(algorithm)) {
      throw new DigestMismatch(algorithm, `The ${algorithm.toUpperCase()} you specified did not match the calculated checksum.`)
    }
  }
}

/**
 * A small request body (a block list, a Complete document, an admin patch) read whole; undefined
 * as soon as it passes `limit` bytes, leaving the rest unread.
 */
export const readBounded = async (body: AsyncIterable<unknown>, limit: number): Promise<Buffer | undefined> => {
  const chunks: Array<Buffer> = []
  let size = 0
  for await (const c of body) {
    size += (c as Buffer).length
    if (size > limit) return undefined
    chunks.push(c as Buffer)
  }
  return Buffer.concat(chunks)
}

/** Staged parts or blocks, in order, as one stream (each file opened only when its turn comes). */
export const concatFiles = (files: ReadonlyArray<string>): Readable =>
  Readable.from(
    (async function* () {
      for (const file of files) {
        const h = await fs.open(file, "r")
        try {
          for await (const c of h.createReadStream({ autoClose: false })) yield c as Buffer
        } finally {
          await h.close()
        }
      }
    })()
  )
