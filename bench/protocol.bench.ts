import { Backend } from "../src/core/ids.js"
import * as decoder from "../src/protocol/decoder.js"
import * as range from "../src/protocol/range.js"
import { benchBatched } from "./batch.js"

// Local bindings: see bench/batch.ts on vitest's import getters.
const { FrameDecoder } = decoder
const { encodeGetRangeFrame, encodeRangeRequest } = range

const MiB = 1024 * 1024
const request: range.RangeRequest = {
  object: { backend: Backend.S3, bucket: "my-bucket", objectPath: "data/checkpoint-000042.bin" },
  offset: 7 * 256 * MiB + 12345,
  len: 4 * MiB
}

// One GetRange body: bincode RangeRequest{object, offset, len} (71 bytes) into a fresh buffer.
benchBatched("encode_range_request", 256, () => encodeRangeRequest(request).length)

/*
 * Many frames in one buffer, as a pipelining client's socket chunk arrives: 64 GetRange
 * frames (16-byte header + 71-byte body, 5568 bytes) pushed into a fresh FrameDecoder and
 * drained with next(). The median is per buffer of 64 frames, not per frame.
 */
const FRAMES = 64
const chunk = Buffer.concat(Array.from({ length: FRAMES }, (_, i) => encodeGetRangeFrame(i + 1, { ...request, offset: i * MiB })))
benchBatched("decode_frames", 32, () => {
  const d = new FrameDecoder()
  d.push(chunk)
  let frames = 0
  for (let f = d.next(); f !== undefined; f = d.next()) if ("payload" in f) frames++
  if (frames !== FRAMES) throw new Error(`decoded ${frames} of ${FRAMES} frames`)
  return frames
})
