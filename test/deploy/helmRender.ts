/**
 * A renderer for the subset of Helm's templates deploy/helm/talon uses, so CI checks the chart
 * without helm: `{{ .Values.a.b }}`, `{{ .Release.Name }}`/`.Namespace`, `| quote`,
 * `toYaml X | nindent N`, and `if X` / `else` / `end` blocks (nested); `{{-` trims the
 * whitespace before it as Helm does. Anything else is an error, so a template that drifts
 * outside the subset fails the test instead of rendering wrong.
 */
import { stringify } from "yaml"

export interface RenderContext {
  readonly Values: Record<string, unknown>
  readonly Release: { readonly Name: string; readonly Namespace: string }
}

const lookup = (ctx: RenderContext, path: string): unknown => {
  if (!path.startsWith(".")) throw new Error(`unsupported template value ${path}`)
  let v: unknown = ctx
  for (const part of path.slice(1).split(".")) {
    if (v === null || typeof v !== "object") return undefined
    v = (v as Record<string, unknown>)[part]
  }
  return v
}

const truthy = (v: unknown) =>
  !(v === undefined || v === null || v === false || v === "" || v === 0 || (Array.isArray(v) && v.length === 0) || (typeof v === "object" && Object.keys(v as object).length === 0))

const evaluate = (ctx: RenderContext, expr: string): string => {
  const toYaml = /^toYaml (\S+) \| nindent (\d+)$/.exec(expr)
  if (toYaml !== null) {
    const value = lookup(ctx, toYaml[1]!)
    if (!truthy(value)) return ""
    const pad = " ".repeat(Number(toYaml[2]))
    return "\n" + stringify(value).trimEnd().split("\n").map((l) => pad + l).join("\n")
  }
  const quoted = /^(\S+) \| quote$/.exec(expr)
  if (quoted !== null) return JSON.stringify(String(lookup(ctx, quoted[1]!) ?? ""))
  if (/^\.[\w.]+$/.test(expr)) {
    const v = lookup(ctx, expr)
    if (v === undefined || (typeof v === "object" && v !== null)) throw new Error(`template value ${expr} is ${v === undefined ? "missing" : "not a scalar"}`)
    return String(v)
  }
  throw new Error(`unsupported template expression {{ ${expr} }}`)
}

export const render = (template: string, ctx: RenderContext): string => {
  const tokens = template.split(/(\{\{-?\s*[\s\S]*?\s*-?\}\})/)
  // A stack of (emitting?) frames for if/else/end.
  const frames: Array<{ cond: boolean; inElse: boolean; parentOn: boolean }> = []
  const on = () => frames.every((f) => (f.inElse ? !f.cond : f.cond))
  let out = ""
  for (const token of tokens) {
    const m = /^\{\{(-?)\s*([\s\S]*?)\s*(-?)\}\}$/.exec(token)
    if (m === null) {
      if (on()) out += token
      continue
    }
    if (m[1] === "-") out = out.replace(/\s+$/, "")
    if (m[3] === "-") throw new Error(`right-trim {{ ... -}} is not supported: ${token}`)
    const expr = m[2]!
    const cond = /^if (\S+)$/.exec(expr)
    if (cond !== null) frames.push({ cond: truthy(lookup(ctx, cond[1]!)), inElse: false, parentOn: on() })
    else if (expr === "else") {
      const f = frames.at(-1)
      if (f === undefined) throw new Error("else without if")
      f.inElse = true
    } else if (expr === "end") {
      if (frames.pop() === undefined) throw new Error("end without if")
    } else if (on()) out += evaluate(ctx, expr)
  }
  if (frames.length > 0) throw new Error("if without end")
  return out
}
