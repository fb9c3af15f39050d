/**
 * The stub's emulated identity endpoints, each issuing tokens from the shared TokenIssuer:
 *  - the GCE metadata server: `GET /computeMetadata/v1/instance/service-accounts/default/token`
 *    with `Metadata-Flavor: Google` (anything without that header is refused with 403, as
 *    the real server does), reached by pointing `GCE_METADATA_HOST` at the stub;
 *  - Google's OAuth token endpoint for the JWT bearer grant: `POST /_talon/oauth2/token`
 *    (a service-account key file's `token_uri`). The assertion must be a well-formed RS256
 *    JWT whose `aud` is this endpoint and whose `exp` is in the future; the signature is
 *    not checked (the stub holds no keys);
 *  - AWS STS `AssumeRoleWithWebIdentity`: `POST /_talon/sts` (the STS endpoint), form-encoded,
 *    with a role ARN and a non-empty web-identity token (not verified);
 *  - EC2 instance metadata, IMDSv2 only: `PUT /latest/api/token` with
 *    `X-aws-ec2-metadata-token-ttl-seconds`, then `GET /latest/meta-data/iam/security-credentials/[role]`
 *    with `X-aws-ec2-metadata-token` (401 without one, as IMDSv2 requires), reached by pointing
 *    `AWS_EC2_METADATA_SERVICE_ENDPOINT` at the stub.
 *  - Entra ID's token endpoint for a federated client assertion (AKS workload identity):
 *    `POST /_talon/entra/<tenant>/oauth2/v2.0/token` (set `AZURE_AUTHORITY_HOST` to `<stub>/_talon/entra`);
 *  - Azure's managed identity endpoint: `GET /metadata/identity/oauth2/token` with `Metadata: true`.
 * Entra bearer tokens are checked on Azure requests that carry one the stub issued (an expired one
 * gets 401 InvalidAuthenticationInfo); AWS session tokens are checked on S3 requests that carry one the stub issued (s3.ts is
 * otherwise signature-blind): an expired one gets S3's 400 ExpiredToken.
 */
import { randomBytes } from "node:crypto"
import type { Ctx } from "./context.js"
import { header } from "../http/context.js"
import { readBounded } from "./upload.js"

export const STS_PATH = "/_talon/sts"
export const ENTRA_PREFIX = "/_talon/entra/"
const AZURE_MSI_PATH = "/metadata/identity/oauth2/token"
export const IMDS_ROLE = "talon-node-role"
const IMDS_TOKEN_PATH = "/latest/api/token"
const IMDS_CREDENTIALS_PATH = "/latest/meta-data/iam/security-credentials/"
export const METADATA_TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
export const OAUTH_TOKEN_PATH = "/_talon/oauth2/token"

const sendJson = (ctx: Ctx, status: number, value: unknown, headers: Record<string, string> = {}) => {
  const body = Buffer.from(JSON.stringify(value))
  ctx.res.writeHead(status, { ...headers, "Content-Type": "application/json; charset=utf-8", "Content-Length": body.length })
  ctx.res.end(body)
}

/**
 * Whether the request is for an identity endpoint (routed before any storage protocol). The
 * IMDS paths are also valid S3 keys, so they count only with IMDSv2's headers.
 */
export const isIdentityRequest = (pathname: string, headers: Record<string, unknown>): boolean =>
  pathname.startsWith("/computeMetadata/") ||
  pathname === OAUTH_TOKEN_PATH ||
  pathname === STS_PATH ||
  pathname === `${STS_PATH}/` ||
  pathname.startsWith(ENTRA_PREFIX) ||
  (pathname === AZURE_MSI_PATH && headers.metadata !== undefined) ||
  (pathname.startsWith("/latest/") &&
    (headers["x-aws-ec2-metadata-token-ttl-seconds"] !== undefined || headers["x-aws-ec2-metadata-token"] !== undefined))

