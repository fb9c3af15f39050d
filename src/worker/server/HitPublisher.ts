/**
 * Keeps a plane's hit table (native/hits.c) in step with the worker, so the plane can answer
 * repeated hits of an idle connection without calling into JS.
 *
 * Only what the JS hit path has just served is published: the object (its wire id, size and
 * geometry) for as long as its cached version may be served without renewal, and the one
 * unit (block or page) the reply came from. Everything that makes a published reply wrong
 * takes it out first: an evicted unit (DiskStore.onUnitGone), a dropped or changed version
 * (VersionCache.onDrop), a worker that stops being ready. What the table answers is counted
 * into the worker's hits and bytes (WorkerStats.offloaded) and touched in the store's LRU on
 * each sweep, so eviction still sees those units as hot.
 */
import type { HitTable } from "../plane/DataPlane.js"
import type { VersionCache } from "../miss/VersionCache.js"
import type { ReadyState } from "../membership/Readiness.js"
import type { RangeReply } from "../ReadPath.js"
import { Context } from "effect"
import type { Unit } from "../store/entry.js"
import type { KnownObject } from "./ObjectIdCache.js"

/**
 * The store whose units the table answers from: the worker's DiskStore, or a `--loops` serving
 * loop's LeaseStore. It says when a unit stops being servable (before its fd closes), and
 * takes the table's answers into its LRU.
 */
export interface HitSource {
  onUnitGone: ((unit: Unit) => void) | undefined
  touch(unit: Unit): void
}

/** A process without a BlockStore of its own (a `--loops` serving loop) provides the store its hits come from. */
export class HitSourceTag extends Context.Tag("talon/worker/HitSource")<HitSourceTag, HitSource>() {}

/** An object with less servable time left than this is left to JS (its renewal is near). */
const MIN_FRESH_MS = 20
/** How often the owner calls `sweep` (a fiber of the worker's scope, see DataServer.ts). */
export const HIT_SWEEP_MS = 250

interface Published {
  readonly key: string
  readonly oid: number
  readonly version: string
  readonly blockSize: number
  readonly pageSize: number
  /** Servable until (VersionCache clock): the version's renewal or expiry, whichever is first. */
  until: number
  readonly units: Set<Unit>
}

export class HitPublisher {
  readonly #byKey = new Map<string, Published>()
  readonly #byOid = new Map<number, Published>()
  /** Published units by tag (the table reports answered units by tag). */
  readonly #tagged: Array<Unit | undefined> = []
  readonly #freeTags: Array<number> = []
  readonly #swept = new Int32Array(4096)
  #closed = false

  constructor(
    private readonly table: HitTable,
    private readonly store: HitSource,
    private readonly versions: VersionCache,
    private readonly ready: ReadyState,
    // The VersionCache's clock: `until` is read from its entries.
    private readonly now: () => number = Date.now
  ) {
    store.onUnitGone = (u) => this.#unitGone(u)
    versions.onDrop = (key) => {
      const pub = this.#byKey.get(key)
      if (pub !== undefined) this.#dropObject(pub)
    }
    ready.onChange = (isReady) => {
      if (!isReady) this.clear()
    }
  }

