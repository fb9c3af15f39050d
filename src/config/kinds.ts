/**
 * The value types settings take: each parses the text a flag, a `TALON_*` variable or a
 * config file gives (files render lists comma-joined, like the environment) into a value,
 * or says what it expected. Never throws.
 */
import { Either, Redacted } from "effect"
import { parseSize } from "../core/size.js"
import { parseHostPort, parseHostPortList } from "../transport/address.js"

export interface Kind<A> {
  /** What the docs show as the type, e.g. `size`, `host:port`. */
  readonly type: string
  readonly parse: (text: string) => Either.Either<A, string>
  /** A value as a user would write it (docs, `--help` defaults). */
  readonly show: (value: A) => string
  /** Fixed choices, listed by `--help`. */
  readonly choices?: ReadonlyArray<string>
  /** Several occurrences of the flag make one value (lists). */
  readonly many?: (texts: ReadonlyArray<string>) => Either.Either<A, string>
}

const got = (text: string) => `got ${JSON.stringify(text)}`

export const text: Kind<string> = { type: "string", parse: Either.right, show: (s) => (s === "" ? '""' : s) }

export const integer: Kind<number> = {
  type: "integer",
  parse: (t) => (/^\s*-?\d+\s*$/.test(t) && Number.isSafeInteger(Number(t)) ? Either.right(Number(t)) : Either.left(`expected a whole number, ${got(t)}`)),
  show: String
}

export const number: Kind<number> = {
  type: "number",
  parse: (t) => (t.trim() !== "" && Number.isFinite(Number(t)) ? Either.right(Number(t)) : Either.left(`expected a number, ${got(t)}`)),
  show: String
}

/** Bytes as the shortest exact K/M/G/T form. */
export const showSize = (n: number): string => {
  for (const [suffix, unit] of [["T", 1024 ** 4], ["G", 1024 ** 3], ["M", 1024 ** 2], ["K", 1024]] as const) {
    if (n >= unit && n % unit === 0) return `${n / unit}${suffix}`
  }
  return String(n)
}

export const size: Kind<number> = {
  type: "size",
  parse: parseSize,
  show: showSize
}

const TRUE = ["true", "yes", "y", "on", "1"]
const FALSE = ["false", "no", "n", "off", "0"]

export const boolean: Kind<boolean> = {
  type: "boolean",
  parse: (t) => {
    const v = t.trim().toLowerCase()
    if (TRUE.includes(v)) return Either.right(true)
    if (FALSE.includes(v)) return Either.right(false)
    return Either.left(`expected true or false (also on/off, yes/no, 1/0), ${got(t)}`)
  },
  show: String
}

/** `on`/`off` on the command line, any boolean spelling elsewhere. */
export const onOff: Kind<boolean> = { ...boolean, type: "on | off", choices: ["on", "off"], show: (b) => (b ? "on" : "off") }

export const oneOf = <const T extends string>(...values: ReadonlyArray<T>): Kind<T> => ({
  type: values.join(" | "),
  choices: values,
  parse: (t) =>
    (values as ReadonlyArray<string>).includes(t.trim())
      ? Either.right(t.trim() as T)
      : Either.left(`expected one of ${values.join(", ")}, ${got(t)}`),
  show: (v) => v
})

/** A listener `host:port`; port 0 asks the OS for a free one. */
export const listenAddress: Kind<string> = {
  type: "host:port",
  parse: (t) =>
    parseHostPort(t.trim(), { allowPortZero: true }) === undefined
      ? Either.left(`expected host:port with a port in 0..65535 (0 = any free port), ${got(t)}`)
      : Either.right(t.trim()),
  show: (s) => s
}

/** An address to dial `host:port`. */
export const dialAddress: Kind<string> = {
  type: "host:port",
  parse: (t) =>
    parseHostPort(t.trim()) === undefined ? Either.left(`expected host:port with a port in 1..65535, ${got(t)}`) : Either.right(t.trim()),
  show: (s) => s
}

/**
 * Coordinator addresses `host:port[,host:port…]`, tried in turn on failure; kept as the
 * text so every consumer splits it the one way (parseHostPortList).
 */
export const coordinatorList = (options: { readonly standalone?: boolean } = {}): Kind<string> => ({
  type: "host:port[,host:port…]",
  parse: (t) => {
    if (options.standalone === true && t.trim() === "") return Either.right("")
    return parseHostPortList(t) === undefined
      ? Either.left(
          `expected one or more comma-separated host:port coordinator addresses (ports 1..65535)${options.standalone === true ? ', or "" for none' : ""}, ${got(t)}`
        )
      : Either.right(t.split(",").map((e) => e.trim()).filter((e) => e !== "").join(","))
  },
  show: (s) => (s === "" ? '""' : s)
})

const splitList = (t: string, separators: RegExp) =>
  t
    .split(separators)
    .map((p) => p.trim())
    .filter((p) => p.length > 0)

/** Strings separated by commas (or `separators`); a repeated flag adds one entry each. */
export const list = (itemType: string, separators: RegExp = /,/): Kind<ReadonlyArray<string>> => ({
  type: `list of ${itemType}`,
  parse: (t) => Either.right(splitList(t, separators)),
  many: (texts) => Either.right(texts.map((t) => t.trim()).filter((t) => t.length > 0)),
  show: (l) => l.join(",")
})

/** Positive whole numbers separated by commas. */
export const integerList: Kind<ReadonlyArray<number>> = {
  type: "list of integers",
  parse: (t) => {
    const parts = splitList(t, /,/)
    const values = parts.map(Number)
    return parts.length === 0 || values.some((v) => !Number.isSafeInteger(v) || v < 1)
      ? Either.left(`expected a comma-separated list of positive whole numbers, ${got(t)}`)
      : Either.right(values)
  },
  show: (l) => l.join(",")
}

/** A secret: kept out of logs and error messages. */
export const secret: Kind<Redacted.Redacted<string>> = {
  type: "secret",
  parse: (t) => Either.right(Redacted.make(t)),
  show: () => "<secret>"
}

/** `kind`, or unset (`undefined`); an empty value counts as unset. */
export const optional = <A>(kind: Kind<A>): Kind<A | undefined> => ({
  type: kind.type,
  ...(kind.choices !== undefined ? { choices: kind.choices } : {}),
  parse: (t) => (t === "" ? Either.right(undefined) : kind.parse(t)),
  show: (v) => (v === undefined ? "unset" : kind.show(v))
})
