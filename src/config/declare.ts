/**
 * The one-line form of a setting: its default, what it does, and only what differs from
 * the usual (names, an example other than the default, a rule). `component` fills in the
 * rest from the key and the component's prefix (Setting.ts).
 */
import * as K from "./kinds.js"
import type { Declared } from "./Setting.js"

export type Extras<A> = Omit<Declared<A>, "kind" | "default" | "help">

/** What is wrong with a value, or undefined (src/config/checks.ts). */
export type Rule<A> = (value: A) => string | undefined

/** A rule alone, when that is all that differs. */
const extrasOf = <A>(given: Extras<A> | Rule<A>): Extras<A> => (typeof given === "function" ? { check: given } : given)

export const of = <A>(kind: K.Kind<A>, fallback: A, help: string, extras: Extras<A> | Rule<A> = {}): Declared<A> => ({
  ...extrasOf(extras),
  kind,
  default: fallback,
  help
})

const ofKind =
  <A>(kind: K.Kind<A>) =>
  (fallback: A, help: string, extras: Extras<A> | Rule<A> = {}): Declared<A> =>
    of(kind, fallback, help, extras)

export const text = ofKind(K.text)
export const integer = ofKind(K.integer)
export const number = ofKind(K.number)
export const size = ofKind(K.size)
export const listen = ofKind(K.listenAddress)

/** One of fixed words, the first being the default. */
export const oneOf = <const T extends string>(values: readonly [T, ...Array<T>], help: string, extras: Extras<T> | Rule<T> = {}): Declared<T> =>
  of(K.oneOf(...values), values[0], help, extras)

/** A flag that takes no value and turns something on (`--keep`); off unless given. */
export const toggle = (help: string): Declared<boolean> => of(K.boolean, false, help, { presence: true, example: "true" })

/** Unset unless given; shown as "none" unless `shownDefault` says what unset means. */
export const unset = <A>(kind: K.Kind<A>, help: string, extras: Extras<A | undefined> | Rule<A | undefined> = {}): Declared<A | undefined> =>
  of(K.optional(kind), undefined, help, { shownDefault: "none", ...extrasOf(extras) })
