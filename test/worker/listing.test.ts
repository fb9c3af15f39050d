/**
 * The data port's ListObjects drain (Listing.ts) against a paged origin: Talon's bounds (10,000
 * objects, 20 pages of 1000, one 1 MiB control frame) refuse instead of truncating; within them
 * every page is drained into one ObjectList of Talon's `s3/bucket/key` paths.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { BackendRequestError, type BackendStoreShape, type ListOptions } from "../../src/backend/BackendStore.js"
import { listObjects, LIST_PAGE_SIZE } from "../../src/worker/server/Listing.js"

/** An origin listing `count` keys named by `name`, `pageSize` per page (capped by maxKeys); `asked` records each page request. */
const pagedOrigin = (count: number, pageSize: number, name: (i: number) => string = (i) => `k/${String(i).padStart(6, "0")}`) => {
  const asked: Array<ListOptions | undefined> = []
  const shape = {
    list: (_bucket: string, options?: ListOptions) =>
      Effect.sync(() => {
        asked.push(options)
        const from = options?.token === undefined ? 0 : Number(options.token)
        const to = Math.min(count, from + Math.min(pageSize, options?.maxKeys ?? pageSize))
        const objects = []
        for (let i = from; i < to; i++) objects.push({ key: name(i), size: i, etag: "e", lastModified: undefined })
        return { objects, commonPrefixes: [], nextToken: to < count ? String(to) : undefined }
      })
  } as unknown as BackendStoreShape
  return { shape, asked }
}

const run = (shape: BackendStoreShape, prefix: string) => Effect.runPromise(listObjects(shape, prefix))

describe("data-port ListObjects", () => {
  it("drains every page into one ObjectList of Talon's paths, asking for 1000 keys a page", async () => {
    const { shape, asked } = pagedOrigin(2500, 1000)
    const reply = await run(shape, "/s3/bkt/k/")
    expect(reply._tag).toBe("ObjectList")
    if (reply._tag !== "ObjectList") return
    expect(reply.entries).toHaveLength(2500)
    expect(reply.entries[0]).toEqual({ path: "s3/bkt/k/000000", size: 0 })
    expect(reply.entries[2499]).toEqual({ path: "s3/bkt/k/002499", size: 2499 })
    expect(asked.map((o) => [o?.prefix, o?.maxKeys])).toEqual([["k/", LIST_PAGE_SIZE], ["k/", LIST_PAGE_SIZE], ["k/", LIST_PAGE_SIZE]])
  })

  it("exactly 10,000 objects list; 10,001 are refused, never truncated", async () => {
    const ok = await run(pagedOrigin(10_000, 1000).shape, "az/c")
    expect(ok._tag === "ObjectList" && ok.entries.length).toBe(10_000)
    expect(ok._tag === "ObjectList" && ok.entries[0]!.path).toBe("az/c/k/000000")
    const over = await run(pagedOrigin(10_001, 1000).shape, "az/c")
    expect(over).toMatchObject({ _tag: "Ack", ok: false })
    expect(over._tag === "Ack" && over.detail).toContain("10000-object")
  })

  it("refuses past 20 origin pages and past one control frame", async () => {
    const pages = await run(pagedOrigin(5000, 100).shape, "/s3/bkt")
    expect(pages._tag === "Ack" && pages.detail).toContain("20 backend pages")
    const long = await run(pagedOrigin(3000, 1000, (i) => `${"x".repeat(400)}/${i}`).shape, "/s3/bkt")
    expect(long._tag === "Ack" && long.detail).toContain("control response")
  })

  it("a bad prefix or an origin failure is an Ack naming it", async () => {
    const { shape, asked } = pagedOrigin(1, 1)
    for (const bad of ["", "/s3", "/nope/bkt", "/s3/bkt/../x"]) expect(await run(shape, bad)).toMatchObject({ _tag: "Ack", ok: false })
    expect(asked).toHaveLength(0)
    const failing = {
      list: () => Effect.fail(new BackendRequestError({ object: "s3://bkt", operation: "LIST", retryable: false, detail: "503 slow down" }))
    } as unknown as BackendStoreShape
    const failed = await run(failing, "/s3/bkt")
    expect(failed._tag === "Ack" && failed.detail).toContain("503 slow down")
  })
})
