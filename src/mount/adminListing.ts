/**
 * Directory listings for the mount. Talon's ListObjects has no cursor (one reply, at most
 * 10,000 objects) and no dates, so the mount first asks the coordinator's admin HTTP API
 * (`GET /api/v1/objects`, a JSON listing paged by the origin's own cursor, with a `/`
 * delimiter and each object's last-modified time). A coordinator that does not serve it (a
 * Talon coordinator, or no admin port where one was expected) is answered by the Talon-wire
 * ListObjects instead, with its limits; that choice is remembered for a while so a listing
 * does not pay a refused connection every time.
 */
import { FetchHttpClient, HttpClient, HttpClientResponse } from "@effect/platform"
import { Duration, Effect, type Redacted, Schema } from "effect"
import { adminAuthHeaders } from "../config/adminToken.js"
import { InvalidRequest, type TalonClientError } from "../client/errors.js"
import type { TalonClientShape } from "../client/TalonClient.js"
import { OBJECT_LISTING_PATH, ObjectListingPage } from "../protocol/objectListing.js"
import { parseHostPortList, formatHostPort } from "../transport/address.js"
import type { ListedEntry } from "./listing.js"

/** Names under a directory; the origin's time and version only from the admin API (the Talon wire has neither). */
type ListedName = ListedEntry

export interface DirListerOptions {
  /** Coordinator admin HTTP `host:port`s, tried in order; empty = the Talon wire only. */
  readonly admins: ReadonlyArray<string>
  /**
   * Control ports of the coordinators this mount dials. When the admin addresses were guessed
   * (each control host at the default admin port), a page from a coordinator whose control
   * port is none of these belongs to another cluster on the same host and is not used.
   */
  readonly controlPorts?: ReadonlyArray<number>
  /** TALON_ADMIN_TOKEN, when the coordinators demand it. */
  readonly adminToken?: Redacted.Redacted<string> | undefined
  /** The most names one directory may hold before its listing is refused (memory bound). */
  readonly maxEntries: number
  readonly now: () => number
  readonly warn: (message: string) => void
}

/** How long the Talon-wire listing is used after no admin API answered, before trying it again. */
const FALLBACK_FOR_MS = 30_000
const REQUEST_TIMEOUT = Duration.seconds(15)

/** The coordinator's default admin port, paired with each control host when no admin address is given. */
export const DEFAULT_ADMIN_PORT = 8000

/** Admin addresses for a coordinator control list: each host at the coordinator's default admin port. */
export const adminsFor = (coordinators: string): ReadonlyArray<string> =>
  [...new Set((parseHostPortList(coordinators) ?? []).map((hp) => formatHostPort(hp.host, DEFAULT_ADMIN_PORT)))]

/** The admin API is not there (or not this one): fall back to the wire. */
class NotServed extends Schema.TaggedError<NotServed>()("NotServed", { admin: Schema.String, detail: Schema.String }) {}

const decodePage = HttpClientResponse.schemaBodyJson(ObjectListingPage)
const ErrorBody = Schema.Struct({ error: Schema.String })

export const makeDirLister = (client: TalonClientShape, options: DirListerOptions) => {
  let wireUntil = Number.NEGATIVE_INFINITY

  const page = (http: HttpClient.HttpClient, admin: string, prefix: string, cursor: string | null) => {
    const query = new URLSearchParams({ prefix, delimiter: "/", ...(cursor === null ? {} : { cursor }) })
    return http.get(`http://${admin}${OBJECT_LISTING_PATH}?${query}`, { headers: adminAuthHeaders(options.adminToken) }).pipe(
      Effect.timeout(REQUEST_TIMEOUT),
      Effect.mapError((e) => new NotServed({ admin, detail: e.message })),
      Effect.flatMap((res) => {
        if (res.status === 200) return decodePage(res).pipe(Effect.mapError((e) => new NotServed({ admin, detail: `not a listing page: ${e.message}` })))
        // 503: the coordinator cannot page the origin (it holds no credentials); the wire listing through a worker can.
        if (res.status === 503) return Effect.fail(new NotServed({ admin, detail: `HTTP 503 from ${OBJECT_LISTING_PATH}` }))
        // A refusal this API explains (no such bucket, a bad prefix, the origin failing) is the answer; anything else means the API is not here.
        return HttpClientResponse.schemaBodyJson(ErrorBody)(res).pipe(
          Effect.mapError(() => new NotServed({ admin, detail: `HTTP ${res.status} from ${OBJECT_LISTING_PATH}` })),
          Effect.flatMap((body) => Effect.fail(new InvalidRequest({ detail: `listing ${prefix}: ${body.error}` })))
        )
      })
    )
  }

  const viaAdmin = (admin: string, prefix: string) =>
    Effect.gen(function* () {
      const http = yield* HttpClient.HttpClient
      const names: Array<ListedName> = []
      let cursor: string | null = null
      do {
        const p: ObjectListingPage = yield* page(http, admin, prefix, cursor)
        const expected = options.controlPorts ?? []
        if (expected.length > 0 && p.control !== undefined) {
          const port = parseHostPortList(p.control)?.[0]?.port
          if (port === undefined || !expected.includes(port)) {
            return yield* new NotServed({ admin, detail: `answered by the coordinator of another cluster (control ${p.control}, not port ${expected.join("/")})` })
          }
        }
        for (const e of p.entries) {
          const t = e.lastModified === undefined ? Number.NaN : Date.parse(e.lastModified)
          names.push({ path: e.path, size: e.size, version: e.version, mtimeMs: Number.isNaN(t) ? undefined : t })
        }
        for (const d of p.prefixes) names.push({ path: d, size: 0 })
        if (names.length > options.maxEntries) {
          return yield* new InvalidRequest({ detail: `listing ${prefix}: has more than ${options.maxEntries} objects, the most a directory of this mount shows (--max-inodes)` })
        }
        // A cursor that does not move would page forever.
        if (p.next !== null && p.next === cursor) return yield* new NotServed({ admin, detail: "the listing's cursor did not advance" })
        cursor = p.next
      } while (cursor !== null)
      return names
    })

  const viaWire = (prefix: string): Effect.Effect<ReadonlyArray<ListedName>, TalonClientError> => client.list(prefix)

  const list = (prefix: string): Effect.Effect<ReadonlyArray<ListedName>, TalonClientError> =>
    Effect.suspend(() => {
      if (options.admins.length === 0 || options.now() < wireUntil) return viaWire(prefix)
      const attempt = (i: number, why: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<ListedName>, TalonClientError> =>
        i >= options.admins.length
          ? Effect.suspend(() => {
              wireUntil = options.now() + FALLBACK_FOR_MS
              options.warn(
                `no coordinator admin API lists objects (${why.join("; ")}): listing over the Talon wire for ${FALLBACK_FOR_MS / 1000} s (at most 10,000 objects a directory, no origin mtimes); set --coordinator-admin to the coordinator's admin host:port`
              )
              return viaWire(prefix)
            })
          : viaAdmin(options.admins[i]!, prefix).pipe(
              Effect.catchTag("NotServed", (e) => attempt(i + 1, [...why, `${e.admin}: ${e.detail}`])),
              Effect.provide(FetchHttpClient.layer)
            )
      return attempt(0, [])
    })

  return { list }
}

export type DirLister = ReturnType<typeof makeDirLister>
