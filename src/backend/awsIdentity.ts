/**
 * Temporary AWS credentials for the S3 backend, in place of a static key pair:
 *  - a projected web-identity token (EKS IRSA / pod identity federation): the file named by
 *    `AWS_WEB_IDENTITY_TOKEN_FILE` is exchanged at STS (`AssumeRoleWithWebIdentity`) for the
 *    role `AWS_ROLE_ARN`; the file is re-read at every exchange, as the kubelet rotates it;
 *  - EC2 instance metadata, IMDSv2: a session token (`PUT /latest/api/token`), then the
 *    instance role's credentials.
 * Both yield an access key, a secret and a session token with an expiry; bearerTokens.ts
 * caches and renews them.
 */
import { FileSystem } from "@effect/platform"
import { NodeFileSystem } from "@effect/platform-node"
import { Effect, Redacted, Schema } from "effect"
import { CredentialError, type Expiring, type TokenSource } from "./bearerTokens.js"
import type { OriginRequest, Transport } from "./http.js"
import { originRequest } from "./originCalls.js"
import { child, parseXml, text } from "./xml.js"

export interface AwsSessionCredentials {
  readonly accessKeyId: string
  readonly secretAccessKey: Redacted.Redacted<string>
  readonly sessionToken: Redacted.Redacted<string>
}

export type AwsIdentity =
  | {
      readonly _tag: "WebIdentity"
      readonly roleArn: string
      readonly tokenFile: string
      readonly sessionName: string
      /** STS root, e.g. `https://sts.us-east-1.amazonaws.com`. */
      readonly stsEndpoint: string
    }
  | {
      readonly _tag: "Imds"
      /** e.g. `http://169.254.169.254`. */
      readonly endpoint: string
    }

export const DEFAULT_IMDS_ENDPOINT = "http://169.254.169.254"

const request = originRequest

const send = (transport: Transport, source: string, req: OriginRequest) =>
  transport
    .fetch(req, { object: source, operation: "credentials" })
    .pipe(Effect.mapError((e) => new CredentialError({ source, retryable: e.retryable, detail: e.detail })))

/** Why an endpoint said no, from its body, without echoing anything secret (error bodies carry none). */
const refusal = (source: string, status: number, body: Buffer): CredentialError => {
  const doc = parseXml(body.toString("utf8"))
  const error = child(child(doc, "ErrorResponse"), "Error") ?? child(doc, "Error")
  const code = text(child(error, "Code"))?.trim()
  const message = text(child(error, "Message"))?.trim()
  const reason = code === undefined ? body.toString("utf8").slice(0, 200).replace(/\s+/g, " ").trim() : `${code}${message ? `: ${message}` : ""}`
  return new CredentialError({ source, retryable: status === 429 || status >= 500, detail: `HTTP ${status}${reason ? ` (${reason})` : ""}` })
}

const expiryOf = (source: string, value: string | undefined): Effect.Effect<number, CredentialError> => {
  const ms = value === undefined ? Number.NaN : Date.parse(value)
  return Number.isNaN(ms)
    ? Effect.fail(new CredentialError({ source, retryable: false, detail: "the answer has no readable Expiration" }))
    : Effect.succeed(ms)
}

