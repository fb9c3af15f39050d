/**
 * Client errors as errno values a program can act on: a missing object is ENOENT, an origin
 * that refuses our identity is EACCES, everything else (no coordinator or worker answered, the
 * object changed under a pinned handle) is EIO, and the caller logs why.
 */
import * as os from "node:os"
import type { TalonClientError } from "../client/errors.js"

export const Errno = os.constants.errno

/** The origin said 403 / access denied; the coordinator passes its message on verbatim. */
const DENIED = /HTTP 403|AccessDenied|AuthorizationFailure|AuthenticationFailed|permission denied/i

export const errnoOf = (e: TalonClientError): number => {
  switch (e._tag) {
    case "ObjectNotFound":
      return Errno.ENOENT
    case "CoordinatorUnavailable":
      return DENIED.test(e.detail) ? Errno.EACCES : Errno.EIO
    case "InvalidRequest":
      return Errno.ENOENT
    case "ReadFailed":
      // A worker passes on the origin's refusal of its fill.
      return DENIED.test(e.detail) ? Errno.EACCES : Errno.EIO
    default:
      return Errno.EIO
  }
}

/** ENODATA: Linux's "no such attribute" (`os.constants.errno` has it on Linux). */
export const ENODATA: number = Errno.ENODATA ?? 61
