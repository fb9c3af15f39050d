/**
 * Validates a Kubernetes object against the API's OpenAPI schema for its apiVersion and kind
 * (kubernetes-models; the Prometheus Operator's CRDs for ServiceMonitor).
 * Undefined when valid, else the validator's message.
 */
const modules: Record<string, () => Promise<Record<string, unknown>>> = {
  v1: () => import("kubernetes-models/v1"),
  "apps/v1": () => import("kubernetes-models/apps/v1"),
  "policy/v1": () => import("kubernetes-models/policy/v1"),
  "monitoring.coreos.com/v1": () => import("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1")
}

type Model = new (data: unknown) => { validate(): void }

export const validateObject = async (doc: Record<string, unknown>): Promise<string | undefined> => {
  const apiVersion = String(doc.apiVersion)
  const kind = String(doc.kind)
  const load = modules[apiVersion]
  if (load === undefined) return `no schema for apiVersion ${apiVersion}`
  const ctor = (await load())[kind] as Model | undefined
  if (ctor === undefined) return `no schema for ${apiVersion} ${kind}`
  try {
    new ctor(doc).validate()
    return undefined
  } catch (e) {
    return e instanceof Error ? e.message : String(e)
  }
}
