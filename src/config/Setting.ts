/**
 * One declaration per setting, one schema per component. Everything that reads,
 * checks or documents a setting (Effect `Config` resolution, the @effect/cli flags and
 * their `--help`, docs/configuration.md) is derived from these, so the four cannot
 * disagree. Resolution: explicit value (a flag, or a program embedding the component)
 * > `TALON_*` through Effect `Config` (the environment, then the `--config` file: see
 * src/cli/configFile.ts) > default.
 */
import { Config, ConfigError, Effect, Either, Option } from "effect"
import type { Kind } from "./kinds.js"

export interface Setting<A> {
  readonly kind: Kind<A>
  /** The environment variable; the config-file key is derived from it (TALON_WORKER_CAPACITY = [worker] capacity). */
  readonly env: string
  /** Command-line flag without dashes; absent for settings read only from the environment or file (secrets). */
  readonly flag?: string | undefined
  /** A flag that takes no value: its presence sets this value (`--seed`, `--no-hit-table`). */
  readonly presence?: A | undefined
  readonly default: A
  /** The default as docs and `--help` show it, when the value alone would mislead (computed defaults). */
  readonly shownDefault?: string | undefined
  readonly help: string
  /** An example value, quoted in error messages. */
  readonly example: string
  /** A rule on the value: undefined when it holds, else what is wrong ("must be positive"). */
  readonly check?: ((value: A) => string | undefined) | undefined
  /**
   * Talon's names for this setting, where the meaning is the same (its variable; the file
   * key derives from it like ours): an operator's existing environment and files keep working.
   */
  readonly aliases?: ReadonlyArray<string> | undefined
}

export const setting = <A>(kind: Kind<A>, spec: Omit<Setting<A>, "kind">): Setting<A> => ({ kind, ...spec })

/**
 * A setting as a component declares it: under the component's prefix its names follow
 * from its key (`versionTtlMs` → `--version-ttl-ms`, `TALON_WORKER_VERSION_TTL_MS`) and
 * its example from its default, so only what differs is written (src/config/declare.ts).
 */
export interface Declared<A> extends Omit<Setting<A>, "env" | "flag" | "example"> {
  /** The words both names are made of, when not the key's: `data-addr` → `--data-addr`, `TALON_WORKER_DATA_ADDR`. */
  readonly name?: string | undefined
  /** A variable of its own (one shared across components, say): then it has a flag only if it names one. */
  readonly env?: string | undefined
  /** The flag when it differs from the name; `false` for none (secrets are never flags). */
  readonly flag?: string | false | undefined
  readonly example?: string | undefined
}

export type Schema<T> = { readonly [K in keyof T]-?: Setting<T[K]> }

export interface Component<T> {
  /** Heading of its section in docs/configuration.md. */
  readonly name: string
  readonly summary: string
  readonly settings: Schema<T>
  /** Rules across settings: the first broken one, with the setting to blame. */
  readonly check?: ((settings: T) => { readonly key: keyof T; readonly message: string } | undefined) | undefined
  /** Settings computed from others once all are known (a total split per directory), before the checks. */
  readonly derive?: ((settings: T) => T) | undefined
  /** Talon's names whose meaning differs here: setting one stops the component with what to use instead. */
  readonly refused?: ReadonlyArray<RefusedName> | undefined
}

/** A Talon variable (or file key) this project reads differently or not at all, and what to set instead. */
export interface RefusedName {
  readonly env: string
  readonly use: string
  /** Accepted whatever its value, as it changes no reply here (a tuning knob); `use` says why. */
  readonly ignored?: boolean | undefined
}

/** Accepted whatever its value: a Talon tuning knob with no counterpart here, which changes no reply. */
export const ignoredName = (env: string, why: string): RefusedName => ({ env, use: why, ignored: true })

export interface ComponentDeclaration<T> extends Omit<Component<T>, "settings"> {
  /** `TALON_WORKER`: a setting's variable is this and its name, unless it gives its own. */
  readonly prefix?: string
  readonly settings: { readonly [K in keyof T]-?: Declared<T[K]> }
}

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)

const isComplete = <A>(d: Declared<A>): d is Setting<A> & Declared<A> =>
  d.env !== undefined && d.example !== undefined && d.name === undefined && d.flag !== false

