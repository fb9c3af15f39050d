/**
 * Flags of the benchmark scripts (`--rounds 4 --spin`). Scripts are run by hand with a
 * handful of options, so a typo must fail loudly rather than fall back to a default.
 */
import { dirname, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { Either } from "effect"
import { parseSize } from "../../src/core/size.js"

/** The repository root (bench/lib/ → ../..). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..")

/** The machine name every data file records unless `--machine` says otherwise. */
export const DEFAULT_MACHINE = "2-vCPU KVM VM (AMD EPYC), shared with other workloads"

export interface ScriptArgs {
  /** The arguments as given (for the data file's `command`). */
  readonly argv: ReadonlyArray<string>
  readonly string: (name: string, def: string) => string
  /** A finite number, or the script stops naming the flag and what it got. */
  readonly number: (name: string, def: number) => number
  /** A byte size such as 65536, 64K, 1M. */
  readonly size: (name: string, def: string) => number
  readonly has: (name: string) => boolean
  readonly machine: () => string
}

export const scriptArgs = (argv: ReadonlyArray<string> = process.argv.slice(2)): ScriptArgs => {
  const string = (name: string, def: string): string => {
    const i = argv.indexOf(`--${name}`)
    return i >= 0 && i + 1 < argv.length ? argv[i + 1]! : def
  }
  const number = (name: string, def: number): number => {
    const text = string(name, String(def))
    const n = Number(text)
    if (!Number.isFinite(n)) throw new Error(`--${name}: expected a number, got ${JSON.stringify(text)}`)
    return n
  }
  const size = (name: string, def: string): number => {
    const text = string(name, def)
    const n = parseSize(text)
    if (Either.isLeft(n)) throw new Error(`--${name}: ${n.left}`)
    return n.right
  }
  return {
    argv,
    string,
    number,
    size,
    has: (name) => argv.includes(`--${name}`),
    machine: () => string("machine", DEFAULT_MACHINE)
  }
}
