/**
 * Versioned and tenant-scoped range requests (bincode, no envelope), byte-exact with Talon's
 * `CachedRangeRequest`, `TenantScopedRange` and `TenantScopedCachedRange`:
 *
 *   CachedRangeRequest      = ObjectId, version: String, offset: u64, len: u64
 *   TenantId                = u32 variant (0 Named(String), 1 Unattributed)
 *   TenantScopedRange       = TenantId, RangeRequest
 *   TenantScopedCachedRange = TenantId, CachedRangeRequest
 *
 * A GetCachedRange (6, 9) is Talon's cache-only probe: resident bytes of the version named, else
 * a typed CacheMiss; the worker never asks the origin. A GetPinnedRange (10, 11, this project's
 * own types, same bodies) names the exact origin version its bytes must come from and may be
 * filled from the origin under If-Match, so a read split across workers cannot mix versions: a
 * worker able to fetch only another version answers VersionMismatch (see dataError.ts).
 */
import type { Either } from "effect"
import type { BlockId, ObjectId } from "../core/ids.js"
import { type BincodeReader, BincodeWriter, decodeWith } from "./bincode.js"
import { readBlockId, readObjectId, writeBlockId, writeObjectId } from "./codecs.js"
import type { DecodeError } from "./errors.js"
import { HEADER_LEN, MsgType, writeHeader } from "./frame.js"
import type { RangeRequest } from "./range.js"

export interface CachedRangeRequest {
  readonly object: ObjectId
  /** The exact origin version (ETag) every byte must come from. */
  readonly version: string
  /** Absolute offset within the object. */
  readonly offset: number
  readonly len: number
}

export type TenantId = { readonly _tag: "Named"; readonly name: string } | { readonly _tag: "Unattributed" }

export const Unattributed: TenantId = { _tag: "Unattributed" }

export interface TenantScopedRange {
  readonly tenant: TenantId
  readonly request: RangeRequest
}

export interface TenantScopedCachedRange {
  readonly tenant: TenantId
  readonly request: CachedRangeRequest
}

/** Talon's ceiling on a tenant name (`MAX_TENANT_ID_BYTES`). */
export const MAX_TENANT_ID_BYTES = 256

const writeTenant = (w: BincodeWriter, t: TenantId): void => {
  if (t._tag === "Named") w.u32(0).string(t.name)
  else w.u32(1)
}

const readTenant = (r: BincodeReader): TenantId => {
  const tag = r.u32()
  if (tag === 0) return { _tag: "Named", name: r.string() }
  if (tag === 1) return Unattributed
  return r.fail(`unknown tenant variant ${tag} (expected 0 Named, 1 Unattributed)`)
}

const writeCached = (w: BincodeWriter, r: CachedRangeRequest): void => {
  writeObjectId(w, r.object)
  w.string(r.version).u64(r.offset).u64(r.len)
}

const readCached = (rd: BincodeReader): CachedRangeRequest => {
  const object = readObjectId(rd)
  const version = rd.string()
  const offset = rd.u64()
  const len = rd.u64()
  return { object, version, offset, len }
}

const readRange = (rd: BincodeReader): RangeRequest => {
  const object = readObjectId(rd)
  const offset = rd.u64()
  const len = rd.u64()
  return { object, offset, len }
}

const sizeHint = (o: ObjectId, extra: string): number => 96 + (o.bucket.length + o.objectPath.length + extra.length) * 3

export const encodeCachedRangeRequest = (r: CachedRangeRequest): Uint8Array => {
  const w = new BincodeWriter(sizeHint(r.object, r.version))
  writeCached(w, r)
  return w.finish()
}

export const decodeCachedRangeRequest = (bytes: Uint8Array): Either.Either<CachedRangeRequest, DecodeError> =>
  decodeWith(bytes, "cached range request", readCached)

export const encodeTenantScopedRange = (s: TenantScopedRange): Uint8Array => {
  const w = new BincodeWriter(sizeHint(s.request.object, s.tenant._tag === "Named" ? s.tenant.name : ""))
  writeTenant(w, s.tenant)
  writeObjectId(w, s.request.object)
  w.u64(s.request.offset).u64(s.request.len)
  return w.finish()
}

