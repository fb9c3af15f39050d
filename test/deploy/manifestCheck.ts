/**
 * Cross-checks deploy files against the CLI: the subcommand a container runs, each `--flag` in its
 * args, and each TALON_* variable it sets must be ones the real `talon` accepts.
 */
export interface CliSurface {
  /** Subcommand → the flags its --help names. */
  readonly flags: ReadonlyMap<string, ReadonlySet<string>>
  /** Every TALON_* variable some part of the CLI reads. */
  readonly env: ReadonlySet<string>
}

interface Container {
  readonly name?: string
  readonly args?: ReadonlyArray<string>
  readonly env?: ReadonlyArray<{ readonly name: string }>
}

const containersOf = (doc: any): ReadonlyArray<Container> => doc?.spec?.template?.spec?.containers ?? []

const checkEnv = (where: string, names: Iterable<string>, surface: CliSurface, out: Array<string>) => {
  for (const name of names) {
    if (name.startsWith("TALON_") && !surface.env.has(name)) out.push(`${where}: unknown variable ${name}`)
  }
}

export const deployProblems = (docs: ReadonlyArray<unknown>, dockerfile: string, surface: CliSurface): Array<string> => {
  const out: Array<string> = []
  for (const doc of docs as ReadonlyArray<any>) {
    const where = `${doc.kind}/${doc.metadata?.name}`
    if (doc.kind === "Secret") checkEnv(where, Object.keys({ ...doc.stringData, ...doc.data }), surface, out)
    if (doc.kind === "ConfigMap") checkEnv(where, Object.keys(doc.data ?? {}), surface, out)
    for (const c of containersOf(doc)) {
      const [sub, ...rest] = c.args ?? []
      const flags = sub === undefined ? undefined : surface.flags.get(sub)
      if (flags === undefined) {
        out.push(`${where}/${c.name}: unknown subcommand ${sub}`)
        continue
      }
      for (const a of rest) {
        const flag = a.split("=")[0]!
        if (flag.startsWith("--") && !flags.has(flag)) out.push(`${where}/${c.name}: ${sub}: unknown flag ${flag}`)
      }
      checkEnv(`${where}/${c.name}`, (c.env ?? []).map((e) => e.name), surface, out)
    }
  }
  checkEnv("Dockerfile", [...dockerfile.matchAll(/^ENV\s+(TALON_[A-Z0-9_]+)=/gm)].map((m) => m[1]!), surface, out)
  return out
}
