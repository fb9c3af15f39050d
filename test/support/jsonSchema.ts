/**
 * A small JSON Schema checker for the subset Effect's OpenApi emits (type, properties,
 * required, additionalProperties, items, enum, anyOf, $ref, minimum, pattern): enough to
 * check a served body against the schema a document says it has, independently of the
 * Effect Schema that encoded it.
 */
type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [k: string]: Json }
type JsonSchema = { readonly [k: string]: unknown }

export const schemaProblems = (root: JsonSchema, schema: JsonSchema, value: unknown, at = "$"): Array<string> => {
  if (typeof schema["$ref"] === "string") {
    const name = schema["$ref"].replace("#/components/schemas/", "")
    const target = (root["components"] as { schemas: Record<string, JsonSchema> }).schemas[name]
    return target === undefined ? [`${at}: dangling $ref ${schema["$ref"]}`] : schemaProblems(root, target, value, at)
  }
  if (Array.isArray(schema["anyOf"])) {
    const branches = (schema["anyOf"] as Array<JsonSchema>).map((s) => schemaProblems(root, s, value, at))
    return branches.some((p) => p.length === 0) ? [] : [`${at}: matches no anyOf branch (${branches.map((b) => b[0]).join(" | ")})`]
  }
  const problems: Array<string> = []
  if (Array.isArray(schema["enum"]) && !(schema["enum"] as Array<unknown>).includes(value)) problems.push(`${at}: ${JSON.stringify(value)} not in enum`)
  const type = schema["type"]
  const kind = value === null ? "null" : Array.isArray(value) ? "array" : typeof value
  const ok = (t: unknown) =>
    t === kind || (t === "integer" && typeof value === "number" && Number.isInteger(value)) || (t === "number" && kind === "number")
  if (type !== undefined && !(Array.isArray(type) ? type.some(ok) : ok(type))) return [`${at}: ${kind} is not ${JSON.stringify(type)}`]
  if (typeof schema["minimum"] === "number" && typeof value === "number" && value < schema["minimum"]) problems.push(`${at}: below minimum`)
  if (kind === "object" && value !== null) {
    const object = value as Record<string, Json>
    const props = (schema["properties"] ?? {}) as Record<string, JsonSchema>
    for (const r of (schema["required"] ?? []) as Array<string>) if (!(r in object)) problems.push(`${at}.${r}: required, missing`)
    for (const [k, v] of Object.entries(object)) {
      if (k in props) problems.push(...schemaProblems(root, props[k]!, v, `${at}.${k}`))
      else if (schema["additionalProperties"] === false) problems.push(`${at}.${k}: not in the schema`)
      else if (typeof schema["additionalProperties"] === "object") problems.push(...schemaProblems(root, schema["additionalProperties"] as JsonSchema, v, `${at}.${k}`))
    }
  }
  if (kind === "array" && typeof schema["items"] === "object") {
    ;(value as Array<Json>).forEach((v, i) => problems.push(...schemaProblems(root, schema["items"] as JsonSchema, v, `${at}[${i}]`)))
  }
  return problems
}
