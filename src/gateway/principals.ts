/**
 * Gateway principals, in Talon's file shapes: S3 client identities (access key → principal),
 * Azure client identities (account key → principal) and an allow-only grant list (principal,
 * protocol, provider account, bucket/container, optional key prefix, operations). Default
 * deny: a signed request whose principal has no grant covering its operation, bucket and key
 * is refused. The files are JSON, re-read every `reloadMs`; a file that no longer parses
 * leaves the last good set in force and says which file is wrong (never its contents: they
 * hold secrets).
 *
 *   s3 identities  {"identities": [{"access_key_id", "secret_access_key", "session_token"?, "principal", "provider_account"}]}
 *   azure          {"identities": [{"account_key", "principal", "provider_account"}]}   (provider_account = the account clients sign as)
 *   authorization  {"grants": [{"id", "principal", "protocol": "s3"|"azure", "provider_account", "namespace", "prefix"?, "operations": [...]}]}
 */
import { Data, Effect, Either, ParseResult, Redacted, Schema } from "effect"

export const OPERATIONS = ["stat", "probe", "read", "list", "write", "delete"] as const
export type GrantOperation = (typeof OPERATIONS)[number]

const S3Identity = Schema.Struct({
  access_key_id: Schema.NonEmptyString,
  secret_access_key: Schema.NonEmptyString,
  session_token: Schema.optional(Schema.String),
  principal: Schema.NonEmptyString,
  provider_account: Schema.String
})
const S3IdentityFile = Schema.Struct({ identities: Schema.Array(S3Identity) })

const AzureIdentity = Schema.Struct({
  account_key: Schema.NonEmptyString,
  principal: Schema.NonEmptyString,
  provider_account: Schema.NonEmptyString
})
const AzureIdentityFile = Schema.Struct({ identities: Schema.Array(AzureIdentity) })

const Grant = Schema.Struct({
  id: Schema.NonEmptyString,
  principal: Schema.NonEmptyString,
  protocol: Schema.Literal("s3", "azure"),
  provider_account: Schema.String,
  namespace: Schema.NonEmptyString,
  prefix: Schema.optional(Schema.String),
  operations: Schema.Array(Schema.Literal(...OPERATIONS))
})
const AuthorizationFile = Schema.Struct({ grants: Schema.Array(Grant) })

export type Grant = typeof Grant.Type

export interface Principal {
  readonly name: string
  readonly providerAccount: string
}

export interface S3Key extends Principal {
  readonly secret: Redacted.Redacted<string>
  readonly sessionToken: string | undefined
}

export interface AzureKey extends Principal {
  readonly key: Redacted.Redacted<string>
}

/** One consistent set: a request is judged against the set that was current when it arrived. */
export interface Directory {
  readonly s3: ReadonlyMap<string, S3Key>
  /** By account name; several keys may sign as one account. */
  readonly azure: ReadonlyMap<string, ReadonlyArray<AzureKey>>
  readonly grants: ReadonlyArray<Grant>
}

export class PrincipalFileError extends Data.TaggedError("PrincipalFileError")<{
  readonly file: string
  readonly path: string
  readonly detail: string
}> {
  override get message() {
    return `gateway ${this.file} file ${this.path} is unusable: ${this.detail}; fix it (the last good one stays in force while the gateway runs)`
  }
}

/** What went wrong where, without the offending values (identity files hold secrets). */
const where = (e: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(e)
  return issues
    .slice(0, 3)
    .map((i) => `${i.path.length === 0 ? "the top level" : i.path.join(".")}: ${i._tag === "Missing" ? "is missing" : "has the wrong type or value"}`)
    .join("; ")
}

const parse = <A, I>(schema: Schema.Schema<A, I>, file: string, path: string, bytes: string): Either.Either<A, PrincipalFileError> => {
  let json: unknown
  try {
    json = JSON.parse(bytes)
  } catch {
    return Either.left(new PrincipalFileError({ file, path, detail: "it is not valid JSON" }))
  }
  return Either.mapLeft(Schema.decodeUnknownEither(schema, { onExcessProperty: "error" })(json), (e) => new PrincipalFileError({ file, path, detail: where(e) }))
}