  /** The serve loop answered a hit of `known` from `reply`: publish its object and unit if they are not yet. */
  offer(known: KnownObject, reply: RangeReply): void {
    if (reply.units.length !== 1 || this.#closed || !this.ready.ready) return
    const unit = reply.units[0]!
    const now = this.now()
    let pub = this.#byKey.get(known.key)
    if (pub !== undefined && unit.hit === pub.oid && pub.until - now >= MIN_FRESH_MS) return
    const cached = this.versions.entry(known.key)
    if (cached === undefined) return
    // A pinned read of another version than the current one is never the table's.
    if (known.version !== undefined && known.version !== cached.stat.version) return
    const until = Math.min(cached.refreshAt, cached.expiresAt)
    if (until - now < MIN_FRESH_MS) return
    const meta = unit.entry.meta
    if (meta.id.version !== cached.stat.version) return
    if (pub !== undefined && pub.version !== cached.stat.version) {
      this.#dropObject(pub)
      pub = undefined
    }
    if (pub !== undefined && (pub.blockSize !== meta.id.blockSize || pub.pageSize !== meta.pageSize)) return
    if (pub === undefined || pub.until !== until) {
      const version = bincodeString(cached.stat.version)
      // A GetCachedRange's known bytes carry its version String after the ObjectId: the table keys on the ObjectId.
      const id = known.version === undefined ? known.bytes : known.bytes.subarray(0, known.bytes.length - version.length)
      const oid = this.table.publishObject(id, cached.stat.size, meta.id.blockSize, meta.pageSize, until - now, version)
      if (oid <= 0) return
      if (pub === undefined) {
        pub = {
          key: known.key,
          oid,
          version: cached.stat.version,
          blockSize: meta.id.blockSize,
          pageSize: meta.pageSize,
          until,
          units: new Set()
        }
        this.#byKey.set(known.key, pub)
        this.#byOid.set(oid, pub)
      } else pub.until = until
    }
    if (unit.hit === pub.oid || unit.fd < 0 || unit.gone) return
    const tag = this.#freeTags.pop() ?? this.#tagged.length
    if (this.table.publishUnit(pub.oid, unitStart(unit), unit.bytes, unit.fd, tag) !== 0) {
      if (tag < this.#tagged.length) this.#freeTags.push(tag)
      return
    }
    this.#tagged[tag] = unit
    unit.hit = pub.oid
    unit.hitTag = tag
    pub.units.add(unit)
  }

  /** Touches what the table answered in the store's LRU; drops objects whose time ran out. */
  sweep(): void {
    if (this.#closed) return
    for (;;) {
      const n = this.table.sweep(this.#swept)
      for (let i = 0; i < n; i++) {
        const u = this.#tagged[this.#swept[i]!]
        if (u !== undefined) this.store.touch(u)
      }
      if (n < this.#swept.length) break
    }
    const now = this.now()
    for (const pub of this.#byKey.values()) if (pub.until <= now) this.#dropObject(pub)
  }

  /** Unpublishes everything (the table answers nothing until the serve loop offers again). */
  clear(): void {
    for (const pub of [...this.#byKey.values()]) this.#forget(pub)
    this.table.clear()
  }

  close(): void {
    if (this.#closed) return
    this.sweep()
    this.#closed = true
    this.clear()
    this.table.close()
    if (this.store.onUnitGone !== undefined) this.store.onUnitGone = undefined
    this.versions.onDrop = undefined
    this.ready.onChange = undefined
  }

  #unitGone(u: Unit): void {
    if (u.hit === 0) return
    const pub = this.#byOid.get(u.hit)
    this.table.dropUnit(u.hit, unitStart(u))
    if (pub !== undefined) pub.units.delete(u)
    this.#release(u)
  }

  #dropObject(pub: Published): void {
    this.table.dropObject(pub.oid)
    this.#forget(pub)
  }

  #forget(pub: Published): void {
    for (const u of pub.units) this.#release(u)
    pub.units.clear()
    this.#byKey.delete(pub.key)
    this.#byOid.delete(pub.oid)
  }

  #release(u: Unit): void {
    if (u.hitTag >= 0) {
      this.#tagged[u.hitTag] = undefined
      this.#freeTags.push(u.hitTag)
    }
    u.hit = 0
    u.hitTag = -1
  }
}

/** A bincode String: u64 LE byte length, then the UTF-8 bytes. */
const bincodeString = (s: string): Uint8Array => {
  const utf8 = Buffer.from(s, "utf8")
  const out = Buffer.alloc(8 + utf8.length)
  out.writeBigUInt64LE(BigInt(utf8.length), 0)
  utf8.copy(out, 8)
  return out
}

/** First object byte of a unit: its block's offset, plus its page's offset in the block. */
const unitStart = (u: Unit): number => u.entry.meta.id.offset + u.index * u.entry.meta.pageSize
