/**
 * bincode layouts derived from Effect Schemas. A wire type is declared once, as a Schema whose
 * leaves carry their bincode kind (`u8` … `u64`, `enumU32`, `string`, `bool`); structs, tuples,
 * `NullOr` (Option) and arrays (Vec) are read off the Schema's structure, in declaration order.
 * `codecOf(schema)` compiles that description once into a writer and a reader over
 * BincodeWriter / BincodeReader, so encoding walks closures, not the AST.
 *
 * Refinements that are not leaves (e.g. Talon's NodeStatus validation) are enforced in both
 * directions: the writer throws a RangeError (a caller bug), the reader a DecodeError. A
 * `bounded` annotation adds an encoded-size limit.
 */
import { type Arbitrary, type FastCheck, Option, ParseResult, Schema, SchemaAST as AST } from "effect"
import type { BincodeReader, BincodeWriter } from "./bincode.js"

export const BincodeKind: unique symbol = Symbol.for("talon/protocol/BincodeKind")

export type Kind =
  | { readonly kind: "u8" | "u16" | "u32" | "u64"; readonly what?: string }
  | { readonly kind: "enumU32"; readonly what: string; readonly names?: ReadonlyArray<string> }
  | { readonly kind: "string" | "bool" }
  | { readonly kind: "checked"; readonly what: string; readonly maxBytes?: number }

export interface Codec<A> {
  readonly write: (w: BincodeWriter, a: A) => void
  readonly read: (r: BincodeReader) => A
}

/** Generated text: any Unicode (the wire is UTF-8), short enough to keep property runs fast. */
const textArbitrary =
  (minLength: number, maxLength: number) =>
  () =>
  (fc: typeof FastCheck) =>
    fc.string({ unit: "grapheme", minLength, maxLength })

const numeric = (kind: "u8" | "u16" | "u32" | "u64", max: number) =>
  Schema.Int.pipe(Schema.between(0, max)).annotations({ [BincodeKind]: { kind } satisfies Kind, identifier: kind })

export const u8 = numeric("u8", 0xff)
export const u16 = numeric("u16", 0xffff)
export const u32 = numeric("u32", 0xffffffff)
/** u64 values this build represents exactly: up to 2^53-1 (the reader refuses larger ones). */
export const u64 = numeric("u64", Number.MAX_SAFE_INTEGER).annotations({
  // The edges a split into two u32 words can get wrong, besides fast-check's usual bias.
  arbitrary: (from: Arbitrary.LazyArbitrary<number>) => (fc: typeof FastCheck) =>
    fc.oneof(from(fc), fc.constantFrom(0, 2 ** 32 - 1, 2 ** 32, Number.MAX_SAFE_INTEGER))
})
export const bool = Schema.Boolean.annotations({ [BincodeKind]: { kind: "bool" } satisfies Kind })
/** u64 UTF-8 byte length, then the bytes. */
export const string = Schema.String.annotations({ [BincodeKind]: { kind: "string" } satisfies Kind, arbitrary: textArbitrary(0, 12) })
/** A string that must not be empty (checked by the enclosing value's validation; generated non-empty). */
export const nonEmptyString = (maxLength = 12) =>
  Schema.String.annotations({ [BincodeKind]: { kind: "string" } satisfies Kind, arbitrary: textArbitrary(1, maxLength) })

/**
 * A fixed-width integer that must be one of `values` (e.g. a schema version this build reads),
 * typed as a number so that a newer value is representable (and refused with a clear error).
 */
export const fixed = (kind: "u8" | "u16" | "u32" | "u64", what: string, ...values: ReadonlyArray<number>): Schema.Schema<number> =>
  Schema.Literal(...values).annotations({ [BincodeKind]: { kind, what } satisfies Kind })

/** A Rust fieldless enum: the value's position in `values` as a u32 tag. */
export const enumU32 = <const L extends ReadonlyArray<AST.LiteralValue>>(what: string, values: L, names?: ReadonlyArray<string>) =>
  Schema.Literal(...values).annotations({ [BincodeKind]: { kind: "enumU32", what, ...(names ? { names } : {}) } satisfies Kind })

/** `Option<T>`: a 0/1 byte, then the value (null when absent). */
export const option = <S extends Schema.Schema.Any>(s: S) => Schema.NullOr(s)
/** `Vec<T>`: a u64 count, then the items. */
export const vec = <S extends Schema.Schema.Any>(s: S) => Schema.Array(s)

