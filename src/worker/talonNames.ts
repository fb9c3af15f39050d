/**
 * Talon's worker variables (and flat worker-file keys) that have no same-meaning setting
 * here: each says what to use instead, or why it is accepted and ignored. Same-meaning
 * names are aliases on the settings themselves (./config.ts).
 */
import { ignoredName, type RefusedName } from "../config/Setting.js"

const origin = (talon: string, ours: string): RefusedName => ({
  env: `TALON_WORKER_${talon}`,
  use: `the origin is configured per process, not per worker; set ${ours} instead`
})

const noControlChannel = (talon: string): RefusedName => ({
  env: `TALON_WORKER_${talon}`,
  use: "there is no separate mTLS control listener here: workers send status to the coordinator's control port (TALON_WORKER_COORDINATOR) and authenticate with TALON_CLUSTER_TOKEN; remove it"
})

export const TALON_WORKER_REFUSED: ReadonlyArray<RefusedName> = [
  ignoredName("TALON_WORKER_L1_CAPACITY_BYTES", "there is no separate DRAM tier here: the kernel's page cache keeps hot pages in memory"),
  ignoredName("TALON_WORKER_L1_PAGE_SIZE_BYTES", "only shapes Talon's DRAM tier, which this worker has not"),
  ignoredName(
    "TALON_WORKER_PAGED_MISS_RUN_CONCURRENCY",
    "a tuning knob bounding Talon's missing-page runs per read; here fetches are bounded per object by TALON_WORKER_ORIGIN_CONCURRENCY_PER_OBJECT"
  ),
  {
    env: "TALON_WORKER_DATA_PLANE_RINGS",
    use: "io_uring rings do not exist here; use TALON_WORKER_LOOPS (processes serving the data port, 1 = this process) and TALON_WORKER_DATA_PLANE"
  },
  { env: "TALON_WORKER_FORCE_TOKIO_DATA_PLANE", use: "use TALON_WORKER_DATA_PLANE=portable" },
  { env: "TALON_WORKER_BACKEND", use: "the origin is chosen by the object URI (s3://, az://) and configured by TALON_S3_* / TALON_AZURE_*" },
  origin("S3_REGION", "TALON_S3_REGION"),
  origin("S3_ENDPOINT", "TALON_S3_ENDPOINT"),
  origin("S3_ACCESS_KEY_ID", "TALON_S3_ACCESS_KEY_ID"),
  origin("S3_SECRET_ACCESS_KEY", "TALON_S3_SECRET_ACCESS_KEY"),
  origin("S3_SESSION_TOKEN", "TALON_S3_SESSION_TOKEN"),
  origin("S3_PATH_STYLE", "TALON_S3_PATH_STYLE"),
  origin("AZURE_ACCOUNT", "TALON_AZURE_ACCOUNT"),
  origin("AZURE_ENDPOINT", "TALON_AZURE_ENDPOINT"),
  origin("AZURE_SAS", "TALON_AZURE_SAS"),
  {
    env: "TALON_WORKER_BACKEND_DELAY_MS",
    use: "injected origin latency lives in the origin stub here: `talon origin --latency-ms`"
  },
  { env: "TALON_WORKER_BACKEND_JITTER_MS", use: "injected origin latency lives in the origin stub here: `talon origin --latency-tail`" },
  { env: "TALON_WORKER_BACKEND_THROUGHPUT_BYTES", use: "an origin bandwidth cap lives in the origin stub here: `talon origin --bandwidth`" },
  ignoredName("TALON_WORKER_BACKEND_MAX_RETRIES", "origin retries follow this worker's own policy"),
  ignoredName("TALON_WORKER_BACKEND_RETRY_BASE_MS", "origin retries follow this worker's own policy"),
  ignoredName("TALON_WORKER_BACKEND_RETRY_MAX_DELAY_MS", "origin retries follow this worker's own policy"),
  ignoredName("TALON_WORKER_BACKEND_TIMEOUT_FLOOR_MS", "origin deadlines follow this worker's own policy"),
  ignoredName("TALON_WORKER_BACKEND_MIN_THROUGHPUT_BYTES", "origin deadlines follow this worker's own policy"),
  noControlChannel("CONTROL_LISTEN"),
  noControlChannel("CONTROL_TLS_CA_CERT_PATH"),
  noControlChannel("CONTROL_TLS_CERT_PATH"),
  noControlChannel("CONTROL_TLS_KEY_PATH"),
  noControlChannel("CONTROL_TLS_TRUST_DOMAIN"),
  { env: "TALON_WORKER_NAMESPACE_POLICY_PATH", use: "namespace policies are not supported here; remove it" }
]
