/**
 * Decoder for the `aws-chunked` content encoding the AWS SDKs use for streaming
 * uploads (`x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER`, the v3 SDK's
 * default for PutObject, and the signed `STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]`
 * variants): `hex-size[;chunk-signature=…]\r\n bytes \r\n … 0\r\n trailers \r\n`.
 * Chunk signatures are parsed and ignored (the stub does not verify signatures).
 * Trailers (e.g. `x-amz-checksum-crc32`) are collected for the caller to verify.
 */
import { Transform, type TransformCallback } from "node:stream"

export class AwsChunkedError extends Error {}

const MAX_LINE = 8192

const enum State {
  Size,
  Data,
  DataEnd,
  Trailer,
  Done
}

export class AwsChunkedDecoder extends Transform {
  readonly trailers = new Map<string, string>()
  decodedLength = 0
  private state = State.Size
  private line = ""
  private remaining = 0

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      this.consume(chunk)
      done()
    } catch (e) {
      done(e as Error)
    }
  }

  override _flush(done: TransformCallback): void {
    // Some clients end the body right after the zero chunk's trailers without the final CRLF.
    if (this.state === State.Done || (this.state === State.Trailer && this.line === "")) done()
    else done(new AwsChunkedError("aws-chunked body ended before its final zero-length chunk"))
  }

  private consume(buf: Buffer): void {
    let i = 0
    while (i < buf.length) {
      switch (this.state) {
        case State.Data: {
          const n = Math.min(this.remaining, buf.length - i)
          this.push(buf.subarray(i, i + n))
          this.decodedLength += n
          this.remaining -= n
          i += n
          if (this.remaining === 0) this.state = State.DataEnd
          break
        }
        case State.Done:
          // Tolerate trailing line breaks after the terminating empty line.
          if (buf[i] !== 0x0d && buf[i] !== 0x0a) throw new AwsChunkedError("unexpected bytes after the final aws-chunked chunk")
          i++
          break
        default: {
          const nl = buf.indexOf(0x0a, i)
          const end = nl === -1 ? buf.length : nl
          this.line += buf.toString("latin1", i, end)
          if (this.line.length > MAX_LINE) throw new AwsChunkedError("aws-chunked framing line too long")
          i = end
          if (nl === -1) break
          i++ // past \n
          const line = this.line.endsWith("\r") ? this.line.slice(0, -1) : this.line
          this.line = ""
          this.onLine(line)
        }
      }
    }
  }

  private onLine(line: string): void {
    if (this.state === State.DataEnd) {
      if (line !== "") throw new AwsChunkedError("aws-chunked chunk data is longer than its declared size")
      this.state = State.Size
      return
    }
    if (this.state === State.Size) {
      const hex = line.split(";", 1)[0]!.trim()
      if (!/^[0-9a-fA-F]{1,16}$/.test(hex)) throw new AwsChunkedError(`bad aws-chunked chunk size line ${JSON.stringify(line.slice(0, 64))}`)
      const size = parseInt(hex, 16)
      if (!Number.isSafeInteger(size)) throw new AwsChunkedError("aws-chunked chunk size too large")
      if (size === 0) this.state = State.Trailer
      else {
        this.remaining = size
        this.state = State.Data
      }
      return
    }
    // Trailer section: header lines until an empty line.
    if (line === "") {
      this.state = State.Done
      return
    }
    const colon = line.indexOf(":")
    if (colon <= 0) throw new AwsChunkedError(`bad aws-chunked trailer line ${JSON.stringify(line.slice(0, 64))}`)
    this.trailers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim())
  }
}
