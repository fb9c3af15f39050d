/** Checks shared by the versioned-read tests (types 6, 9, 10, 11): their replies are GetRange frames, typed errors included. */
import { createHash } from "node:crypto"
import { expect } from "vitest"
import { Backend, type ObjectId } from "../../../src/core/ids.js"
import { decodeErrorPayload, Flags, MsgType, type Frame } from "../../../src/protocol/index.js"
import { Sendfile } from "../../../src/worker/plane/Sendfile.js"
import { ServeMode } from "../../../src/worker/server/ServeMode.js"

export const KiB = 1024
export const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: "bkt", objectPath: key })
export const md5 = (b: Uint8Array) => createHash("md5").update(b).digest("hex")

/** The typed error a GetRange-framed reply carries. */
export const typed = (f: Frame) => {
  expect(f.header.type).toBe(MsgType.GetRange)
  expect(f.header.flags & Flags.Error).toBe(Flags.Error)
  return decodeErrorPayload(f.payload)
}

/** A successful GetRange-framed reply of exactly `want`. */
export const bytesOf = (f: Frame, want: Uint8Array) => {
  expect(f.header.type).toBe(MsgType.GetRange)
  expect(f.header.flags & Flags.Error, f.payload.toString()).toBe(0)
  expect(f.payload.length).toBe(want.length)
  expect(Buffer.compare(f.payload, Buffer.from(want))).toBe(0)
}

/** The planes and serve modes every versioned read runs on: portable, and the default (native where it builds) both ways. */
export const PLANES = [
  ["portable", "pipelined", Sendfile.Portable, ServeMode.Pipelined],
  ["auto", "pipelined", Sendfile.Auto, ServeMode.Pipelined],
  ["auto", "multiplexed", Sendfile.Auto, ServeMode.Multiplexed]
] as const
