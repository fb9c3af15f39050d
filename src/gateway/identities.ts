/**
 * Per-request use of the principal directory (principals.ts): who signed the request (SigV4
 * or Shared Key against that principal's own key), what it asks to do, and whether a grant
 * allows it. Plain functions on the request path; the directory they read is swapped whole
 * by the reloader, so one request never sees half of a reload.
 */
import type { IncomingHttpHeaders } from "node:http"
import { Redacted } from "effect"
import { decodePath } from "../http/context.js"
import { type AuthResult, rawQueryPairs, type ReceivedRequest, verifySharedKey, verifySigV4 } from "./auth.js"
import { operationOf } from "./metrics.js"
import { type Access, allowing, type Directory, type GrantOperation, type Principal } from "./principals.js"

const identityless = Redacted.make("")

export type Authenticated = { readonly ok: true; readonly principal: Principal } | Extract<AuthResult, { ok: false }>

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const v = headers[name]
  return Array.isArray(v) ? v[0] : v
}

/** The access key a SigV4 request names (header or presigned query), before any check. */
const sigV4KeyId = (req: ReceivedRequest): string | undefined => {
  const authorization = header(req.headers, "authorization")
  if (authorization !== undefined) return /Credential=([^/,\s]+)\//.exec(authorization)?.[1]
  const credential = rawQueryPairs(req.rawQuery)?.find(([k]) => k === "X-Amz-Credential")?.[1]
  return credential?.split("/")[0]
}

export const authenticateS3 = (directory: Directory, req: ReceivedRequest, check: { region: string; nowMs: number; clockSkewMs: number }): Authenticated => {
  const keyId = sigV4KeyId(req)
  const identity = keyId === undefined ? undefined : directory.s3.get(keyId)
  if (identity === undefined) {
    // Let the verifier say what is missing or malformed; an unknown key is InvalidAccessKeyId.
    const verdict = verifySigV4(req, { accessKeyId: "\0", secretAccessKey: identityless, ...check })
    return verdict.ok ? { ok: false, status: 403, code: "InvalidAccessKeyId", message: "The AWS Access Key Id you provided does not exist in our records." } : verdict
  }
  const verdict = verifySigV4(req, { accessKeyId: keyId!, secretAccessKey: identity.secret, ...check })
  if (!verdict.ok) return verdict
  if (identity.sessionToken !== undefined) {
    const token = header(req.headers, "x-amz-security-token") ?? rawQueryPairs(req.rawQuery)?.find(([k]) => k === "X-Amz-Security-Token")?.[1]
    if (token !== identity.sessionToken) return { ok: false, status: 403, code: "InvalidToken", message: "The provided token is malformed or otherwise invalid." }
  }
  return { ok: true, principal: identity }
}

export const authenticateAzure = (directory: Directory, req: ReceivedRequest, account: string, check: { nowMs: number; clockSkewMs: number }): Authenticated => {
  const keys = directory.azure.get(account)
  if (keys === undefined || keys.length === 0) {
    return { ok: false, status: 403, code: "AuthenticationFailed", message: `Server failed to authenticate the request. Unknown account '${account}'.` }
  }
  let last: AuthResult = { ok: true }
  for (const k of keys) {
    last = verifySharedKey(req, { account, key: k.key, ...check })
    if (last.ok) return { ok: true, principal: k }
  }
  return last as Extract<AuthResult, { ok: false }>
}


/** Talon's grant names: the request's operation, except that a HEAD of a bucket is a `probe`. */
const operation = (method: string, namesObject: boolean): GrantOperation | undefined => {
  const op = operationOf(method, namesObject)
  if (op === "unsupported") return undefined
  return method === "HEAD" && !namesObject ? "probe" : op
}

