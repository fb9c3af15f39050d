/**
 * Per-unit checksums: XXH64, chosen over node:crypto's SHA-256 because it hashes several times
 * faster (docs/decisions/measured-in-code.md) and the threat is a flipped or torn byte on disk,
 * not an adversary. Hashed by the worker's native addon (native/xxh64.c) when it loads, else by
 * xxhash-wasm (pure WebAssembly, no platform binaries), imported only then: WebAssembly costs an
 * idle worker ~1.3 MiB of RSS and a busy one more (BENCHMARKS.md, "Footprint"). Both give the same
 * hashes (test/worker/checksum.test.ts).
 *
 * `sums` file of a block directory: "TSM1", u32le unit count, count × u64le hashes,
 * then a presence bitmap (one bit per unit, LSB first). A unit whose bit is clear
 * has no recorded checksum and is never trusted after a restart.
 */
import * as fs from "node:fs"
import { loadNativeAddon } from "../plane/NativeAddon.js"

/** XXH64 (seed 0), one-shot and streaming: what xxhash-wasm's API and the addon's both give. */
export interface Hasher {
  readonly h64Raw: (bytes: Uint8Array) => bigint
  readonly create64: () => { update(chunk: Uint8Array): unknown; digest(): bigint }
}

/** The addon's XXH64 (native/xxh64.c); its streaming state is caller-owned memory. */
interface NativeXxh64 {
  readonly xxh64: (bytes: Uint8Array) => bigint
  readonly xxh64Reset: (state: Uint8Array) => void
  readonly xxh64Update: (state: Uint8Array, bytes: Uint8Array) => void
  readonly xxh64Digest: (state: Uint8Array) => bigint
}

const STATE_BYTES = 80

const nativeHasher = (a: NativeXxh64): Hasher => ({
  h64Raw: (bytes) => a.xxh64(bytes),
  create64: () => {
    // A fresh ArrayBuffer is 8-byte aligned, as the state's u64 fields want.
    const state = new Uint8Array(new ArrayBuffer(STATE_BYTES))
    a.xxh64Reset(state)
    const h = {
      update: (chunk: Uint8Array) => (a.xxh64Update(state, chunk), h),
      digest: () => a.xxh64Digest(state)
    }
    return h
  }
})

/** The addon's hasher, or undefined when the addon is missing, stale or not for this platform. */
export const nativeXxh64 = (): Hasher | undefined => {
  const load = loadNativeAddon()
  if (load._tag !== "Loaded") return undefined
  const a = load.addon as unknown as Partial<NativeXxh64>
  return typeof a.xxh64 === "function" && typeof a.xxh64Reset === "function" && typeof a.xxh64Update === "function" && typeof a.xxh64Digest === "function"
    ? nativeHasher(a as NativeXxh64)
    : undefined
}

/** xxhash-wasm's hasher (compiling the wasm module takes a few ms). */
export const wasmXxh64 = (): Promise<Hasher> => import("xxhash-wasm").then((m) => m.default())

let api: Hasher | undefined
let loading: Promise<Hasher> | undefined

/** Loads the hasher once per process: the addon's, else xxhash-wasm's. */
export const loadHasher = async (): Promise<Hasher> => {
  if (api !== undefined) return api
  loading ??= Promise.resolve(nativeXxh64() ?? wasmXxh64()).then((h) => (api = h))
  return loading
}

/** The hasher, once `loadHasher` has resolved (DiskStore.open awaits it before anything hashes). */
export const hasher = (): Hasher => {
  if (api === undefined) throw new Error("the checksum hasher is not loaded: await loadHasher() first")
  return api
}

/** Streaming XXH64 of one unit as its bytes arrive from the origin. */
export interface UnitHash {
  update(chunk: Uint8Array): void
  digest(): bigint
}

export const newUnitHash = (): UnitHash => {
  const h = hasher().create64()
  return {
    update: (chunk) => void h.update(chunk),
    digest: () => h.digest()
  }
}

/**
 * A unit of up to this many bytes is read in one call and hashed in one shot (a default 1 MiB
 * page: one read, one copy into the hasher, no streaming state); a larger one in reads of this size.
 */
export const READ_CHUNK = 1024 * 1024

const readAt = (fd: number, buf: Uint8Array, length: number, position: number): Promise<number> =>
  new Promise((resolve, reject) => fs.read(fd, buf, 0, length, position, (e, n) => (e ? reject(e) : resolve(n))))

