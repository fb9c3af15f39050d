/**
 * ListObjects drains the origin's pages up to Talon's bounds (10,000 objects, one control
 * frame) and refuses past them instead of answering a truncated list.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import { BackendStore, type ListOptions } from "../../src/backend/BackendStore.js"
import { decodeControl, encodeControl } from "../../src/protocol/control.js"
import { loopbackCoordinator } from "../support/loopbackCoordinator.js"

/** An origin of `count` keys `<prefix>k00000…`, paged by `maxKeys` like S3 (at most 1000). */
const pagedOrigin = (count: number, keyOf: (i: number) => string, pages: Array<number>) =>
  Layer.succeed(BackendStore, {
    stat: () => Effect.die("not used"),
    getRange: () => Stream.die("not used"),
    list: (_bucket: string, options: ListOptions = {}) =>
      Effect.sync(() => {
        const start = Number(options.token ?? "0")
        const n = Math.min(options.maxKeys ?? 1000, 1000)
        pages.push(n)
        const end = Math.min(count, start + n)
        const objects = []
        for (let i = start; i < end; i++) objects.push({ key: keyOf(i), size: i, version: "v" })
        return { objects, commonPrefixes: [], nextToken: end < count ? String(end) : undefined }
      }),
    put: () => Effect.die("not used"),
    delete: () => Effect.die("not used")
  })

const listed = (count: number, keyOf: (i: number) => string = (i) => `dir/k${String(i).padStart(5, "0")}`) =>
  Effect.gen(function* () {
    const pages: Array<number> = []
    const coordinator = yield* loopbackCoordinator(pagedOrigin(count, keyOf, pages))
    const reply = yield* coordinator.handle({ _tag: "ListObjects", prefix: "/s3/bucket/dir/" })
    return { reply, pages }
  }).pipe(Effect.scoped)

describe("coordinator ListObjects bounds", () => {
  it.live("10,000 keys list fully, in order, and the reply fits one control frame", () =>
    Effect.gen(function* () {
      const { reply, pages } = yield* listed(10_000)
      expect(reply._tag).toBe("ObjectList")
      if (reply._tag !== "ObjectList") return
      expect(reply.entries.length).toBe(10_000)
      expect(reply.entries[0]).toEqual({ path: "/s3/bucket/dir/k00000", size: 0 })
      expect(reply.entries[9999]).toEqual({ path: "/s3/bucket/dir/k09999", size: 9999 })
      expect(pages).toEqual(Array(10).fill(1000))
      const bytes = encodeControl(reply)
      expect(bytes.length).toBeLessThanOrEqual(1024 * 1024)
      const back = decodeControl(bytes)
      expect(back._tag === "Right" && back.right.message._tag === "ObjectList" && back.right.message.entries.length).toBe(10_000)
    })
  )

  it.live("10,001 keys are refused with a message that says to narrow the prefix, not truncated", () =>
    Effect.gen(function* () {
      const { reply } = yield* listed(10_001)
      expect(reply._tag).toBe("Ack")
      if (reply._tag === "Ack") {
        expect(reply.ok).toBe(false)
        expect(reply.detail).toMatch(/more than 10000 objects; narrow the prefix/)
      }
    })
  )

  it.live("a listing whose paths outgrow the 1 MiB control frame is refused", () =>
    Effect.gen(function* () {
      const { reply } = yield* listed(5000, (i) => `dir/${"x".repeat(300)}-${i}`)
      expect(reply._tag === "Ack" && reply.detail).toMatch(/does not fit one 1048576-byte control reply/)
    })
  )
})


