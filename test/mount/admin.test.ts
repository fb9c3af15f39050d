import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { serveMountAdmin } from "../../src/mount/MountAdminHttp.js"
import { MountMetrics, renderMountMetrics } from "../../src/mount/metrics.js"

describe("mount admin HTTP", () => {
  it.scoped("serves /metrics (reads, bytes, latency histogram, errors by errno) and /healthz", () =>
    Effect.gen(function* () {
      const m = new MountMetrics()
      m.reads = 3
      m.readBytes = 3 * 1048576
      m.readLatency.observe(0.002)
      m.error("ENOENT")
      m.error("EIO")
      m.error("EIO")
      let healthy = true
      const address = yield* serveMountAdmin(
        "127.0.0.1:0",
        () => ({ ok: healthy, detail: healthy ? "mounted" : "coordinator down" }),
        () => renderMountMetrics(m, { inodes: 7, openHandles: 1, evictedInodes: 0 })
      )
      const get = (p: string) => Effect.promise(() => fetch(`http://${address}${p}`).then(async (r) => ({ status: r.status, body: await r.text() })))
      const metrics = yield* get("/metrics")
      expect(metrics.status).toBe(200)
      expect(metrics.body).toContain("talon_mount_reads_total 3\n")
      expect(metrics.body).toContain("talon_mount_read_bytes_total 3145728\n")
      expect(metrics.body).toContain('talon_mount_errors_total{errno="EIO"} 2\n')
      expect(metrics.body).toContain('talon_mount_read_seconds_bucket{le="0.0025"} 1\n')
      expect(metrics.body).toContain("talon_mount_read_seconds_count 1\n")
      expect(metrics.body).toContain("talon_mount_inodes 7\n")
      expect(yield* get("/healthz")).toEqual({ status: 200, body: "ok: mounted\n" })
      healthy = false
      expect((yield* get("/healthz")).status).toBe(503)
      expect((yield* get("/nope")).status).toBe(404)
    })
  )
})