export interface PrincipalFiles {
  readonly s3Identities?: string | undefined
  readonly azureIdentities?: string | undefined
  readonly authorization: string
}

/** The contents of each configured file, by role. */
export interface PrincipalTexts {
  readonly s3Identities?: string | undefined
  readonly azureIdentities?: string | undefined
  readonly authorization: string
}

/** Builds a directory from the files' texts; the first unusable file fails it. */
export const compile = (files: PrincipalFiles, texts: PrincipalTexts): Either.Either<Directory, PrincipalFileError> =>
  Either.gen(function* () {
    const s3 = new Map<string, S3Key>()
    if (files.s3Identities !== undefined && texts.s3Identities !== undefined) {
      const parsed = yield* parse(S3IdentityFile, "S3 client identity", files.s3Identities, texts.s3Identities)
      for (const i of parsed.identities) {
        if (s3.has(i.access_key_id)) {
          return yield* Either.left(new PrincipalFileError({ file: "S3 client identity", path: files.s3Identities, detail: "an access_key_id appears twice" }))
        }
        s3.set(i.access_key_id, {
          name: i.principal,
          providerAccount: i.provider_account,
          secret: Redacted.make(i.secret_access_key),
          sessionToken: i.session_token
        })
      }
    }
    const azure = new Map<string, Array<AzureKey>>()
    if (files.azureIdentities !== undefined && texts.azureIdentities !== undefined) {
      const parsed = yield* parse(AzureIdentityFile, "Azure client identity", files.azureIdentities, texts.azureIdentities)
      for (const i of parsed.identities) {
        const keys = azure.get(i.provider_account) ?? []
        keys.push({ name: i.principal, providerAccount: i.provider_account, key: Redacted.make(i.account_key) })
        azure.set(i.provider_account, keys)
      }
    }
    const authorization = yield* parse(AuthorizationFile, "authorization", files.authorization, texts.authorization)
    const ids = new Set<string>()
    for (const g of authorization.grants) {
      if (ids.has(g.id)) {
        return yield* Either.left(new PrincipalFileError({ file: "authorization", path: files.authorization, detail: `grant id ${JSON.stringify(g.id)} appears twice` }))
      }
      ids.add(g.id)
    }
    return { s3, azure, grants: authorization.grants }
  })

/** What one request asks to do: the operation, the bucket/container and the key (or the listing's prefix). */
export interface Access {
  readonly protocol: "s3" | "azure"
  readonly operation: GrantOperation
  readonly namespace: string
  /** The object's key, the listing's prefix (empty = the whole bucket), or undefined for bucket-wide operations. */
  readonly key: string | undefined
}

/** The grant that allows `access` to `principal`, if any. */
export const allowing = (directory: Directory, principal: Principal, access: Access): Grant | undefined =>
  directory.grants.find(
    (g) =>
      g.principal === principal.name &&
      g.protocol === access.protocol &&
      g.provider_account === principal.providerAccount &&
      g.namespace === access.namespace &&
      g.operations.includes(access.operation) &&
      (g.prefix === undefined || g.prefix === "" || (access.key !== undefined && access.key.startsWith(g.prefix)))
  )

/** Reads the configured files (absent ones are skipped) through `read`. */
export const readTexts = <E>(files: PrincipalFiles, read: (path: string) => Effect.Effect<string, E>): Effect.Effect<PrincipalTexts, E> =>
  Effect.all({
    s3Identities: files.s3Identities === undefined ? Effect.succeed(undefined) : read(files.s3Identities),
    azureIdentities: files.azureIdentities === undefined ? Effect.succeed(undefined) : read(files.azureIdentities),
    authorization: read(files.authorization)
  })
