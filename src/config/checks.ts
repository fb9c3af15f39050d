/**
 * Value checks settings share: each returns what is wrong with a parsed value, or
 * undefined when it is fine (the `check` of a setting). The messages are what a user
 * sees after the setting's name and source, so they say what is allowed.
 */

export const positive = (n: number) => (n > 0 ? undefined : "must be positive")
export const nonNegative = (n: number) => (n >= 0 ? undefined : "must be zero or positive")
export const positiveInteger = (n: number) => (Number.isSafeInteger(n) && n >= 1 ? undefined : "must be a positive whole number")
export const nonNegativeInteger = (n: number) => (Number.isSafeInteger(n) && n >= 0 ? undefined : "must be zero or a positive whole number")
export const notBlank = (s: string) => (s.trim() === "" ? "must not be empty" : undefined)

/** `check` applied only when a value is set. */
export const whenSet =
  <A>(check: (a: A) => string | undefined) =>
  (a: A | undefined) =>
    a === undefined ? undefined : check(a)

/** A block size: Talon's wire carries it as a u32, and every client and worker must agree on it. */
export const blockSizeRange = (n: number) => (n > 0 && n <= 0xffffffff ? undefined : "must be in 1..4 GiB-1 (a u32)")

/** In lo..hi, both included; `why` when the bare bounds would not say enough. */
export const range =
  (lo: number, hi: number, why = `must be in ${lo}..${hi}`) =>
  (n: number) =>
    n >= lo && n <= hi ? undefined : why