export const decodeTenantScopedRange = (bytes: Uint8Array): Either.Either<TenantScopedRange, DecodeError> =>
  decodeWith(bytes, "tenant-scoped range request", (rd) => {
    const tenant = readTenant(rd)
    return { tenant, request: readRange(rd) }
  })

export const encodeTenantScopedCachedRange = (s: TenantScopedCachedRange): Uint8Array => {
  const w = new BincodeWriter(sizeHint(s.request.object, s.request.version + (s.tenant._tag === "Named" ? s.tenant.name : "")))
  writeTenant(w, s.tenant)
  writeCached(w, s.request)
  return w.finish()
}

export const decodeTenantScopedCachedRange = (bytes: Uint8Array): Either.Either<TenantScopedCachedRange, DecodeError> =>
  decodeWith(bytes, "tenant-scoped cached range request", (rd) => {
    const tenant = readTenant(rd)
    return { tenant, request: readCached(rd) }
  })

/**
 * A complete request frame in one buffer: GetCachedRange, or GetCachedRangeTenant when a tenant
 * is given (Talon sends the tenant type only when the client is bound to a tenant).
 */
export const encodeGetCachedRangeFrame = (requestId: number, r: CachedRangeRequest, tenant?: TenantId): Buffer =>
  versionedFrame(tenant === undefined ? MsgType.GetCachedRange : MsgType.GetCachedRangeTenant, requestId, r, tenant)

/** The same bodies as a GetPinnedRange (10), or GetPinnedRangeTenant (11) when a tenant is given. */
export const encodeGetPinnedRangeFrame = (requestId: number, r: CachedRangeRequest, tenant?: TenantId): Buffer =>
  versionedFrame(tenant === undefined ? MsgType.GetPinnedRange : MsgType.GetPinnedRangeTenant, requestId, r, tenant)

const versionedFrame = (type: MsgType, requestId: number, r: CachedRangeRequest, tenant: TenantId | undefined): Buffer => {
  const hint = sizeHint(r.object, r.version + (tenant?._tag === "Named" ? tenant.name : ""))
  const w = new BincodeWriter(HEADER_LEN + hint, HEADER_LEN)
  if (tenant !== undefined) writeTenant(w, tenant)
  writeCached(w, r)
  const buf = w.finish()
  writeHeader(buf, 0, { type, flags: 0, requestId, length: buf.length - HEADER_LEN })
  return buf
}

/**
 * Talon's `CachedBlockPutRequest`, the AdmitCachedBlock (7) frame body: one whole block of the
 * version in `block`, `bodyLen` raw bytes following the frame (outside its payload), with the
 * object's total length so the worker can check the block's geometry without the origin.
 *
 *   CachedBlockPutRequest = BlockId, object_len: u64, body_len: u64
 */
export interface CachedBlockPutRequest {
  readonly block: BlockId
  readonly objectLen: number
  readonly bodyLen: number
}

export const encodeCachedBlockPutRequest = (r: CachedBlockPutRequest): Uint8Array => {
  const w = new BincodeWriter(sizeHint(r.block.object, r.block.version) + 16)
  writeBlockId(w, r.block)
  w.u64(r.objectLen).u64(r.bodyLen)
  return w.finish()
}

export const decodeCachedBlockPutRequest = (bytes: Uint8Array): Either.Either<CachedBlockPutRequest, DecodeError> =>
  decodeWith(bytes, "cached block admission", (rd) => {
    const block = readBlockId(rd)
    const objectLen = rd.u64()
    const bodyLen = rd.u64()
    return { block, objectLen, bodyLen }
  })

/** The AdmitCachedBlock frame (header and body); the caller writes exactly `bodyLen` raw bytes after it. */
export const encodeAdmitCachedBlockHeader = (requestId: number, r: CachedBlockPutRequest): Buffer => {
  const body = encodeCachedBlockPutRequest(r)
  const buf = Buffer.allocUnsafe(HEADER_LEN + body.length)
  writeHeader(buf, 0, { type: MsgType.AdmitCachedBlock, flags: 0, requestId, length: body.length })
  buf.set(body, HEADER_LEN)
  return buf
}