/** Marks a refined value for the codec: what to call it in errors, and its largest encoding. */
export const bounded = (what: string, maxBytes?: number) => ({
  [BincodeKind]: { kind: "checked", what, ...(maxBytes !== undefined ? { maxBytes } : {}) } satisfies Kind
})

const compiled = new WeakMap<AST.AST, Codec<any>>()

/** The bincode writer and reader of `schema`'s type, compiled once per schema. */
export const codecOf = <A, I, R>(schema: Schema.Schema<A, I, R>): Codec<A> => compile(schema.ast)

const compile = (ast: AST.AST): Codec<any> => {
  let codec = compiled.get(ast)
  if (codec === undefined) {
    codec = build(ast)
    compiled.set(ast, codec)
  }
  return codec
}

const kindOf = (ast: AST.AST): Kind | undefined => ast.annotations[BincodeKind] as Kind | undefined

const literalsOf = (ast: AST.AST): ReadonlyArray<AST.LiteralValue> | undefined => {
  if (ast._tag === "Literal") return [ast.literal]
  if (ast._tag === "Union" && ast.types.every((t) => t._tag === "Literal")) return ast.types.map((t) => (t as AST.Literal).literal)
  return undefined
}

const build = (ast: AST.AST): Codec<any> => {
  const kind = kindOf(ast)
  if (kind !== undefined && kind.kind !== "checked") return leaf(ast, kind)
  switch (ast._tag) {
    case "TypeLiteral":
      return struct(ast)
    case "TupleType":
      return tuple(ast)
    case "Union":
      return optionOf(ast)
    case "Refinement":
      return checked(ast, kind?.kind === "checked" ? kind : undefined)
    case "Transformation":
      return compile(ast.from)
  }
  throw new Error(`no bincode layout for ${String(ast)}: give it a bincode kind (u8…u64, enumU32, string, bool)`)
}

const leaf = (ast: AST.AST, kind: Exclude<Kind, { kind: "checked" }>): Codec<any> => {
  switch (kind.kind) {
    case "string":
      return { write: (w, s) => w.string(s), read: (r) => r.string() }
    case "bool":
      return { write: (w, b) => w.bool(b), read: (r) => r.bool() }
    case "enumU32": {
      const values = literalsOf(ast) ?? []
      const names = kind.names ?? values.map(String)
      const expected = names.map((n, i) => `${i} ${n}`).join(", ")
      return {
        write: (w, v) => {
          const tag = values.indexOf(v)
          if (tag < 0) throw new RangeError(`${kind.what} ${String(v)} is not one of ${values.map(String).join(", ")}`)
          w.u32(tag)
        },
        read: (r) => {
          const tag = r.u32()
          if (tag >= values.length) r.fail(`unknown ${kind.what} tag ${tag} (expected ${expected})`)
          return values[tag]
        }
      }
    }
    default: {
      const width = kind.kind
      const plain = WIDTHS[width]
      const allowed = literalsOf(ast)
      if (allowed === undefined) return plain
      const what = kind.what ?? width
      return {
        write: (w, n) => {
          if (!allowed.includes(n)) throw new RangeError(`${what} ${n} is not supported (supported: ${allowed.join(", ")})`)
          plain.write(w, n)
        },
        read: (r) => {
          const n = plain.read(r)
          if (!allowed.includes(n)) r.fail(`unsupported ${what} ${n} (supported: ${allowed.join(", ")})`)
          return n
        }
      }
    }
  }
}

const WIDTHS: Record<"u8" | "u16" | "u32" | "u64", Codec<number>> = {
  u8: { write: (w, n) => w.u8(n), read: (r) => r.u8() },
  u16: { write: (w, n) => w.u16(n), read: (r) => r.u16() },
  u32: { write: (w, n) => w.u32(n), read: (r) => r.u32() },
  u64: { write: (w, n) => w.u64(n), read: (r) => r.u64() }
}