const webIdentity = (transport: Transport, id: Extract<AwsIdentity, { _tag: "WebIdentity" }>): TokenSource<AwsSessionCredentials> => {
  const source = `STS AssumeRoleWithWebIdentity at ${id.stsEndpoint} (role ${id.roleArn}, token file ${id.tokenFile})`
  return {
    name: source,
    fetch: Effect.gen(function* () {
      const token = yield* FileSystem.FileSystem.pipe(
        Effect.flatMap((fs) => fs.readFileString(id.tokenFile)),
        Effect.provide(NodeFileSystem.layer),
        Effect.mapError((e) => new CredentialError({ source, retryable: false, detail: `cannot read the web-identity token file: ${e.message}` }))
      )
      const form = new URLSearchParams({
        Action: "AssumeRoleWithWebIdentity",
        Version: "2011-06-15",
        RoleArn: id.roleArn,
        RoleSessionName: id.sessionName,
        WebIdentityToken: token.trim(),
        DurationSeconds: "3600"
      })
      const res = yield* send(
        transport,
        source,
        request(id.stsEndpoint, "POST", "/", { "content-type": "application/x-www-form-urlencoded" }, Buffer.from(form.toString()))
      )
      if (res.status !== 200) return yield* refusal(source, res.status, res.body)
      const result = child(child(parseXml(res.body.toString("utf8")), "AssumeRoleWithWebIdentityResponse"), "AssumeRoleWithWebIdentityResult")
      const creds = child(result, "Credentials")
      const accessKeyId = text(child(creds, "AccessKeyId"))?.trim()
      const secret = text(child(creds, "SecretAccessKey"))?.trim()
      const session = text(child(creds, "SessionToken"))?.trim()
      if (!accessKeyId || !secret || !session) {
        return yield* new CredentialError({ source, retryable: false, detail: "the answer has no Credentials (AccessKeyId, SecretAccessKey, SessionToken)" })
      }
      const expiresAtMs = yield* expiryOf(source, text(child(creds, "Expiration"))?.trim())
      return {
        value: { accessKeyId, secretAccessKey: Redacted.make(secret), sessionToken: Redacted.make(session) },
        expiresAtMs
      } satisfies Expiring<AwsSessionCredentials>
    })
  }
}

const ImdsCredentials = Schema.Struct({
  AccessKeyId: Schema.String,
  SecretAccessKey: Schema.String,
  Token: Schema.String,
  Expiration: Schema.String
})

const imds = (transport: Transport, endpoint: string): TokenSource<AwsSessionCredentials> => {
  const source = `EC2 instance metadata (IMDSv2) at ${endpoint}`
  const path = "/latest/meta-data/iam/security-credentials/"
  return {
    name: source,
    fetch: Effect.gen(function* () {
      const session = yield* send(transport, source, request(endpoint, "PUT", "/latest/api/token", { "x-aws-ec2-metadata-token-ttl-seconds": "21600" }))
      if (session.status !== 200) return yield* refusal(source, session.status, session.body)
      const headers = { "x-aws-ec2-metadata-token": session.body.toString("utf8").trim() }
      const roles = yield* send(transport, source, request(endpoint, "GET", path, headers))
      if (roles.status !== 200) return yield* refusal(source, roles.status, roles.body)
      const role = roles.body.toString("utf8").split("\n")[0]?.trim() ?? ""
      if (role === "") return yield* new CredentialError({ source, retryable: false, detail: "the instance has no IAM role attached" })
      const res = yield* send(transport, source, request(endpoint, "GET", `${path}${encodeURIComponent(role)}`, headers))
      if (res.status !== 200) return yield* refusal(source, res.status, res.body)
      const creds = yield* Effect.try(() => JSON.parse(res.body.toString("utf8")) as unknown).pipe(
        Effect.flatMap(Schema.decodeUnknown(ImdsCredentials)),
        Effect.mapError(() => new CredentialError({ source, retryable: false, detail: `role ${role}: the answer is not credentials JSON` }))
      )
      return {
        value: {
          accessKeyId: creds.AccessKeyId,
          secretAccessKey: Redacted.make(creds.SecretAccessKey),
          sessionToken: Redacted.make(creds.Token)
        },
        expiresAtMs: yield* expiryOf(source, creds.Expiration)
      } satisfies Expiring<AwsSessionCredentials>
    })
  }
}

export const awsCredentialSource = (transport: Transport, identity: AwsIdentity): TokenSource<AwsSessionCredentials> =>
  identity._tag === "WebIdentity" ? webIdentity(transport, identity) : imds(transport, identity.endpoint)
