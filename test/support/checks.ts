/**
 * Small helpers the SDK suites, the gateway auth tests and the origin tests share: an SDK call
 * as an Effect, an expected rejection as a value, and byte equality said in words.
 */
import { Effect } from "effect"

export const send = <O>(p: () => Promise<O>) => Effect.promise(p)

/** The call's rejection, as a value; a call that succeeds fails the test. */
export const failure = <E>(p: () => Promise<unknown>) =>
  Effect.promise(() =>
    p().then(
      () => {
        throw new Error("expected the request to fail")
      },
      (e: unknown) => e as E
    )
  )

/** Byte equality without vitest's per-element deep diff (slow on large buffers). */
export const sameBytes = (actual: Uint8Array, expected: Uint8Array): string => {
  if (actual.length !== expected.length) return `length ${actual.length} != ${expected.length}`
  const a = Buffer.from(actual.buffer, actual.byteOffset, actual.byteLength)
  if (a.equals(expected)) return "equal"
  let i = 0
  while (a[i] === expected[i]) i++
  return `first difference at byte ${i}`
}
