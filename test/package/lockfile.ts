/**
 * A package-lock for a project that depends on the packed talon-ts tarball, with every other
 * entry taken from the repository's own lock (its non-dev packages: exactly talon-ts's runtime
 * tree). `npm ci --offline` then installs from the npm cache that `npm ci` in the repository
 * filled, asking the registry for nothing.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"

interface LockEntry {
  readonly dev?: boolean
  readonly link?: boolean
  readonly [key: string]: unknown
}

export interface PackageJson {
  readonly name: string
  readonly version: string
  readonly license: string
  readonly bin: Record<string, string>
  readonly engines: Record<string, string>
  readonly dependencies: Record<string, string>
}

export const appLockfile = (args: {
  readonly repoLock: { readonly packages: Record<string, LockEntry> }
  readonly pkg: PackageJson
  readonly tarball: string
  /** The tarball as the app's package.json names it (`file:../x.tgz`). */
  readonly spec: string
  readonly appDependencies: Record<string, string>
}) => {
  const integrity = `sha512-${createHash("sha512").update(fs.readFileSync(args.tarball)).digest("base64")}`
  const packages: Record<string, unknown> = {
    "": { name: "app", dependencies: args.appDependencies },
    [`node_modules/${args.pkg.name}`]: {
      version: args.pkg.version,
      resolved: args.spec,
      integrity,
      hasInstallScript: true,
      license: args.pkg.license,
      dependencies: args.pkg.dependencies,
      bin: args.pkg.bin,
      engines: args.pkg.engines
    }
  }
  for (const [path, entry] of Object.entries(args.repoLock.packages)) {
    if (path === "" || entry.dev === true || entry.link === true) continue
    packages[path] = entry
  }
  return { name: "app", lockfileVersion: 3, requires: true, packages }
}