/** What an S3 request asks: `rawKey` still percent-encoded; copies also read their source. */
export const s3Accesses = (method: string, bucket: string, rawKey: string | undefined, query: URLSearchParams, headers: IncomingHttpHeaders): ReadonlyArray<Access> | undefined => {
  if (bucket === "") return [] // ListBuckets names no bucket: only the bucket-wide check below applies.
  const key = rawKey === undefined || rawKey === "" ? undefined : decodePath(rawKey)
  const op = operation(method, key !== undefined)
  if (op === undefined) return undefined
  // A listing is judged by its prefix; a multi-object delete names keys only in its body, so it needs the whole bucket.
  const listed = op === "list" && !query.has("location") && !query.has("uploads") ? (query.get("prefix") ?? "") : undefined
  const accesses: Array<Access> = [{ protocol: "s3", operation: op, namespace: bucket, key: key ?? listed }]
  const source = header(headers, "x-amz-copy-source")
  if (source !== undefined && op === "write") {
    const decoded = decodePath(source.replace(/^\//, "").split("?")[0]!)
    const slash = decoded?.indexOf("/") ?? -1
    if (decoded === undefined || slash <= 0) return undefined
    accesses.push({ protocol: "s3", operation: "read", namespace: decoded.slice(0, slash), key: decoded.slice(slash + 1) })
  }
  return accesses
}

/** What an Azure request asks, from the path's segments (`account/container/blob`). */
export const azureAccesses = (method: string, segments: ReadonlyArray<string>, query: URLSearchParams, headers: IncomingHttpHeaders): ReadonlyArray<Access> | undefined => {
  const [, rawContainer, ...rest] = segments
  if (rawContainer === undefined || rawContainer === "") return []
  const container = decodePath(rawContainer)
  const blob = rest.length === 0 ? undefined : decodePath(rest.join("/"))
  if (container === undefined) return undefined
  const named = blob !== undefined && blob !== ""
  const op = operation(method, named)
  if (op === undefined) return undefined
  const listed = op === "list" && query.get("comp") === "list" ? (query.get("prefix") ?? "") : undefined
  const accesses: Array<Access> = [{ protocol: "azure", operation: op, namespace: container, key: named ? blob : listed }]
  const source = header(headers, "x-ms-copy-source")
  if (source !== undefined && op === "write") {
    const parts = (() => {
      try {
        return new URL(source).pathname.split("/").slice(2).map((s) => decodeURIComponent(s))
      } catch {
        return undefined
      }
    })()
    if (parts === undefined || parts.length < 2) return undefined
    accesses.push({ protocol: "azure", operation: "read", namespace: parts[0]!, key: parts.slice(1).join("/") })
  }
  return accesses
}

/** The first access no grant allows, or undefined when every one is allowed. `[]` (account-wide calls) needs a grant on some namespace. */
export const refusedAccess = (directory: Directory, principal: Principal, accesses: ReadonlyArray<Access>, protocol: "s3" | "azure"): Access | "account" | undefined => {
  if (accesses.length === 0) {
    const any = directory.grants.some((g) => g.principal === principal.name && g.protocol === protocol && g.provider_account === principal.providerAccount)
    return any ? undefined : "account"
  }
  return accesses.find((a) => allowing(directory, principal, a) === undefined)
}

/** The buckets (containers) `principal` holds a grant in, for `protocol`. */
/** The namespaces a principal may see; `undefined` (everything) when the gateway has no principals. */
export const grantedNamespaces = (
  directory: Directory | undefined,
  principal: Principal | undefined,
  protocol: "s3" | "azure"
): ReadonlySet<string> | undefined =>
  directory === undefined || principal === undefined
    ? undefined
    : new Set(
        directory.grants
          .filter((g) => g.principal === principal.name && g.protocol === protocol && g.provider_account === principal.providerAccount)
          .map((g) => g.namespace)
      )

const xmlName = (entry: string): string | undefined => {
  const raw = /<Name>([^<]*)<\/Name>/.exec(entry)?.[1]
  return raw?.replace(/&(lt|gt|quot|apos|amp);/g, (_, e: string) => ({ lt: "<", gt: ">", quot: '"', apos: "'", amp: "&" })[e]!)
}

/**
 * A ListBuckets (`<Bucket>`) or List Containers (`<Container>`) answer with only the entries
 * `visible` holds: a principal learns no bucket name it has no grant in.
 */
export const onlyGranted = (xml: string, element: "Bucket" | "Container", visible: ReadonlySet<string>): string =>
  xml.replace(new RegExp(`<${element}>[\\s\\S]*?</${element}>`, "g"), (entry) => {
    const name = xmlName(entry)
    return name !== undefined && visible.has(name) ? entry : ""
  })