const sendXml = (ctx: Ctx, status: number, body: string, headers: Record<string, string> = {}) => {
  const buf = Buffer.from(body)
  ctx.res.writeHead(status, { ...headers, "Content-Type": "text/xml", "Content-Length": buf.length })
  ctx.res.end(buf)
}

const sendText = (ctx: Ctx, status: number, body: string) => {
  const buf = Buffer.from(body)
  ctx.res.writeHead(status, { "Content-Type": "text/plain", "Content-Length": buf.length })
  ctx.res.end(buf)
}

const stsError = (ctx: Ctx, status: number, code: string, message: string) =>
  sendXml(
    ctx,
    status,
    `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>${code}</Code><Message>${message}</Message></Error><RequestId>${ctx.requestId}</RequestId></ErrorResponse>`
  )

/** An access key id, a secret and a session token the stub will honour for the token's lifetime. */
const sessionCredentials = (ctx: Ctx, flow: "sts" | "imds") => {
  const { token, expiresIn } = ctx.state.tokens.issue(flow)
  const suffix = token.slice(-16).toUpperCase().replace(/[^A-Z0-9]/g, "X")
  return {
    accessKeyId: `ASIA${suffix}`,
    secret: `stub-secret-${token.slice(-24)}`,
    token,
    expiration: new Date(ctx.state.tokens.now() + expiresIn * 1000).toISOString()
  }
}

