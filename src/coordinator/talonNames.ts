/**
 * Talon's coordinator variables (and flat coordinator-file keys) with no same-meaning
 * setting here, and what to use instead. Same-meaning names are aliases on the settings
 * (./config.ts, ./state/config.ts).
 */
import { ignoredName, type RefusedName } from "../config/Setting.js"

const refuse = (talon: string, use: string): RefusedName => ({ env: `TALON_COORDINATOR_${talon}`, use })

const noControlChannel = (talon: string) =>
  refuse(talon, "there is no separate mTLS worker-service listener here: workers reach TALON_COORDINATOR_LISTEN and authenticate with TALON_CLUSTER_TOKEN; remove it")

export const TALON_COORDINATOR_REFUSED: ReadonlyArray<RefusedName> = [
  ignoredName("TALON_COORDINATOR_HA_ENABLED", "with TALON_STATE_BACKEND=etcd every coordinator is active; with memory there is one"),
  ignoredName("TALON_COORDINATOR_REPLICAS", "coordinators sharing an etcd state store need not know their count"),
  // Talon's file spells the same setting coordinator_replicas.
  ignoredName("TALON_COORDINATOR_COORDINATOR_REPLICAS", "coordinators sharing an etcd state store need not know their count"),
  ignoredName("TALON_COORDINATOR_NODE_ID", "a coordinator is known by its control address here"),
  refuse("ADMIN_ADVERTISE", "node status does not carry the admin address here; remove it"),
  noControlChannel("CONTROL_LISTEN"),
  noControlChannel("CONTROL_TLS_CA_CERT_PATH"),
  noControlChannel("CONTROL_TLS_CERT_PATH"),
  noControlChannel("CONTROL_TLS_KEY_PATH"),
  noControlChannel("CONTROL_TLS_TRUST_DOMAIN"),
  refuse("NAMESPACE_POLICY_PATH", "namespace policies are not supported here; remove it"),
  refuse("METADATA_ENDPOINTS", "there is no metadata store (TMS) here: the mount has no hard links or locks; remove it"),
  refuse("METADATA_PREFIX", "there is no metadata store (TMS) here; remove it"),
  refuse("K8S_NAMESPACE", "the kubernetes state backend is not supported here: use TALON_STATE_BACKEND=etcd with TALON_ETCD_ENDPOINTS")
]
