/** What the request handler hands the serve loop for one request. */
import type { MsgType } from "../../protocol/index.js"
import type { FileSegment } from "../plane/DataPlane.js"
import type { RangeReply } from "../ReadPath.js"

/**
 * A request whose raw body follows its frame (AdmitCachedBlock): the serve loop reads exactly
 * `length` more bytes off the connection and hands them to `then`, whose reply takes this
 * request's place in reply order.
 */
export interface AwaitBody {
  readonly _tag: "AwaitBody"
  readonly length: number
  readonly then: (body: Buffer) => Promise<Reply>
}

export type Reply =
  | { readonly _tag: "Frame"; readonly bytes: Uint8Array; readonly closeAfter: boolean }
  | {
      readonly _tag: "File"
      /** Header fields; the serve loop writes the header bytes when it sends (no Buffer per reply). */
      readonly type: MsgType
      readonly requestId: number
      readonly segments: ReadonlyArray<FileSegment>
      readonly range: RangeReply
    }