const assumeRoleWithWebIdentity = async (ctx: Ctx) => {
  const body = await readBounded(ctx.req, 64 * 1024)
  const form = new URLSearchParams(body?.toString("utf8") ?? "")
  for (const [k, v] of ctx.query) if (!form.has(k)) form.set(k, v)
  if (form.get("Action") !== "AssumeRoleWithWebIdentity") return stsError(ctx, 400, "InvalidAction", "The origin stub's STS answers only AssumeRoleWithWebIdentity.")
  const role = form.get("RoleArn") ?? ""
  if (!/^arn:aws[\w-]*:iam::\d{12}:role\/.+/.test(role)) return stsError(ctx, 400, "ValidationError", "RoleArn must be an IAM role ARN.")
  if ((form.get("WebIdentityToken") ?? "") === "") return stsError(ctx, 400, "InvalidIdentityToken", "No web identity token was given.")
  if ((form.get("RoleSessionName") ?? "") === "") return stsError(ctx, 400, "ValidationError", "RoleSessionName is required.")
  if (ctx.state.tokens.settings.refuse) {
    ctx.state.tokens.refused++
    return stsError(ctx, 403, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity (refused by the origin stub).")
  }
  const c = sessionCredentials(ctx, "sts")
  sendXml(
    ctx,
    200,
    `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>` +
      `<Credentials><AccessKeyId>${c.accessKeyId}</AccessKeyId><SecretAccessKey>${c.secret}</SecretAccessKey><SessionToken>${c.token}</SessionToken><Expiration>${c.expiration}</Expiration></Credentials>` +
      `<AssumedRoleUser><Arn>${role}/${form.get("RoleSessionName")}</Arn></AssumedRoleUser>` +
      `</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>${ctx.requestId}</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`
  )
}

const instanceMetadata = (ctx: Ctx, pathname: string) => {
  ctx.req.resume()
  if (pathname === IMDS_TOKEN_PATH) {
    if (ctx.method !== "PUT") return sendText(ctx, 405, "IMDSv2 session tokens are made with PUT")
    const ttl = Number(header(ctx, "x-aws-ec2-metadata-token-ttl-seconds"))
    if (!Number.isInteger(ttl) || ttl < 1 || ttl > 21600) return sendText(ctx, 400, "X-aws-ec2-metadata-token-ttl-seconds must be 1..21600")
    const session = `imds-session-${randomBytes(12).toString("base64url")}`
    const sessions = ctx.state.tokens.imdsSessions
    for (const [old, until] of sessions) if (until <= ctx.state.tokens.now()) sessions.delete(old)
    sessions.set(session, ctx.state.tokens.now() + ttl * 1000)
    return sendText(ctx, 200, session)
  }
  const session = header(ctx, "x-aws-ec2-metadata-token") ?? ""
  if ((ctx.state.tokens.imdsSessions.get(session) ?? 0) <= ctx.state.tokens.now()) return sendText(ctx, 401, "")
  if (pathname === IMDS_CREDENTIALS_PATH) {
    if (ctx.state.tokens.settings.refuse) return sendText(ctx, 404, "")
    return sendText(ctx, 200, IMDS_ROLE)
  }
  if (pathname === `${IMDS_CREDENTIALS_PATH}${IMDS_ROLE}`) {
    if (ctx.state.tokens.settings.refuse) {
      ctx.state.tokens.refused++
      return sendText(ctx, 404, "")
    }
    const c = sessionCredentials(ctx, "imds")
    const body = { Code: "Success", LastUpdated: new Date().toISOString(), Type: "AWS-HMAC", AccessKeyId: c.accessKeyId, SecretAccessKey: c.secret, Token: c.token, Expiration: c.expiration }
    return sendJson(ctx, 200, body)
  }
  return sendText(ctx, 404, "")
}

const grant = (ctx: Ctx, flow: "metadata" | "jwt") => {
  const issuer = ctx.state.tokens
  if (issuer.settings.refuse) {
    issuer.refused++
    return flow === "metadata"
      ? sendJson(ctx, 403, { error: "access_denied", error_description: "this instance has no service account with access (refused by the origin stub)" })
      : sendJson(ctx, 400, { error: "invalid_grant", error_description: "the service account is disabled (refused by the origin stub)" })
  }
  const { token, expiresIn } = issuer.issue(flow)
  sendJson(ctx, 200, { access_token: token, expires_in: expiresIn, token_type: "Bearer" }, flow === "metadata" ? { "Metadata-Flavor": "Google" } : {})
}

const claimsOf = (assertion: string): Record<string, unknown> | undefined => {
  const parts = assertion.split(".")
  if (parts.length !== 3) return undefined
  try {
    const head = JSON.parse(Buffer.from(parts[0]!, "base64url").toString("utf8")) as Record<string, unknown>
    const claims = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8")) as Record<string, unknown>
    if (head.alg !== "RS256" || parts[2]!.length === 0) return undefined
    return claims
  } catch {
    return undefined
  }
}

const jwtGrant = async (ctx: Ctx) => {
  const body = await readBounded(ctx.req, 64 * 1024)
  const form = new URLSearchParams(body?.toString("utf8") ?? "")
  const invalid = (why: string) => sendJson(ctx, 400, { error: "invalid_grant", error_description: why })
  if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") {
    return sendJson(ctx, 400, { error: "unsupported_grant_type", error_description: "grant_type must be urn:ietf:params:oauth:grant-type:jwt-bearer" })
  }
  const claims = claimsOf(form.get("assertion") ?? "")
  if (claims === undefined) return invalid("the assertion is not an RS256 JWT")
  if (typeof claims.iss !== "string" || typeof claims.scope !== "string") return invalid("the assertion needs iss and scope")
  const expected = `${ctx.state.url}${OAUTH_TOKEN_PATH}`
  if (claims.aud !== expected) return invalid(`the assertion's aud must be ${expected}`)
  const now = Math.floor(ctx.state.tokens.now() / 1000)
  if (typeof claims.exp !== "number" || claims.exp <= now) return invalid("the assertion has expired (check the clock)")
  if (typeof claims.iat !== "number" || claims.iat > now + 300) return invalid("the assertion was issued in the future (check the clock)")
  grant(ctx, "jwt")
}

const entraError = (ctx: Ctx, status: number, error: string, description: string) =>
  sendJson(ctx, status, { error, error_description: description, error_codes: [], timestamp: new Date().toISOString() })

