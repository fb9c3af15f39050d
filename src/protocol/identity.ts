/**
 * Schemas of the core identity types as Talon's serde writes them (core/ids.ts holds the plain
 * record types the hot paths use; these describe the same records field by field, for the
 * control-message codec and its property tests).
 */
import { Schema } from "effect"
import type { BlockId, NodeInfo, ObjectId } from "../core/ids.js"
import { enumU32, string, u32, u64 } from "./bincodeSchema.js"

export const ObjectIdSchema: Schema.Schema<ObjectId> = Schema.Struct({
  backend: enumU32("backend", [0, 1, 2], ["S3", "Gcs", "Azure"]),
  bucket: string,
  objectPath: string
})

export const BlockIdSchema: Schema.Schema<BlockId> = Schema.Struct({
  object: ObjectIdSchema,
  offset: u64,
  blockSize: u32,
  version: string
})

/** NodeRole as its u32 tag. */
export const nodeRole = enumU32("node role", [0, 1], ["Coordinator", "Worker"])

export const NodeInfoSchema: Schema.Schema<NodeInfo> = Schema.Struct({
  id: string,
  address: string,
  role: nodeRole
})
