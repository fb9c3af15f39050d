import { Backend, NodeRole } from "../src/core/ids.js"
import * as control from "../src/protocol/control.js"
import * as decoder from "../src/protocol/decoder.js"
import * as range from "../src/protocol/range.js"
import { talonSampleStatus } from "./kit/nodeStatus.js"
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

/*
 * Control messages (not on the hit path): a worker's NodeStatusHeartbeat (293-byte envelope, the
 * largest message a node sends every few seconds) and a five-node MembershipList, each encoded
 * into a fresh buffer and decoded back.
 */
const { encodeControl, decodeControl } = control
const heartbeat: control.ControlMessage = {
  _tag: "NodeStatusHeartbeat",
  status: talonSampleStatus
}
const membership: control.ControlMessage = {
  _tag: "MembershipList",
  nodes: Array.from({ length: 5 }, (_, i) => ({ id: `worker-${i}`, address: `10.0.0.${i}:7001`, role: NodeRole.Worker }))
}
const heartbeatBytes = encodeControl(heartbeat)
const membershipBytes = encodeControl(membership)
benchBatched("encode_control_heartbeat", 128, () => encodeControl(heartbeat).length)
benchBatched("decode_control_heartbeat", 128, () => (decodeControl(heartbeatBytes)._tag === "Right" ? 1 : 0))
benchBatched("encode_control_membership", 128, () => encodeControl(membership).length)
benchBatched("decode_control_membership", 128, () => (decodeControl(membershipBytes)._tag === "Right" ? 1 : 0))
