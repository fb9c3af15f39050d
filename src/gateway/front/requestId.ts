/** S3 request ids, one sequence for both fronts: a random per-process prefix and a counter (unique without a crypto call per request). */
import { randomBytes } from "node:crypto"

const ID_PREFIX = randomBytes(4).toString("hex").toUpperCase()
let idCounter = 0

export const s3RequestId = (): string => {
  idCounter = (idCounter + 1) % 0x1_0000_0000
  return ID_PREFIX + idCounter.toString(16).toUpperCase().padStart(8, "0")
}
