import type { RequestKind } from "./faults.js"

/** What the stub has been asked, so tests can assert e.g. "a warm read never reached the origin". */
export interface OriginStats {
  readonly requests: Readonly<Record<RequestKind, number>>
  readonly total: number
  readonly byProtocol: { readonly s3: number; readonly azure: number; readonly gcs: number }
  /** Response body bytes of GETs actually written to sockets. */
  readonly bytesServed: number
  /** Object bytes stored by PUTs (decoded, after aws-chunked framing). */
  readonly bytesReceived: number
  readonly faults: { readonly delayed: number; readonly failed: number; readonly reset: number }
  /** Requests of each kind being answered now, and the most there have been at once (since the last reset). */
  readonly inflight: Readonly<Record<RequestKind, number>>
  readonly peakInflight: Readonly<Record<RequestKind, number>>
}

const zero = (): Record<RequestKind, number> => ({ head: 0, get: 0, list: 0, put: 0, delete: 0, other: 0 })

export class StatsCounter {
  requests: Record<RequestKind, number> = { head: 0, get: 0, list: 0, put: 0, delete: 0, other: 0 }
  s3 = 0
  azure = 0
  gcs = 0
  bytesServed = 0
  bytesReceived = 0
  delayed = 0
  failed = 0
  reset = 0
  inflight = zero()
  peakInflight = zero()

  /** A request of `kind` starts being answered; `end` when its response is closed. */
  begin(kind: RequestKind): void {
    const now = ++this.inflight[kind]
    if (now > this.peakInflight[kind]) this.peakInflight[kind] = now
  }

  end(kind: RequestKind): void {
    this.inflight[kind]--
  }

  snapshot(): OriginStats {
    const r = { ...this.requests }
    return {
      requests: r,
      total: r.head + r.get + r.list + r.put + r.delete + r.other,
      byProtocol: { s3: this.s3, azure: this.azure, gcs: this.gcs },
      bytesServed: this.bytesServed,
      bytesReceived: this.bytesReceived,
      faults: { delayed: this.delayed, failed: this.failed, reset: this.reset },
      inflight: { ...this.inflight },
      peakInflight: { ...this.peakInflight }
    }
  }

  clear(): void {
    this.requests = { head: 0, get: 0, list: 0, put: 0, delete: 0, other: 0 }
    // Requests still being answered stay counted: their `end` is still to come.
    this.peakInflight = { ...this.inflight }
    this.s3 = this.azure = this.gcs = this.bytesServed = this.bytesReceived = this.delayed = this.failed = this.reset = 0
  }
}
