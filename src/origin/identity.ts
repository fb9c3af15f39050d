/**
 * The stub's emulated identity endpoints, each issuing tokens from the shared TokenIssuer:
 *  - the GCE metadata server: `GET /computeMetadata/v1/instance/service-accounts/default/token`
 *    with `Metadata-Flavor: Google` (anything without that header is refused with 403, as
 *    the real server does), reached by pointing `GCE_METADATA_HOST` at the stub;
 *  - Google's OAuth token endpoint for the JWT bearer grant: `POST /_talon/oauth2/token`
 *    (a service-account key file's `token_uri`). The assertion must be a well-formed RS256
 *    JWT whose `aud` is this endpoint and whose `exp` is in the future; the signature is
 *    not checked (the stub holds no keys).
 */
import type { Ctx } from "./context.js"
import { header } from "../http/context.js"
import { readBounded } from "./upload.js"

export const METADATA_TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
export const OAUTH_TOKEN_PATH = "/_talon/oauth2/token"

const sendJson = (ctx: Ctx, status: number, value: unknown, headers: Record<string, string> = {}) => {
  const body = Buffer.from(JSON.stringify(value))
  ctx.res.writeHead(status, { ...headers, "Content-Type": "application/json; charset=utf-8", "Content-Length": body.length })
  ctx.res.end(body)
}

/** Whether the request is for an identity endpoint (routed before any storage protocol). */
export const isIdentityPath = (pathname: string): boolean =>
  pathname.startsWith("/computeMetadata/") || pathname === OAUTH_TOKEN_PATH

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
  const now = Math.floor(Date.now() / 1000)
  if (typeof claims.exp !== "number" || claims.exp <= now) return invalid("the assertion has expired (check the clock)")
  if (typeof claims.iat !== "number" || claims.iat > now + 300) return invalid("the assertion was issued in the future (check the clock)")
  grant(ctx, "jwt")
}

export const handleIdentity = async (ctx: Ctx, pathname: string): Promise<void> => {
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