const complete = <A>(prefix: string | undefined, key: string, d: Declared<A>): Setting<A> => {
  // A full setting, shared by several components (TALON_CLUSTER_TOKEN), stays the one object they share.
  if (isComplete(d)) return d
  const { name: given, env: ownEnv, flag: ownFlag, example, ...rest } = d
  const name = given ?? kebab(key)
  const env = ownEnv ?? (prefix === undefined ? undefined : `${prefix}_${name.toUpperCase().replace(/-/g, "_")}`)
  if (env === undefined) throw new Error(`setting ${key} needs an env name, or its component a prefix`)
  const flag = ownFlag === false ? undefined : (ownFlag ?? (ownEnv === undefined ? name : undefined))
  return { ...rest, env, ...(flag === undefined ? {} : { flag }), example: example ?? d.kind.show(d.default) }
}

export const component = <T>(c: ComponentDeclaration<T>): Component<T> => {
  const { prefix, settings: declared, ...rest } = c
  const settings: Partial<{ -readonly [K in keyof T]: Setting<T[K]> }> = {}
  for (const key of Object.keys(declared) as Array<keyof T & string>) settings[key] = complete(prefix, key, declared[key])
  return { ...rest, settings: settings as Schema<T> }
}

export const keysOf = <T>(schema: Schema<T>): ReadonlyArray<keyof T & string> => Object.keys(schema) as Array<keyof T & string>

/** `TALON_WORKER_CAPACITY (--capacity)`: how messages name a setting, so a user finds it whichever way they set it. */
export const nameOf = (s: Setting<unknown>): string => (s.flag === undefined ? s.env : `${s.env} (--${s.flag})`)

const shownExample = (s: Setting<unknown>) => `e.g. ${s.env}=${s.example}${s.flag === undefined ? "" : ` or --${s.flag} ${s.example}`}`

/** The error for a setting: its names, what was wrong, an example. */
export const invalid = (s: Setting<any>, why: string, path: ReadonlyArray<string> = [s.env]): ConfigError.ConfigError =>
  ConfigError.InvalidData([...path], `${nameOf(s)}: ${why}; ${shownExample(s)}`)

/** The messages of a ConfigError, one per failure (they name their settings). */
export const messagesOf = (e: ConfigError.ConfigError): ReadonlyArray<string> =>
  ConfigError.reduceWithContext(e, undefined, {
    andCase: (_, l, r) => [...l, ...r],
    orCase: (_, l, r) => [...l, ...r],
    invalidDataCase: (_, path, message) => [message.startsWith("TALON_") || path.length === 0 ? message : `${path.join(".")}: ${message}`],
    missingDataCase: (_, path, message) => [`${path.join(".")}: ${message}`],
    sourceUnavailableCase: (_, path, message) => [`${path.join(".")}: ${message}`],
    unsupportedCase: (_, path, message) => [`${path.join(".")}: ${message}`]
  })

const parsed = <A>(s: Setting<A>, raw: string): Either.Either<A, ConfigError.ConfigError> =>
  Either.flatMap(
    // mapOrFail prefixes the variable's name to the path itself.
    Either.mapLeft(s.kind.parse(raw), (why) => invalid(s, why, [])),
    (value) => {
      const problem = s.check?.(value)
      return problem === undefined ? Either.right(value) : Either.left(invalid(s, `${problem}, got ${JSON.stringify(raw)}`, []))
    }
  )

/**
 * Our name and Talon's for one setting, as given: both set with different values is
 * refused, whichever sources they came from, so a half-migrated deployment cannot run on
 * the value its operator did not mean.
 */
const givenOnce = (s: Setting<any>, given: ReadonlyArray<readonly [string, string]>): Either.Either<string, ConfigError.ConfigError> => {
  const [first, ...rest] = given
  if (first === undefined) return Either.left(ConfigError.MissingData([], `${s.env} is not set`))
  const other = rest.find(([, raw]) => raw !== first[1])
  if (other === undefined) return Either.right(first[1])
  return Either.left(
    invalid(
      s,
      `set twice with different values, ${first[0]}=${JSON.stringify(first[1])} and ${other[0]}=${JSON.stringify(other[1])} (Talon's name is an alias of ours); remove one`,
      []
    )
  )
}

