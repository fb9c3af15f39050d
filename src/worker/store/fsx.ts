/**
 * Raw-fd file helpers. The data plane wants plain fd numbers (for sendfile and
 * pooled reads), so the store keeps numbers rather than FileHandle objects.
 */
import * as fs from "node:fs"
import { promisify } from "node:util"

export const openFd = promisify(fs.open) as (path: string, flags: string, mode?: number) => Promise<number>
export const closeFd = promisify(fs.close) as (fd: number) => Promise<void>
export const fdatasync = promisify(fs.fdatasync) as (fd: number) => Promise<void>

const writeRaw = (fd: number, buf: Uint8Array, offset: number, length: number, position: number): Promise<number> =>
  new Promise((resolve, reject) =>
    fs.write(fd, buf, offset, length, position, (err, written) => (err ? reject(err) : resolve(written)))
  )

/** Writes all of `buf` at `position` (fs.write may write less than asked). */
export const writeAll = async (fd: number, buf: Uint8Array, position: number): Promise<void> => {
  let done = 0
  while (done < buf.length) {
    const n = await writeRaw(fd, buf, done, buf.length - done, position + done)
    if (n <= 0) throw new Error(`short write to fd ${fd}`)
    done += n
  }
}

/** Closes without throwing: the fd may already be gone during shutdown. */
export const closeQuietly = (fd: number): void => {
  if (fd >= 0) fs.close(fd, () => {})
}

export const isNotFound = (e: unknown): boolean =>
  typeof e === "object" && e !== null && (e as { code?: unknown }).code === "ENOENT"
