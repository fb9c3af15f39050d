import { Data } from "effect"

const MiB = 1024 * 1024
const gib = (bytes: number) => `${(bytes / (1024 * MiB)).toFixed(2)} GiB`

/** The prefix would not fit the cluster's cache: warming it would evict its own first blocks. */
export class PrefetchTooLarge extends Data.TaggedError("PrefetchTooLarge")<{
  readonly prefix: string
  readonly objects: number
  readonly bytes: number
  readonly replicas: number
  readonly capacityBytes: number
  readonly workers: number
}> {
  override get message() {
    const copies = this.replicas > 1 ? ` x ${this.replicas} replicas = ${gib(this.bytes * this.replicas)}` : ""
    return (
      `${this.prefix} holds ${this.objects} object(s), ${gib(this.bytes)}${copies}, more than the cluster's cache capacity of ` +
      `${gib(this.capacityBytes)} (${this.workers} worker(s)); warming it would evict its own blocks. ` +
      `Prefetch a narrower prefix, add workers or capacity, or pass --force to warm it anyway.`
    )
  }
}

/** The listing found nothing to warm. */
export class NothingToPrefetch extends Data.TaggedError("NothingToPrefetch")<{ readonly prefix: string }> {
  override get message() {
    return `no objects under ${this.prefix}: check the bucket and the prefix (the listing is by key prefix, e.g. s3://bucket/dataset/)`
  }
}

/** Some Loads failed; the rest of the prefix was warmed. Re-running retries only what is still cold. */
export class PrefetchIncomplete extends Data.TaggedError("PrefetchIncomplete")<{
  readonly failed: number
  readonly reasons: ReadonlyArray<string>
}> {
  override get message() {
    const shown = this.reasons.slice(0, 5).join("; ")
    const more = this.reasons.length > 5 ? ` (and ${this.reasons.length - 5} more)` : ""
    return `${this.failed} Load(s) failed: ${shown}${more}. Run the same prefetch again to retry what is still cold.`
  }
}

/** The coordinator's admin API did not give the cluster's capacity. */
export class CapacityUnknown extends Data.TaggedError("CapacityUnknown")<{ readonly admin: string; readonly detail: string }> {
  override get message() {
    return `cannot read the cluster's cache capacity from the coordinator admin API at ${this.admin}: ${this.detail}; check --admin, or pass --force to skip the check`
  }
}
