/** bincode layouts of the core identity types, shared by control messages and range requests. */
import type { BlockId, NodeInfo, ObjectId } from "../core/ids.js"
import type { BincodeReader, BincodeWriter } from "./bincode.js"

export const writeObjectId = (w: BincodeWriter, o: ObjectId): void => {
  w.u32(o.backend).string(o.bucket).string(o.objectPath)
}

export const readObjectId = (r: BincodeReader): ObjectId => {
  const backend = r.u32()
  if (backend > 2) r.fail(`unknown backend tag ${backend} (expected 0 S3, 1 Gcs, 2 Azure)`)
  const bucket = r.string()
  const objectPath = r.string()
  return { backend: backend as ObjectId["backend"], bucket, objectPath }
}

export const writeBlockId = (w: BincodeWriter, b: BlockId): void => {
  writeObjectId(w, b.object)
  w.u64(b.offset).u32(b.blockSize).string(b.version)
}

export const readBlockId = (r: BincodeReader): BlockId => {
  const object = readObjectId(r)
  const offset = r.u64()
  const blockSize = r.u32()
  const version = r.string()
  return { object, offset, blockSize, version }
}

export const writeNodeInfo = (w: BincodeWriter, n: NodeInfo): void => {
  w.string(n.id).string(n.address).u32(n.role)
}

export const readNodeInfo = (r: BincodeReader): NodeInfo => {
  const id = r.string()
  const address = r.string()
  const role = r.u32()
  if (role > 1) r.fail(`unknown node role tag ${role} (expected 0 Coordinator, 1 Worker)`)
  return { id, address, role: role as NodeInfo["role"] }
}
