/**
 * @effect/cli options from a component's schema: the flag, its parser and its `--help`
 * text all come from the setting's one declaration. A flag not given is `None`, so the
 * setting falls through to `TALON_*`, the config file and the default (Setting.resolve).
 */
import { HelpDoc, Options, ValidationError } from "@effect/cli"
import { Effect, Either, Option } from "effect"
import type { Component, Setting } from "./Setting.js"

/** The `--help` line of a setting: what it does, its variable, its default. */
export const describe = (s: Setting<any>): string =>
  `${s.help.replace(/\.$/, "")} (env ${s.env}, default ${s.shownDefault ?? s.kind.show(s.default)}).`

const refuse = (flag: string, why: string, example: string) =>
  Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${flag}: ${why}; e.g. --${flag} ${example}`)))

const checked = <A>(s: Setting<A>, flag: string, parsed: Either.Either<A, string>): Effect.Effect<A, ValidationError.ValidationError> =>
  Either.match(parsed, {
    onLeft: (why) => refuse(flag, why, s.example),
    onRight: (value) => {
      const problem = s.check?.(value)
      return problem === undefined ? Effect.succeed(value) : refuse(flag, problem, s.example)
    }
  })

/** The flag of one setting (it must have one). */
export const flagOf = <A>(s: Setting<A>): Options.Options<Option.Option<A>> => {
  const flag = s.flag
  if (flag === undefined) throw new Error(`${s.env} has no flag`)
  if (s.presence !== undefined) {
    const value = s.presence
    // A flag without a value is never absent to @effect/cli (false when not given): only its presence is a setting.
    return Options.boolean(flag).pipe(
      Options.withDescription(describe(s)),
      Options.map((given) => (given ? Option.some(value) : Option.none()))
    )
  }
  const many = s.kind.many
  if (many !== undefined) {
    return Options.text(flag).pipe(
      Options.withPseudoName(s.kind.type.replace(/^list of /, "")),
      Options.repeated,
      Options.mapEffect((texts) => (texts.length === 0 ? Effect.succeed(Option.none<A>()) : Effect.map(checked(s, flag, many(texts)), Option.some))),
      Options.withDescription(describe(s))
    )
  }
  const base = s.kind.choices === undefined ? Options.text(flag) : Options.choice(flag, s.kind.choices)
  return base.pipe(
    Options.withPseudoName(s.kind.type),
    Options.mapEffect((text) => checked(s, flag, s.kind.parse(text))),
    Options.withDescription(describe(s)),
    Options.optional
  )
}

export type Flags<T, K extends keyof T> = { readonly [P in K]: Options.Options<Option.Option<T[P]>> }

/** The flags of the named settings (all that have one when `keys` is omitted). */
export const flagsOf = <T, K extends keyof T & string>(c: Component<T>, keys: ReadonlyArray<K>): Flags<T, K> => {
  const out: Partial<Flags<T, K>> = {}
  for (const key of keys) out[key] = flagOf(c.settings[key])
  return out as Flags<T, K>
}

/** Every setting of `c` that has a flag. */
export const flaggedKeys = <T>(c: Component<T>): ReadonlyArray<keyof T & string> =>
  (Object.keys(c.settings) as Array<keyof T & string>).filter((k) => c.settings[k].flag !== undefined)

/** Parsed flags → the explicit settings they give (absent flags left out); only `keys` when given. */
export const explicitFrom = <T, K extends keyof T>(
  parsed: { readonly [P in K]: Option.Option<T[P]> },
  keys: ReadonlyArray<K> = Object.keys(parsed) as Array<K>
): Partial<T> => {
  const out: Partial<T> = {}
  for (const key of keys) {
    const value = parsed[key]
    if (Option.isSome(value)) out[key] = value.value
  }
  return out
}
