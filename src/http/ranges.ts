/**
 * One `Range` / `x-ms-range` header against an object of `size` bytes (RFC 9110 §14).
 * Syntactically invalid specs (`bytes=5-2`, other units) are ignored as S3 and Azure
 * do, and the whole object is served. Several ranges are *rejected*: real S3 and Azure
 * silently answer 200 with the whole object, which would turn a small multi-range read
 * into a full download; the stub fails loudly so a client relying on it finds out.
 */
export type RangeResult =
  | { readonly _tag: "Full" }
  | { readonly _tag: "Partial"; readonly start: number; readonly end: number }
  | { readonly _tag: "Unsatisfiable" }
  | { readonly _tag: "Multiple" }

const FULL: RangeResult = { _tag: "Full" }
const SPEC = /^bytes\s*=\s*(\d*)\s*-\s*(\d*)$/i

export const parseRange = (header: string | undefined, size: number): RangeResult => {
  if (header === undefined) return FULL
  const trimmed = header.trim()
  if (trimmed === "") return FULL
  if (/^bytes\s*=/i.test(trimmed) && trimmed.includes(",")) return { _tag: "Multiple" }
  const m = SPEC.exec(trimmed)
  if (m === null) return FULL
  const [, first = "", last = ""] = m
  if (first === "" && last === "") return FULL
  if (first === "") {
    const suffix = Number(last)
    if (suffix === 0 || size === 0) return { _tag: "Unsatisfiable" }
    return { _tag: "Partial", start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(first)
  if (last !== "" && Number(last) < start) return FULL
  if (start >= size) return { _tag: "Unsatisfiable" }
  const end = last === "" ? size - 1 : Math.min(Number(last), size - 1)
  return { _tag: "Partial", start, end }
}

export const contentRange = (start: number, end: number, size: number): string => `bytes ${start}-${end}/${size}`