const entra = async (ctx: Ctx, pathname: string) => {
  const m = /^\/_talon\/entra\/([^/]+)\/oauth2\/v2\.0\/token$/.exec(pathname)
  if (m === null || ctx.method !== "POST") return entraError(ctx, 404, "invalid_request", "POST /<tenant>/oauth2/v2.0/token")
  const form = new URLSearchParams((await readBounded(ctx.req, 64 * 1024))?.toString("utf8") ?? "")
  if (form.get("grant_type") !== "client_credentials") return entraError(ctx, 400, "unsupported_grant_type", "grant_type must be client_credentials")
  if (form.get("client_assertion_type") !== "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" || (form.get("client_assertion") ?? "") === "") {
    return entraError(ctx, 400, "invalid_client", "AADSTS700024: a federated client assertion (jwt-bearer) is required")
  }
  if ((form.get("client_id") ?? "") === "") return entraError(ctx, 400, "invalid_request", "AADSTS900144: client_id is required")
  if (!(form.get("scope") ?? "").endsWith("/.default")) return entraError(ctx, 400, "invalid_scope", "scope must be <resource>/.default")
  if (ctx.state.tokens.settings.refuse) {
    ctx.state.tokens.refused++
    return entraError(ctx, 401, "invalid_client", "AADSTS70021: no matching federated identity record (refused by the origin stub)")
  }
  const { token, expiresIn } = ctx.state.tokens.issue("entra")
  sendJson(ctx, 200, { token_type: "Bearer", expires_in: expiresIn, ext_expires_in: expiresIn, access_token: token })
}

const managedIdentity = (ctx: Ctx) => {
  ctx.req.resume()
  if (header(ctx, "metadata") !== "true") return entraError(ctx, 400, "invalid_request", "Required metadata header not specified")
  if ((ctx.query.get("resource") ?? "") === "" || ctx.query.get("api-version") === null) {
    return entraError(ctx, 400, "invalid_request", "resource and api-version are required")
  }
  if (ctx.state.tokens.settings.refuse) {
    ctx.state.tokens.refused++
    return entraError(ctx, 400, "invalid_request", "Identity not found (refused by the origin stub)")
  }
  const { token, expiresIn } = ctx.state.tokens.issue("msi")
  const now = Math.floor(ctx.state.tokens.now() / 1000)
  sendJson(ctx, 200, {
    access_token: token,
    expires_in: String(expiresIn),
    expires_on: String(now + expiresIn),
    not_before: String(now),
    resource: ctx.query.get("resource"),
    token_type: "Bearer"
  })
}

export const handleIdentity = async (ctx: Ctx, pathname: string): Promise<void> => {
  if (pathname.startsWith(ENTRA_PREFIX)) return entra(ctx, pathname)
  if (pathname === AZURE_MSI_PATH) return managedIdentity(ctx)
  if (pathname === STS_PATH || pathname === `${STS_PATH}/`) {
    if (ctx.method !== "POST" && ctx.method !== "GET") return stsError(ctx, 405, "InvalidAction", "POST an STS request")
    return assumeRoleWithWebIdentity(ctx)
  }
  if (pathname.startsWith("/latest/")) return instanceMetadata(ctx, pathname)
  if (pathname === OAUTH_TOKEN_PATH) {
    if (ctx.method !== "POST") return sendJson(ctx, 405, { error: "invalid_request", error_description: "POST a token request" })
    return jwtGrant(ctx)
  }
  if (header(ctx, "metadata-flavor")?.toLowerCase() !== "google") {
    ctx.req.resume()
    return sendJson(ctx, 403, { error: "Missing required header: Metadata-Flavor: Google" })
  }
  ctx.req.resume()
  if (pathname === METADATA_TOKEN_PATH && ctx.method === "GET") return grant(ctx, "metadata")
  return sendJson(ctx, 404, { error: `the origin stub emulates only ${METADATA_TOKEN_PATH} of the metadata server` })
}
