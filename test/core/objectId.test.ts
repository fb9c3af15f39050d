import { Either } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  Backend,
  backendFromName,
  blockIdEquals,
  blockIdToString,
  objectIdEquals,
  objectIdFromPath,
  objectIdFromUri,
  objectIdToPath,
  objectIdToUri,
  validateObjectId,
  type BlockId,
  type ObjectId
} from "../../src/core/index.js"

const ok = (e: Either.Either<ObjectId, unknown>): ObjectId => {
  if (Either.isLeft(e)) throw new Error(`expected Right, got ${String(e.left)}`)
  return e.right
}

/** One path component: any non-empty string without '/' other than '.' and '..' (incl. multi-byte UTF-8). */
const component = fc
  .string({ unit: fc.oneof(fc.constantFrom("a", "b", ".", "-", "_", " ", "数", "据", "é", "😀", "%", "?", "#"), fc.string({ unit: "binary", minLength: 1, maxLength: 1 })), minLength: 1, maxLength: 8 })
  .filter((s) => !s.includes("/") && s !== "." && s !== "..")
const objectIdArb: fc.Arbitrary<ObjectId> = fc.record({
  backend: fc.constantFrom(Backend.S3, Backend.Gcs, Backend.Azure),
  bucket: component,
  objectPath: fc.array(component, { minLength: 1, maxLength: 5 }).map((cs) => cs.join("/"))
})

describe("objectIdFromPath", () => {
  it("parses each backend prefix, az and azure alike", () => {
    expect(ok(objectIdFromPath("/s3/my-bucket/data/checkpoint.bin"))).toEqual({ backend: Backend.S3, bucket: "my-bucket", objectPath: "data/checkpoint.bin" })
    expect(ok(objectIdFromPath("/gcs/b/o"))).toEqual({ backend: Backend.Gcs, bucket: "b", objectPath: "o" })
    expect(ok(objectIdFromPath("/az/container/a/b"))).toEqual({ backend: Backend.Azure, bucket: "container", objectPath: "a/b" })
    expect(ok(objectIdFromPath("/azure/container/a/b"))).toEqual({ backend: Backend.Azure, bucket: "container", objectPath: "a/b" })
    expect(ok(objectIdFromPath("s3/b/k"))).toEqual({ backend: Backend.S3, bucket: "b", objectPath: "k" })
  })

  it("keeps multi-byte UTF-8 keys intact", () => {
    const id = ok(objectIdFromPath("/az/container/数据/文件.parquet"))
    expect(id.objectPath).toBe("数据/文件.parquet")
    expect(objectIdToPath(id)).toBe("/az/container/数据/文件.parquet")
  })

  it.each([
    ["/", "missing backend"],
    ["", "missing backend"],
    ["/s3", "missing bucket"],
    ["/s3/", "missing bucket"],
    ["/s3/only-bucket", "missing object path"],
    ["/s3/only-bucket/", "missing object path"],
    ["/unknown/b/o", "unknown backend"],
    ["/s3//o", "bucket"],
    ["/s3/../o", "bucket"],
    ["/s3/./o", "bucket"],
    ["/s3/bucket/../../secret", "component"],
    ["/s3/bucket/a/../b", "component"],
    ["/s3/bucket/./a", "component"],
    ["/s3/bucket/a//b", "component"],
    ["/s3/bucket/..", "component"],
    ["/s3/bucket/a/", "component"]
  ])("rejects %j (%s)", (input, reason) => {
    const r = objectIdFromPath(input)
    expect(Either.isLeft(r)).toBe(true)
    if (Either.isLeft(r)) {
      expect(r.left._tag).toBe("InvalidObjectPath")
      expect(r.left.input).toBe(input)
      expect(r.left.reason).toContain(reason)
      expect(r.left.message).toContain(JSON.stringify(input))
    }
  })

  it("accepts dots inside names", () => {
    expect(ok(objectIdFromPath("/s3/b.x/..a/b./.c")).objectPath).toBe("..a/b./.c")
  })

  it("round trips path form for arbitrary valid ids (property)", () => {
    fc.assert(
      fc.property(objectIdArb, (id) => {
        const back = ok(objectIdFromPath(objectIdToPath(id)))
        expect(back).toEqual(id)
        expect(Either.isRight(validateObjectId(id))).toBe(true)
      }),
      { numRuns: 500 }
    )
  })

  it("agrees with a split-based reference of the rules on arbitrary input (property)", () => {
    const bad = (c: string) => c === "" || c === "." || c === ".."
    // Talon's from_path spelled out with split: strip leading '/', at most three parts.
    const reference = (path: string): ObjectId | string => {
      const p = path.replace(/^\/+/, "")
      if (p === "") return "missing backend"
      const [name, ...more] = p.split("/")
      if (more.length === 0) return "missing bucket"
      const backend = backendFromName(name!)
      if (backend === undefined) return "unknown backend"
      const rest = more.join("/")
      const [bucket, ...tail] = rest.split("/")
      if (tail.length === 0) return rest === "" ? "missing bucket" : "missing object path"
      if (bad(bucket!)) return "bucket"
      const objectPath = tail.join("/")
      if (objectPath === "") return "missing object path"
      return objectPath.split("/").some(bad) ? "component" : { backend, bucket: bucket!, objectPath }
    }
    const token = fc.constantFrom("/", "//", ".", "..", "s3", "gcs", "gs", "az", "azure", "azur", "azurex", "s", "g", "gc", "a", "数", "😀", "-")
    fc.assert(
      fc.property(fc.array(token, { maxLength: 10 }).map((ts) => ts.join("")), (path) => {
        const want = reference(path)
        const got = objectIdFromPath(path)
        if (typeof want === "string") {
          expect(Either.isLeft(got), path).toBe(true)
          if (Either.isLeft(got)) expect(got.left.reason).toContain(want)
        } else {
          expect(ok(got)).toEqual(want)
        }
      }),
      { numRuns: 3000 }
    )
  })

  it("never throws on arbitrary input and accepts only what validates (property)", () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom("/", ".", "a", "s3", "az", "数") }), (s) => {
        const r = objectIdFromPath(s)
        if (Either.isRight(r)) expect(Either.isRight(validateObjectId(r.right))).toBe(true)
      }),
      { numRuns: 1000 }
    )
  })
})

