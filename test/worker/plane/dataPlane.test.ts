import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { DataPlaneShape } from "../../../src/worker/plane/DataPlane.js"
import { makeNativePlane, nativeCounters, setSendBuffer } from "../../../src/worker/plane/Native.js"
import { makePortablePlane } from "../../../src/worker/plane/Portable.js"
import { ConnectionWriteError } from "../../../src/worker/plane/WriteError.js"
import {
  expectedBytes,
  type Fixture,
  fileResponse,
  firstMismatch,
  frameResponse,
  makeFixture,
  readAll,
  type Response,
  send,
  serve
} from "./harness.js"

const MiB = 1024 * 1024
let fx: Fixture

beforeAll(() => {
  // A block-sized file, a page-sized one with an odd tail, and a tiny one.
  fx = makeFixture([3 * MiB + 17, 700 * 1024 + 13, 5])
})
afterAll(() => fx.close())

const planes: ReadonlyArray<[string, () => DataPlaneShape]> = [
  ["native", () => makeNativePlane()],
  ["portable", () => makePortablePlane()]
]

/** A mixed stream: multi-segment responses across files, frames, empty bodies, odd offsets. */
const mixedStream = (): Array<Response> => {
  const [a, b, c] = fx.files as [Fixture["files"][0], Fixture["files"][0], Fixture["files"][0]]
  const out: Array<Response> = []
  let id = 1
  for (let round = 0; round < 4; round++) {
    out.push(fileResponse(id++, [{ file: a, offset: round * 65_536 + round, length: 65_536 }]))
    out.push(
      fileResponse(id++, [
        { file: a, offset: 1 * MiB - 100, length: 300 },
        { file: b, offset: 0, length: 700 * 1024 + 13 },
        { file: c, offset: 1, length: 4 },
        { file: a, offset: 3 * MiB - 1000, length: 1017 }
      ])
    )
    out.push(frameResponse(id++, `error frame ${round}: no such object`))
    out.push(fileResponse(id++, []))
    out.push(fileResponse(id++, [{ file: a, offset: 0, length: 0 }, { file: c, offset: 0, length: 5 }]))
    out.push(fileResponse(id++, [{ file: a, offset: 17, length: 3 * MiB }]))
  }
  return out
}

