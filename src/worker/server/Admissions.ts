/**
 * AdmitCachedBlock (type 7), as Talon's worker takes it: one complete block of a named version,
 * checked against the block geometry before its body is read, then stored unit by unit (pages,
 * or the whole block) exactly as a fill stores what it fetched — temp file, XXH64, fdatasync,
 * rename, index — so admitted bytes are served, scrubbed and evicted like filled ones, and a
 * store over capacity evicts its coldest units to make room. The origin is never asked.
 */
import {
  DataErrorCode,
  decodeCachedBlockPutRequest,
  encodeFrame,
  encodeTypedErrorFrame,
  MsgType,
  type CachedBlockPutRequest
} from "../../protocol/index.js"
import { describeUnknown } from "../errors.js"
import type { AwaitBody, Reply } from "./Reply.js"
import { blockKeyOf } from "./requestChecks.js"
import { blockLength } from "../../core/geometry.js"
import { validateObjectId } from "../../core/objectId.js"
import { Either } from "effect"
import type { DiskStore } from "../store/DiskStore.js"
import { newUnitHash } from "../store/checksum.js"
import { blockKey } from "../store/layout.js"

/** Talon's checks of an admission header (`validate_cached_block_admission`), plus a version and a name that can be stored. */
export const invalidAdmission = (r: CachedBlockPutRequest, blockSize: number): string | undefined => {
  const { block } = r
  const named = validateObjectId(block.object)
  if (Either.isLeft(named)) return named.left.message
  if (block.version.length === 0) return "admission names no version: a block is cached under the exact origin version (ETag) it holds"
  if (block.blockSize !== blockSize) return `admission block size ${block.blockSize} does not match worker block size ${blockSize}`
  if (block.offset % blockSize !== 0) return `admission block offset ${block.offset} is not aligned to the block size ${blockSize}`
  if (block.offset >= r.objectLen) return `admission block offset ${block.offset} is outside object length ${r.objectLen}`
  const expected = blockLength(block.offset, blockSize, r.objectLen)
  if (r.bodyLen !== expected) return `admission body length ${r.bodyLen} does not match complete block length ${expected}`
  return undefined
}

/** Stores `body` (already checked by `invalidAdmission`) as block `r.block`; units already resident are kept. */
export const admitBlock = async (store: DiskStore, r: CachedBlockPutRequest, body: Uint8Array): Promise<void> => {
  const key = blockKey(r.block)
  const ps = store.pageSize
  const units = ps > 0 ? Math.ceil(body.length / ps) : 1
  for (const [first, end] of store.missingRuns(key, 0, units)) {
    for (let i = first; i < end; i++) {
      const bytes = ps > 0 ? body.subarray(i * ps, Math.min(body.length, (i + 1) * ps)) : body
      const temp = await store.createTemp(key)
      try {
        await store.writeTemp(key, temp.fd, bytes, 0)
        await store.syncTemp(key, temp.fd)
      } catch (e) {
        await store.discardTemp(temp.path, temp.fd)
        throw e
      }
      const hash = newUnitHash()
      hash.update(bytes)
      await store.commit(r.block, body.length, r.objectLen, { tmpPath: temp.path, fd: temp.fd, index: i, sum: hash.digest() })
    }
  }
}

/** Talon's refusal of an admission: a typed error, then the connection closes (its raw body must not be read as frames). */
const refusal = (requestId: number, message: string, code: DataErrorCode = DataErrorCode.InvalidRequest): Reply => ({
  _tag: "Frame",
  bytes: encodeTypedErrorFrame(requestId, code, message),
  closeAfter: true
})

/** Checks an AdmitCachedBlock header: a refusal that closes the connection, or the body to wait for. */
export const admissionFor = (
  requestId: number,
  header: Uint8Array,
  ctx: {
    readonly ready: boolean
    readonly admit: ((r: CachedBlockPutRequest, body: Uint8Array) => Promise<void>) | undefined
    readonly blockSize: number
    /** Counts a refused or failed admission as a request error. */
    readonly refused: () => void
  }
): Reply | AwaitBody => {
  const refuse = (message: string, code?: DataErrorCode): Reply => {
    ctx.refused()
    return refusal(requestId, message, code)
  }
  if (!ctx.ready) return refuse("worker is not ready", DataErrorCode.Unavailable)
  const admit = ctx.admit
  if (admit === undefined) return refuse("this serving process has no block store of its own to admit into; send the block to the worker's primary port")
  const d = decodeCachedBlockPutRequest(header)
  if (Either.isLeft(d)) return refuse(`bad cache admission: ${d.left.message}`)
  const req = d.right
  const bad = invalidAdmission(req, ctx.blockSize)
  if (bad !== undefined) return refuse(bad)
  return {
    _tag: "AwaitBody",
    length: req.bodyLen,
    then: (body) =>
      admit(req, body).then(
        (): Reply => ({ _tag: "Frame", bytes: encodeFrame(MsgType.GetRange, requestId, new Uint8Array(0)), closeAfter: false }),
        (e: unknown): Reply => {
          ctx.refused()
          const message = `admission of ${blockKeyOf(req)} failed: ${describeUnknown(e)}`
          return { _tag: "Frame", bytes: encodeTypedErrorFrame(requestId, DataErrorCode.Internal, message), closeAfter: false }
        }
      )
  }
}
