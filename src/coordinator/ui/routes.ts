/**
 * The management page's routes on the coordinator's admin port: GET /ui (the page) and
 * GET /ui/overview.json (what it polls). With an admin token set, both need it: as
 * `Authorization: Bearer`, or `/ui?token=…` once, which leaves an HttpOnly cookie scoped
 * to /ui so the page's polls carry it.
 */
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, type Redacted } from "effect"
import type { Overview } from "./overview.js"
import { PAGE } from "./page.js"
import { bearerOf, tokenMatches } from "../../http/adminToken.js"

export interface UiSource {
  readonly overview: Effect.Effect<Overview>
  readonly token: Redacted.Redacted<string> | undefined
}

export const UI_PATH = "/ui"
export const UI_OVERVIEW_PATH = "/ui/overview.json"
const COOKIE = "talon_admin_token"

/** The page's routes check the token themselves (a cookie counts too), so the admin guard lets them by. */
export const isUiPath = (path: string): boolean => path === UI_PATH || path.startsWith(`${UI_PATH}/`)

const refused = HttpServerResponse.text(
  "unauthorized: this coordinator has an admin token; open /ui?token=<TALON_ADMIN_TOKEN> or send Authorization: Bearer <token>\n",
  { status: 401, headers: { "www-authenticate": 'Bearer realm="talon"' } }
)

/** The token the request carries, and whether it came in the query (then the page sets the cookie). */
const given = (request: HttpServerRequest.HttpServerRequest) => {
  const fromQuery = new URL(request.url, "http://admin").searchParams.get("token") ?? undefined
  return { token: bearerOf(request.headers["authorization"]) ?? request.cookies[COOKIE] ?? fromQuery, fromQuery }
}

const guarded = (
  token: Redacted.Redacted<string> | undefined,
  respond: (fromQuery: string | undefined) => Effect.Effect<HttpServerResponse.HttpServerResponse>
) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    if (token === undefined) return respond(undefined)
    const g = given(request)
    return g.token !== undefined && tokenMatches(g.token, token) ? respond(g.fromQuery) : Effect.succeed(refused)
  })

const noStore = { "cache-control": "no-store" }

export const uiRouter = (source: UiSource) =>
  HttpRouter.empty.pipe(
    HttpRouter.get(
      UI_PATH,
      guarded(source.token, (fromQuery) =>
        Effect.succeed(
          HttpServerResponse.text(PAGE, {
            contentType: "text/html; charset=utf-8",
            headers: {
              ...noStore,
              "content-security-policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
              ...(fromQuery === undefined
                ? {}
                : { "set-cookie": `${COOKIE}=${encodeURIComponent(fromQuery)}; Path=${UI_PATH}; HttpOnly; SameSite=Strict` })
            }
          })
        )
      )
    ),
    HttpRouter.get(
      UI_OVERVIEW_PATH,
      guarded(source.token, () => Effect.map(source.overview, (o) => HttpServerResponse.unsafeJson(o, { headers: noStore })))
    )
  )
