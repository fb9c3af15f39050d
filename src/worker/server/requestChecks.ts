/** The checks a request's declared names pass before anything is served (tenants, objects), and how an admission is named in errors. */
import { Either } from "effect"
import type { ObjectId } from "../../core/ids.js"
import { validateObjectId } from "../../core/objectId.js"
import { MAX_TENANT_ID_BYTES, type CachedBlockPutRequest, type TenantId } from "../../protocol/index.js"

export const tenantName = (t: TenantId): string | undefined => (t._tag === "Named" ? t.name : undefined)

/** Talon's trust-boundary check of a declared tenant. */
export const invalidTenant = (t: TenantId): string | undefined =>
  t._tag === "Unattributed"
    ? undefined
    : t.name.length === 0
      ? "invalid tenant: tenant name is empty"
      : Buffer.byteLength(t.name, "utf8") > MAX_TENANT_ID_BYTES
        ? `invalid tenant: tenant name is ${Buffer.byteLength(t.name, "utf8")} bytes, over the ${MAX_TENANT_ID_BYTES}-byte limit`
        : undefined

/** An object name that could escape its namespace (empty, `.` or `..` components) is refused up front. */
export const invalidObject = (object: ObjectId): string | undefined => {
  const checked = validateObjectId(object)
  return Either.isLeft(checked) ? checked.left.message : undefined
}

export const blockKeyOf = (r: CachedBlockPutRequest): string =>
  `${r.block.object.bucket}/${r.block.object.objectPath}@${r.block.offset} (version ${r.block.version})`