export type FileCheck =
  | { readonly ok: true }
  | { readonly ok: false; readonly reason: "short" | "long" | "checksum"; readonly detail: string }

/** A scratch buffer that lets checkFile read a unit of `bytes` (and the byte past it) in one call. */
export const checkScratch = (bytes: number): Uint8Array => new Uint8Array(Math.min(READ_CHUNK, Math.max(0, bytes)) + 1)

/**
 * Reads `bytes` bytes of `fd` from offset 0 and compares their XXH64 with `expected`. A file
 * shorter or longer than `bytes` fails without hashing the rest. The last read asks for one
 * byte more than is left, so a longer file is caught without a read of its own; a unit that
 * fits `scratch` is one read.
 */
export const checkFile = async (fd: number, bytes: number, expected: bigint, scratch?: Uint8Array): Promise<FileCheck> => {
  const buf = scratch !== undefined && scratch.length >= 2 ? scratch : checkScratch(bytes)
  let got: bigint
  if (bytes + 1 <= buf.length) {
    // Whole unit and the byte past it at once; a regular file gives all it has in one pread.
    let n = 0
    for (;;) {
      const r = await readAt(fd, buf.subarray(n), bytes + 1 - n, n)
      if (r === 0) break
      n += r
      if (n > bytes) return { ok: false, reason: "long", detail: `more than the ${bytes} bytes expected on disk` }
    }
    if (n < bytes) return { ok: false, reason: "short", detail: `${n} of ${bytes} bytes on disk` }
    got = hasher().h64Raw(buf.subarray(0, bytes))
  } else {
    const h = hasher().create64()
    let at = 0
    for (;;) {
      // The read that reaches the end asks one byte past it.
      const left = bytes - at
      const want = left < buf.length ? left + 1 : buf.length
      const n = await readAt(fd, buf, want, at)
      if (n === 0) {
        if (at < bytes) return { ok: false, reason: "short", detail: `${at} of ${bytes} bytes on disk` }
        break
      }
      if (n > left) return { ok: false, reason: "long", detail: `more than the ${bytes} bytes expected on disk` }
      h.update(n === buf.length ? buf : buf.subarray(0, n))
      at += n
    }
    got = h.digest()
  }
  if (got !== expected) {
    return { ok: false, reason: "checksum", detail: `xxh64 ${hex(got)} where ${hex(expected)} was recorded at fill` }
  }
  return { ok: true }
}

export const hex = (v: bigint): string => v.toString(16).padStart(16, "0")

// ------------------------------------------------------------------ sums file

const MAGIC = [0x54, 0x53, 0x4d, 0x31] // "TSM1"
const HEAD = 8

/** Checksums of a block's units: `undefined` where none is recorded. */
export type Sums = Array<bigint | undefined>

export const encodeSums = (sums: ReadonlyArray<bigint | undefined>): Uint8Array => {
  const n = sums.length
  const out = new Uint8Array(HEAD + n * 8 + Math.ceil(n / 8))
  const view = new DataView(out.buffer)
  out.set(MAGIC, 0)
  view.setUint32(4, n, true)
  const bits = HEAD + n * 8
  for (let i = 0; i < n; i++) {
    const s = sums[i]
    if (s === undefined) continue
    view.setBigUint64(HEAD + i * 8, s, true)
    out[bits + (i >> 3)]! |= 1 << (i & 7)
  }
  return out
}

/**
 * Inverse of `encodeSums` for a block of `count` units. Never throws: anything malformed
 * (wrong magic, count or length) is a string saying what, and the caller then trusts no unit.
 */
export const decodeSums = (bytes: Uint8Array, count: number): Sums | string => {
  if (bytes.length < HEAD) return `sums file of ${bytes.length} bytes is shorter than its ${HEAD}-byte header`
  for (let i = 0; i < 4; i++) if (bytes[i] !== MAGIC[i]) return "sums file has a bad magic (not TSM1)"
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const n = view.getUint32(4, true)
  if (n !== count) return `sums file is for ${n} units, the block has ${count}`
  const want = HEAD + n * 8 + Math.ceil(n / 8)
  if (bytes.length !== want) return `sums file is ${bytes.length} bytes, ${want} expected for ${n} units`
  const bits = HEAD + n * 8
  const out: Sums = new Array<bigint | undefined>(n).fill(undefined)
  for (let i = 0; i < n; i++) {
    if ((bytes[bits + (i >> 3)]! & (1 << (i & 7))) !== 0) out[i] = view.getBigUint64(HEAD + i * 8, true)
  }
  return out
}
