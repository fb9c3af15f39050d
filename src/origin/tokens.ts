/**
 * The stub's token issuer: the bearer tokens its emulated identity endpoints hand out (the
 * GCE metadata server, the OAuth JWT grant) and the check its GCS front end makes on every
 * request. Tokens expire on the stub's Clock (`now`); an admin patch can shorten what the
 * stub honours below what it advertises (clock skew, revocation), refuse grants, or expire
 * every token at once, so clients' refresh and refusal paths can be exercised.
 */
import { randomBytes } from "node:crypto"
import { Schema } from "effect"

export const TokenSettings = Schema.Struct({
  /** `expires_in` the endpoints advertise. */
  ttlSeconds: Schema.Number,
  /** How long the stub honours a token; defaults to `ttlSeconds`. Shorter emulates early revocation. */
  honourSeconds: Schema.optional(Schema.Number),
  /** Refuse every grant (an identity without access). */
  refuse: Schema.Boolean
})
export type TokenSettings = typeof TokenSettings.Type
export const TokenSettingsPatch = Schema.partial(TokenSettings)
export type TokenSettingsPatch = typeof TokenSettingsPatch.Type

export type TokenCheck = "ok" | "missing" | "unknown" | "expired"

export type Flow = "metadata" | "jwt" | "sts" | "imds" | "entra" | "msi"

/** Google's tokens start "ya29."; AWS session tokens get a prefix of their own. Either way, recognisably the stub's. */
const prefixOf = (flow: Flow) =>
  flow === "metadata" || flow === "jwt" ? `ya29.stub-${flow}-` : flow === "entra" || flow === "msi" ? `stub-aad-${flow}-` : `stub-session-${flow}-`
const isStubToken = (token: string) => token.startsWith("ya29.stub-") || token.startsWith("stub-session-") || token.startsWith("stub-aad-")

export class TokenIssuer {
  settings: TokenSettings = { ttlSeconds: 3600, refuse: false }
  readonly issued: Record<Flow, number> = { metadata: 0, jwt: 0, sts: 0, imds: 0, entra: 0, msi: 0 }
  refused = 0
  /** Requests turned away for a missing, unknown or expired token. */
  rejected = 0
  private readonly tokens = new Map<string, number>()
  /** IMDSv2 session tokens (which unlock credentials, and are not credentials themselves) → expiry. */
  readonly imdsSessions = new Map<string, number>()

  /** `now`: the stub's Clock, read synchronously by its request handlers. */
  constructor(readonly now: () => number) {}

  update(patch: TokenSettingsPatch): TokenSettings {
    this.settings = { ...this.settings, ...patch }
    return this.settings
  }

  issue(flow: Flow, now: number = this.now()): { readonly token: string; readonly expiresIn: number } {
    // Expired entries are dropped as new ones come, so the map stays as big as the live set.
    for (const [token, until] of this.tokens) if (until <= now) this.tokens.delete(token)
    const token = `${prefixOf(flow)}${randomBytes(18).toString("base64url")}`
    const honour = this.settings.honourSeconds ?? this.settings.ttlSeconds
    this.tokens.set(token, now + honour * 1000)
    this.issued[flow]++
    return { token, expiresIn: this.settings.ttlSeconds }
  }

  check(authorization: string | undefined, now: number = this.now()): TokenCheck {
    const m = authorization === undefined ? null : /^Bearer\s+(\S+)$/i.exec(authorization)
    return this.checkToken(m === null ? undefined : m[1], now)
  }

  /** A bare token (an AWS session token); `missing` when there is none. */
  checkToken(token: string | undefined, now: number = this.now()): TokenCheck {
    const verdict: TokenCheck = token === undefined ? "missing" : this.verdict(token, now)
    if (verdict !== "ok") this.rejected++
    return verdict
  }

  /** Whether a session token is one the stub issued (only those are checked on S3 requests). */
  issuedHere(token: string): boolean {
    return isStubToken(token)
  }

  private verdict(token: string, now: number): TokenCheck {
    const until = this.tokens.get(token)
    if (until === undefined) return isStubToken(token) ? "expired" : "unknown"
    return until > now ? "ok" : "expired"
  }

  /** Every token issued so far stops working (a revocation, or time jumping past them). */
  expireAll(now: number = this.now()): void {
    for (const token of this.tokens.keys()) this.tokens.set(token, now)
  }

  snapshot() {
    return { settings: this.settings, issued: { ...this.issued }, refused: this.refused, rejected: this.rejected, live: this.tokens.size }
  }
}
