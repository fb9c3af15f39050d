/**
 * How the S3 front end receives a request body (PutObject, UploadPart): aws-chunked
 * decoding when the client streams that way, digests computed on the fly, and after the
 * last byte the checks a real S3 makes — declared decoded length, Content-MD5,
 * `x-amz-checksum-*` (header or trailer), and a hex `x-amz-content-sha256`.
 */
import { AwsChunkedDecoder, AwsChunkedError } from "../http/awsChunked.js"
import { header } from "../http/context.js"
import type { Ctx } from "./context.js"
import { algorithmsFor, Digester, DigestMismatch, verifyDigests } from "./upload.js"

export class PayloadHashMismatch extends Error {}

export interface S3Body {
  readonly transforms: ReadonlyArray<NodeJS.ReadWriteStream>
  readonly digester: Digester
  /** Throws `AwsChunkedError`, `DigestMismatch` or `PayloadHashMismatch`. */
  readonly verify: () => void
  /** Checksums to echo in the response, as S3 does. */
  readonly echo: () => Record<string, string>
}

const HEX_SHA256 = /^[0-9a-f]{64}$/

export const s3Body = (ctx: Ctx): S3Body => {
  const headers = ctx.req.headers
  const sha = header(ctx, "x-amz-content-sha256") ?? ""
  const chunked = sha.startsWith("STREAMING-") || (header(ctx, "content-encoding") ?? "").includes("aws-chunked")
  const decoder = chunked ? new AwsChunkedDecoder() : undefined
  const algorithms = algorithmsFor(headers)
  const signedPayload = HEX_SHA256.test(sha)
  if (signedPayload) algorithms.add("sha256")
  const digester = new Digester(algorithms)
  const declared = header(ctx, "x-amz-decoded-content-length")
  return {
    transforms: decoder ? [decoder, digester] : [digester],
    digester,
    verify: () => {
      if (declared !== undefined && Number(declared) !== digester.length) {
        throw new AwsChunkedError(`decoded ${digester.length} bytes, x-amz-decoded-content-length says ${declared}`)
      }
      verifyDigests(digester, headers, decoder?.trailers ?? new Map())
      if (signedPayload && Buffer.from(sha, "hex").toString("base64") !== digester.digest("sha256")) {
        throw new PayloadHashMismatch("The provided 'x-amz-content-sha256' header does not match what was computed.")
      }
    },
    echo: () => {
      const out: Record<string, string> = {}
      for (const name of ["x-amz-checksum-crc32", "x-amz-checksum-sha1", "x-amz-checksum-sha256"]) {
        const v = decoder?.trailers.get(name) ?? header(ctx, name)
        if (v !== undefined) out[name] = v
      }
      return out
    }
  }
}

/** The S3 error for a body that failed `verify`, or undefined for any other error. */
export const bodyError = (e: unknown): { readonly status: number; readonly code: string; readonly message: string } | undefined => {
  if (e instanceof AwsChunkedError) return { status: 400, code: "IncompleteBody", message: e.message }
  if (e instanceof DigestMismatch) return { status: 400, code: "BadDigest", message: e.message }
  if (e instanceof PayloadHashMismatch) return { status: 400, code: "XAmzContentSHA256Mismatch", message: e.message }
  return undefined
}

/** The body's MD5 in hex (S3's ETag of a single-part upload). */
export const md5Hex = (d: Digester): string | undefined => {
  const b64 = d.digest("md5")
  return b64 === undefined ? undefined : Buffer.from(b64, "base64").toString("hex")
}
