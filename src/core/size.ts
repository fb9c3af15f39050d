/**
 * Byte sizes as people write them in flags, environment and config files: `1048576`, `64K`,
 * `256MiB`, `1.5G`, `10GB`. Units are binary (K = 1024), as pound and the Talon tools take
 * them, whether or not an `i` or `B` follows. A fraction is fine when the result is a whole
 * number of bytes (`1.5K` is 1536; `0.3K` is refused, not rounded).
 */
import { Either } from "effect"

const UNITS: Readonly<Record<string, number>> = { "": 1, b: 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 }
const SIZE = /^(\d+(?:\.\d+)?)\s*(?:([kmgt])(?:i?b)?|(b))?$/i

const HINT = "want a byte count, optionally with a binary unit K, M, G or T (64K = 65536; 256MiB, 1.5G and 10GB also work)"

/** Bytes, or a message saying what was wrong with `text` and what a size looks like. */
export const parseSize = (text: string): Either.Either<number, string> => {
  const trimmed = text.trim()
  const m = SIZE.exec(trimmed)
  if (m === null) return Either.left(`bad size ${JSON.stringify(text)}: ${HINT}`)
  const [, digits = "", unit = "", bytesUnit] = m
  const mult = UNITS[(bytesUnit ?? unit).toLowerCase()]!
  const [whole = "", fraction = ""] = digits.split(".")
  // Exact arithmetic: the fraction times the unit must come out whole.
  const scale = 10n ** BigInt(fraction.length)
  const exact = BigInt(whole + fraction) * BigInt(mult)
  if (exact % scale !== 0n) return Either.left(`bad size ${JSON.stringify(text)}: not a whole number of bytes; ${HINT}`)
  const bytes = exact / scale
  if (bytes > BigInt(Number.MAX_SAFE_INTEGER)) {
    return Either.left(`bad size ${JSON.stringify(text)}: more than ${Number.MAX_SAFE_INTEGER} bytes`)
  }
  return Either.right(Number(bytes))
}
