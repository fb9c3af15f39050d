/**
 * The admin token check in front of an admin HTTP app (Talon's management security: a
 * shared bearer token, compared in constant time, never logged). Health, readiness and
 * metrics stay open so orchestrators and Prometheus need no secret; every other path,
 * unknown ones included, answers 401 without a valid `Authorization: Bearer <token>`.
 */
import { createHash, timingSafeEqual } from "node:crypto"
import { type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Redacted } from "effect"

const PUBLIC_PATHS: ReadonlySet<string> = new Set(["/healthz", "/readyz", "/metrics"])

const digest = (s: string): Buffer => createHash("sha256").update(s, "utf8").digest()

/** Equal digests of equal length: no early exit tells how much of a guess was right, nor its length. */
export const tokenMatches = (presented: string, expected: Redacted.Redacted<string>): boolean =>
  timingSafeEqual(digest(presented), digest(Redacted.value(expected)))

/** The token in an `Authorization` header, or undefined when there is none of the Bearer kind. */
export const bearerOf = (header: string | undefined): string | undefined =>
  header !== undefined && header.startsWith("Bearer ") ? header.slice(7).trim() : undefined

const pathOf = (url: string): string => {
  const q = url.indexOf("?")
  return q === -1 ? url : url.slice(0, q)
}

export const isPublicAdminPath = (url: string): boolean => PUBLIC_PATHS.has(pathOf(url))

const unauthorized = (message: string) =>
  HttpServerResponse.unsafeJson(
    { error: "unauthorized", message },
    { status: 401, headers: { "www-authenticate": 'Bearer realm="talon-management"', "cache-control": "no-store" } }
  )

/**
 * Wraps `app` so that, with a token, only public paths pass without it. No token: `app` unchanged.
 * `guardsItself` names paths whose routes check the token themselves (the /ui page also takes it
 * from a cookie, which a browser's polls carry).
 */
export const guardAdmin =
  (token: Redacted.Redacted<string> | undefined, guardsItself: (path: string) => boolean = () => false) =>
  <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
    token === undefined
      ? app
      : Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
          if (isPublicAdminPath(request.url) || guardsItself(pathOf(request.url))) return app
          const presented = bearerOf(request.headers["authorization"])
          if (presented === undefined) return Effect.succeed(unauthorized("authentication required: send Authorization: Bearer <TALON_ADMIN_TOKEN>"))
          if (!tokenMatches(presented, token)) return Effect.succeed(unauthorized("the bearer token is not this cluster's admin token"))
          return app
        })