describe.each(planes)("%s data plane", (name, make) => {
  it("reports which plane runs", () => {
    const plane = make()
    // The native tests below mean nothing on the portable fallback: fail loudly with the reason.
    expect(plane.name, plane.reason).toBe(name)
  })

  it("writes pipelined responses (several segments, several files) byte-exactly", async () => {
    const plane = make()
    const stream = mixedStream()
    const expected = expectedBytes(stream)
    const server = await serve(plane, async (_socket, writer) => {
      // Fire a batch at once: the writer must serialise them in call order.
      await Promise.all(stream.slice(0, 12).map((r) => send(writer, r)))
      for (const r of stream.slice(12, 18)) await send(writer, r)
      // And the rest un-awaited, then end(): the FIN must wait for all of them.
      for (const r of stream.slice(18)) void send(writer, r)
      await writer.end!()
    })
    try {
      // Read until the server's FIN, so a premature or missing end() shows as a length mismatch.
      const got = await readAll(server.port, Number.POSITIVE_INFINITY)
      expect(got.length).toBe(expected.length)
      expect(firstMismatch(got, expected)).toBe(-1)
      await expect(server.results[0]).resolves.toBeUndefined()
    } finally {
      await server.close()
    }
  })

  it("survives a full socket buffer and a slow reader (EAGAIN path) with every byte intact", async () => {
    const plane = make()
    const [a, b] = fx.files as [Fixture["files"][0], Fixture["files"][0]]
    const stream: Array<Response> = []
    for (let i = 0; i < 48; i++) {
      stream.push(
        fileResponse(i, [
          { file: a, offset: (i * 40_961) % (2 * MiB), length: 96 * 1024 + i },
          { file: b, offset: i * 1000, length: 32 * 1024 }
        ])
      )
    }
    const expected = expectedBytes(stream)
    expect(expected.length).toBeGreaterThan(6 * MiB)
    const before = nativeCounters()
    const server = await serve(plane, async (socket, writer) => {
      setSendBuffer(socket, 64 * 1024)
      await Promise.all(stream.map((r) => send(writer, r)))
    })
    try {
      const got = await readAll(server.port, expected.length, { initialPauseMs: 100, pauseEachMs: 0 })
      expect(firstMismatch(got, expected)).toBe(-1)
      await expect(server.results[0]).resolves.toBeUndefined()
      if (name === "native") {
        const after = nativeCounters()!
        expect(after.eagain - before!.eagain).toBeGreaterThan(0)
        expect(after.waits - before!.waits).toBeGreaterThan(0)
        expect(after.wakeups - before!.wakeups).toBeGreaterThan(0)
        // Stopping for space mid-response must push the frames queued under MSG_MORE.
        expect(after.pushes - before!.pushes).toBeGreaterThan(0)
      }
    } finally {
      await server.close()
    }
  })

  it("keeps many blocked connections moving at once (shared writability waits)", async () => {
    const plane = make()
    const [a, b] = fx.files as [Fixture["files"][0], Fixture["files"][0]]
    const streamFor = (c: number): Array<Response> =>
      Array.from({ length: 12 }, (_, i) =>
        fileResponse(c * 100 + i, [
          { file: a, offset: (c * 7919 + i * 104_729) % (2 * MiB), length: 64 * 1024 + c },
          { file: b, offset: c * 3 + i, length: 48 * 1024 }
        ])
      )
    const before = nativeCounters()
    const server = await serve(plane, async (socket, writer, index) => {
      setSendBuffer(socket, 8 * 1024)
      await Promise.all(streamFor(index).map((r) => send(writer, r)))
      await writer.end!()
    })
    try {
      const clients = 8
      const got = await Promise.all(
        Array.from({ length: clients }, () =>
          readAll(server.port, Number.POSITIVE_INFINITY, { initialPauseMs: 50, pauseEachMs: 0 })
        )
      )
      expect(server.results.length).toBe(clients)
      await Promise.all(server.results)
      // Connection i (in accept order) carries stream i; match each client by the first header's id.
      for (const bytes of got) {
        const c = Math.floor(bytes.readUInt32BE(8) / 100)
        const expected = expectedBytes(streamFor(c))
        expect(firstMismatch(bytes, expected)).toBe(-1)
      }
      if (name === "native") {
        const after = nativeCounters()!
        expect(after.wakeups - before!.wakeups).toBeGreaterThanOrEqual(clients)
      }
    } finally {
      await server.close()
    }
  })

  it("rejects when the peer resets mid-transfer, and keeps serving other connections", async () => {
    const plane = make()
    const [a] = fx.files as [Fixture["files"][0]]
    const big = fileResponse(1, [
      { file: a, offset: 0, length: 3 * MiB },
      { file: a, offset: 0, length: 3 * MiB }
    ])
    const small = [fileResponse(2, [{ file: a, offset: 12_345, length: 200_000 }]), frameResponse(3, "bye")]
    const server = await serve(plane, async (socket, writer, index) => {
      if (index === 0) {
        setSendBuffer(socket, 16 * 1024)
        const first = await send(writer, big).then(() => undefined, (e: unknown) => e)
        // A later write on the dead connection rejects too, without touching its (closed) fd.
        const calls = nativeCounters()!
        const second = await writer.writeFrame(new Uint8Array(16)).then(() => undefined, (e: unknown) => e)
        const after = nativeCounters()!
        return { first, second, syscalls: after.sendCalls + after.sendfileCalls - calls.sendCalls - calls.sendfileCalls }
      }
      for (const r of small) await send(writer, r)
    })
    try {
      const partial = await readAll(server.port, 10 * MiB, { initialPauseMs: 20, resetAfter: 100_000 })
      expect(partial.length).toBeGreaterThanOrEqual(100_000)
      const outcome = (await server.results[0]) as { first: unknown; second: unknown; syscalls: number }
      expect(outcome.first).toBeInstanceOf(ConnectionWriteError)
      expect((outcome.first as ConnectionWriteError).plane).toBe(name)
      expect(outcome.second).toBe(outcome.first)
      expect(outcome.syscalls).toBe(0)
      const expected = expectedBytes(small)
      const got = await readAll(server.port, expected.length)
      expect(firstMismatch(got, expected)).toBe(-1)
      await expect(server.results[1]).resolves.toBeUndefined()
    } finally {
      await server.close()
    }
  })
})
