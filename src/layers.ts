/**
 * Which folder of src/ may import which: the module boundaries, written down once.
 * test/layering.test.ts parses every import under src/ and fails on any that this table
 * does not allow (README "Layout" explains the layers). A folder may always import its own
 * files; `root` is the files directly under src/ (the package's entry, `index.ts`).
 *
 * The order, bottom up: core ← protocol, placement ← transport ← client, worker,
 * coordinator; http ← origin (the stub), gateway. `config` (settings resolution) sits on
 * transport and serves the components. `backend` (the object-storage clients)
 * sits on core; `actor` on nothing. Only the command line (`cli`), `talon up` (`cluster`)
 * and the package entry may reach the origin stub: production code never depends on a
 * test double.
 */
export interface ImportRule {
  /** Folders (under src/) this one may import. */
  readonly imports: ReadonlyArray<string>
  /** Why the layer exists, for the error message when a rule breaks. */
  readonly holds: string
  /** May import devDependencies (tooling that is never loaded by the published entry points). */
  readonly dev?: boolean
}

const library = [
  "core",
  "protocol",
  "placement",
  "transport",
  "config",
  "backend",
  "http",
  "actor",
  "client",
  "worker",
  "coordinator",
  "gateway"
]

export const LAYERS: Readonly<Record<string, ImportRule>> = {
  core: { imports: [], holds: "ids, geometry, bitmaps: no I/O" },
  actor: { imports: [], holds: "typed actors and their remote form" },
  protocol: { imports: ["core"], holds: "the wire formats (frames, bincode, control messages, admin JSON)" },
  placement: { imports: ["core"], holds: "Maglev and rendezvous placement" },
  transport: { imports: ["core", "protocol"], holds: "addresses, framed connections, the control channel" },
  config: {
    imports: ["core", "transport"],
    holds: "settings: value kinds, flag > TALON_* > file > default resolution, generated flags"
  },
  backend: { imports: ["core"], holds: "the S3 and Azure clients a worker fills from" },
  http: { imports: ["core"], holds: "S3/Azure REST plumbing shared by the origin stub and the gateway" },
  client: { imports: ["core", "protocol", "placement", "transport", "config", "actor"], holds: "TalonClient" },
  worker: {
    imports: ["core", "protocol", "placement", "transport", "config", "backend", "http", "actor"],
    holds: "the cache worker"
  },
  coordinator: {
    imports: ["core", "protocol", "placement", "transport", "config", "backend", "http", "actor"],
    holds: "membership and the cluster view"
  },
  gateway: {
    imports: ["core", "protocol", "placement", "transport", "config", "backend", "http", "actor", "client"],
    holds: "the S3/Azure front end over the cache"
  },
  mount: {
    imports: ["core", "protocol", "placement", "transport", "config", "actor", "client"],
    holds: "`talon mount`: the cache as a read-only FUSE filesystem"
  },
  origin: { imports: ["core", "config", "http", "actor"], holds: "the origin stub, a fake S3/Azure server for tests and `talon up`" },
  loadgen: { imports: library, holds: "the load generator" },
  cluster: { imports: [...library, "origin"], holds: "`talon up`: a whole local cluster" },
  cli: { imports: [...library, "origin", "cluster", "loadgen", "mount"], holds: "the `talon` command" },
  root: { imports: [...library, "origin", "cluster", "loadgen", "mount"], holds: "the package entry (src/index.ts)" }
}

/**
 * Files that sit in a higher layer than their folder. The settings registry and the
 * configuration docs renderer gather every component's settings (and the config file's
 * sections), so they stand with the command line, above the components whose settings they
 * list; nothing but scripts and tests import them.
 */
export const FILE_LAYERS: Readonly<Record<string, string>> = {
  "src/config/registry.ts": "cli",
  "src/config/docs.ts": "cli"
}
