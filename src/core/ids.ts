/**
 * Identity types shared by every component. Plain readonly records (not classes) so
 * the hot paths (placement, codec) can build and read them without allocation overhead.
 */

/** Wire tags of the storage backends, in Talon's declaration order (bincode u32). */
export const Backend = { S3: 0, Gcs: 1, Azure: 2 } as const
export type Backend = (typeof Backend)[keyof typeof Backend]

export interface ObjectId {
  readonly backend: Backend
  readonly bucket: string
  readonly objectPath: string
}

/**
 * One cached block: `offset` is the block-aligned start within the object and
 * `version` the origin's ETag, so a changed object is a different key.
 */
export interface BlockId {
  readonly object: ObjectId
  readonly offset: number
  readonly blockSize: number
  readonly version: string
}

export const NodeRole = { Coordinator: 0, Worker: 1 } as const
export type NodeRole = (typeof NodeRole)[keyof typeof NodeRole]

export interface NodeInfo {
  readonly id: string
  readonly address: string
  readonly role: NodeRole
}

/** Talon defaults (Talon's): every client and worker must agree on the block size. */
export const DEFAULT_BLOCK_SIZE = 256 * 1024 * 1024
export const DEFAULT_PAGE_SIZE = 1024 * 1024