describe("URI form", () => {
  it("formats and parses s3, gs and az URIs", () => {
    const az: ObjectId = { backend: Backend.Azure, bucket: "container", objectPath: "path/to/object" }
    expect(objectIdToUri(az)).toBe("az://container/path/to/object")
    expect(objectIdToUri({ backend: Backend.S3, bucket: "b", objectPath: "k" })).toBe("s3://b/k")
    expect(objectIdToUri({ backend: Backend.Gcs, bucket: "b", objectPath: "k" })).toBe("gs://b/k")
    expect(ok(objectIdFromUri("azure://container/path/to/object"))).toEqual(az)
    expect(ok(objectIdFromUri("gcs://b/k")).backend).toBe(Backend.Gcs)
  })

  it.each(["s3:/b/k", "ftp://b/k", "s3://b", "s3://b/", "s3://b/a/../k", "://b/k", "s3:///k"])("rejects %j", (uri) => {
    expect(Either.isLeft(objectIdFromUri(uri))).toBe(true)
  })

  it("round trips URI form (property)", () => {
    fc.assert(fc.property(objectIdArb, (id) => {
        expect(ok(objectIdFromUri(objectIdToUri(id)))).toEqual(id)
      }), { numRuns: 500 })
  })
})

describe("BlockId", () => {
  const object: ObjectId = { backend: Backend.S3, bucket: "b", objectPath: "o" }
  const block: BlockId = { object, offset: 3 * 268435456, blockSize: 268435456, version: "v1" }

  it("displays as <path>@<version>#<offset>+<blockSize>", () => {
    expect(blockIdToString(block)).toBe("/s3/b/o@v1#805306368+268435456")
  })

  it("is equal only when all four fields are", () => {
    expect(blockIdEquals(block, { ...block, object: { ...object } })).toBe(true)
    expect(blockIdEquals(block, { ...block, version: "v2" })).toBe(false)
    expect(blockIdEquals(block, { ...block, offset: 0 })).toBe(false)
    expect(blockIdEquals(block, { ...block, blockSize: 1 })).toBe(false)
    expect(blockIdEquals(block, { ...block, object: { ...object, backend: Backend.Gcs } })).toBe(false)
    expect(objectIdEquals(object, { ...object, objectPath: "p" })).toBe(false)
  })
})