/** The setting as an Effect `Config`: read under our name or Talon's, parsed and checked, failures naming it. */
export const configOf = <A>(s: Setting<A>): Config.Config<A> => {
  const aliases = s.aliases ?? []
  if (aliases.length === 0) return Config.string(s.env).pipe(Config.mapOrFail((raw) => parsed(s, raw)))
  const names = [s.env, ...aliases]
  return Config.all(names.map((name) => Config.option(Config.string(name)))).pipe(
    Config.mapOrFail((values) => {
      const given = names.flatMap((name, i) => Option.match(values[i]!, { onNone: () => [], onSome: (raw) => [[name, raw] as const] }))
      return Either.flatMap(givenOnce(s, given), (raw) => parsed(s, raw))
    })
  )
}

/** The first of `c`'s refused Talon names that is set, as the error saying what to use instead. */
const refusedName = <T>(c: Component<T>): Effect.Effect<void, ConfigError.ConfigError> =>
  Effect.forEach(
    c.refused ?? [],
    (r) =>
      Effect.flatMap(Config.option(Config.string(r.env)), (value) =>
        Option.isSome(value) && r.ignored !== true
          ? Effect.fail(ConfigError.InvalidData([], `${r.env} (Talon's name) is not read here: ${r.use}`))
          : Effect.void
      ),
    { discard: true }
  )

/** Checks every setting's own rule, then the component's cross-setting rules. */
export const validate = <T>(c: Component<T>, given: T): Either.Either<T, ConfigError.ConfigError> => {
  const values = c.derive === undefined ? given : c.derive(given)
  for (const key of keysOf(c.settings)) {
    const s = c.settings[key]
    const problem = s.check?.(values[key])
    if (problem !== undefined) return Either.left(invalid(s, `${problem}, got ${s.kind.show(values[key])}`))
  }
  const broken = c.check?.(values)
  return broken === undefined ? Either.right(values) : Either.left(invalid(c.settings[broken.key], broken.message))
}

/** `c` with some defaults replaced, for a caller that derives them from its own settings. */
export const withDefaults = <T>(c: Component<T>, defaults: Partial<T>): Component<T> => {
  const settings: { -readonly [K in keyof T]-?: Setting<T[K]> } = { ...c.settings }
  for (const key of keysOf(c.settings)) {
    const value = defaults[key]
    if (value !== undefined) settings[key] = { ...c.settings[key], default: value as T[typeof key], shownDefault: undefined }
  }
  return { ...c, settings }
}

/** The environment variable of each setting. */
export const envNamesOf = <T>(c: Component<T>): { readonly [K in keyof T]-?: string } => {
  const out: Partial<Record<keyof T, string>> = {}
  for (const key of keysOf(c.settings)) out[key] = c.settings[key].env
  return out as { readonly [K in keyof T]-?: string }
}

/** Every setting at its default. */
export const defaultsOf = <T>(c: Component<T>): T => {
  const out: Partial<T> = {}
  for (const key of keysOf(c.settings)) out[key] = c.settings[key].default
  return out as T
}

/** explicit > `TALON_*` (environment, then file) > default, validated. */
export const resolve = <T>(c: Component<T>, explicit: Partial<T> = {}): Effect.Effect<T, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    yield* refusedName(c)
    const out: Partial<T> = {}
    for (const key of keysOf(c.settings)) {
      const given = explicit[key]
      if (given !== undefined) {
        out[key] = given
        continue
      }
      const s = c.settings[key]
      out[key] = Option.getOrElse(yield* Config.option(configOf(s)), () => s.default)
    }
    return yield* validate(c, out as T)
  })

/** Exactly these values over the defaults, ignoring the environment (tests, embedding). */
export const resolveOnly = <T>(c: Component<T>, values: Partial<T>): Either.Either<T, ConfigError.ConfigError> => {
  const out: T = { ...defaultsOf(c) }
  for (const key of keysOf(c.settings)) if (values[key] !== undefined) out[key] = values[key] as T[typeof key]
  return validate(c, out)
}