const struct = (ast: AST.TypeLiteral): Codec<any> => {
  if (ast.indexSignatures.length > 0) throw new Error(`no bincode layout for a record with index signatures: ${String(ast)}`)
  // An unannotated literal (a TaggedClass's `_tag`) is a constant of the type, not a wire field.
  const constants: Array<readonly [string, AST.LiteralValue]> = []
  const fields: Array<readonly [string, Codec<any>]> = []
  for (const p of ast.propertySignatures) {
    if (typeof p.name !== "string") throw new Error(`no bincode layout for symbol-keyed field ${String(p.name)}`)
    if (p.isOptional) throw new Error(`no bincode layout for optional field ${p.name}: use option(…)`)
    if (p.type._tag === "Literal" && kindOf(p.type) === undefined) constants.push([p.name, p.type.literal])
    else fields.push([p.name, compile(p.type)])
  }
  return fixedShape(constants, fields)
}

/**
 * Straight-line writer and reader for one struct (generated once per schema): reading builds
 * an object literal of a fixed shape, as a hand-written decoder would, and the fields are
 * read in declaration order because an object literal evaluates its properties in order.
 */
const fixedShape = (
  constants: ReadonlyArray<readonly [string, AST.LiteralValue]>,
  fields: ReadonlyArray<readonly [string, Codec<any>]>
): Codec<any> => {
  const key = (name: string) => JSON.stringify(name)
  const writes = fields.map(([name], i) => `c[${i}].write(w, v[${key(name)}]);`).join("\n")
  const props = [
    ...constants.map(([name], i) => `${key(name)}: k[${i}]`),
    ...fields.map(([name], i) => `${key(name)}: c[${i}].read(r)`)
  ].join(",\n")
  const make = new Function("k", "c", `return { write: (w, v) => { ${writes} }, read: (r) => ({ ${props} }) }`) as (
    k: ReadonlyArray<AST.LiteralValue>,
    c: ReadonlyArray<Codec<any>>
  ) => Codec<any>
  return make(
    constants.map(([, v]) => v),
    fields.map(([, c]) => c)
  )
}

const tuple = (ast: AST.TupleType): Codec<any> => {
  if (ast.elements.length === 0 && ast.rest.length === 1) {
    const item = compile(ast.rest[0]!.type)
    return { write: (w, items) => w.vec(items, item.write), read: (r) => r.vec(item.read) }
  }
  if (ast.rest.length > 0 || ast.elements.some((e) => e.isOptional)) {
    throw new Error(`no bincode layout for ${String(ast)}: a tuple needs fixed elements, an array one item type`)
  }
  const items = ast.elements.map((e) => compile(e.type))
  return {
    write: (w, v) => {
      for (let i = 0; i < items.length; i++) items[i]!.write(w, v[i])
    },
    read: (r) => items.map((c) => c.read(r))
  }
}

const optionOf = (ast: AST.Union): Codec<any> => {
  const present = ast.types.filter((t) => !(t._tag === "Literal" && t.literal === null))
  if (present.length !== 1 || present.length === ast.types.length) {
    throw new Error(`no bincode layout for union ${String(ast)}: only NullOr(T) (an Option) has one`)
  }
  const inner = compile(present[0]!)
  return { write: (w, v) => w.option(v, inner.write), read: (r) => r.option(inner.read) }
}

const problem = (ast: AST.Refinement, value: unknown): string | undefined => {
  const issue = ast.filter(value, AST.defaultParseOption, ast)
  if (Option.isNone(issue)) return undefined
  const i = issue.value
  return i._tag === "Type" && i.message !== undefined ? i.message : ParseResult.TreeFormatter.formatIssueSync(i)
}

const checked = (ast: AST.Refinement, kind: Extract<Kind, { kind: "checked" }> | undefined): Codec<any> => {
  const inner = compile(ast.from)
  const what = kind?.what ?? "value"
  const max = kind?.maxBytes
  return {
    write: (w, v) => {
      const p = problem(ast, v)
      if (p !== undefined) throw new RangeError(`invalid ${what}: ${p}`)
      const start = w.length
      inner.write(w, v)
      if (max !== undefined && w.length - start > max) {
        throw new RangeError(`encoded ${what} is ${w.length - start} bytes; maximum is ${max}`)
      }
    },
    read: (r) => {
      const start = r.pos
      const v = inner.read(r)
      if (max !== undefined && r.pos - start > max) r.fail(`encoded ${what} is ${r.pos - start} bytes; maximum is ${max}`)
      const p = problem(ast, v)
      if (p !== undefined) r.fail(`invalid ${what}: ${p}`)
      return v
    }
  }
}
