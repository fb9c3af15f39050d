/**
 * deploy/helm/talon rendered without helm (helmRender.ts) with its default values and with every
 * option on (control mTLS, etcd TLS, gateway principals, workload identity): each object
 * validates against the Kubernetes API schemas, and every flag and TALON_* variable it uses is
 * one the CLI accepts.
 */
import { describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { parse, parseAllDocuments } from "yaml"
import { cliSurface } from "./cliSurface.js"
import { render, type RenderContext } from "./helmRender.js"
import { deployProblems } from "./manifestCheck.js"

const root = path.resolve(import.meta.dirname, "../..")
const chart = path.join(root, "deploy", "helm", "talon")
const defaults = parse(fs.readFileSync(path.join(chart, "values.yaml"), "utf8")) as Record<string, unknown>

const everything = {
  ...defaults,
  serviceAccount: {
    annotations: { "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/talon", "azure.workload.identity/client-id": "00000000-0000-0000-0000-000000000000" },
    podLabels: { "azure.workload.identity/use": "true" }
  },
  worker: { ...(defaults.worker as object), storageClassName: "fast-ssd" },
  gateway: { ...(defaults.gateway as object), identitiesSecret: "talon-gateway-identities" },
  controlTls: { ...(defaults.controlTls as object), enabled: true, data: true },
  etcdTls: { ...(defaults.etcdTls as object), enabled: true }
}

const objects = (values: Record<string, unknown>) => {
  const ctx: RenderContext = { Values: values, Release: { Name: "talon", Namespace: "talon" } }
  return fs
    .readdirSync(path.join(chart, "templates"))
    .filter((f) => f.endsWith(".yaml"))
    .flatMap((f) =>
      parseAllDocuments(render(fs.readFileSync(path.join(chart, "templates", f), "utf8"), ctx))
        .map((d) => {
          if (d.errors.length > 0) throw new Error(`${f}: ${d.errors.map((e) => e.message).join("; ")}`)
          return d.toJS() as Record<string, unknown> | null
        })
        .filter((d): d is Record<string, unknown> => d !== null)
    )
}

const env = (docs: ReadonlyArray<Record<string, unknown>>, kind: string) =>
  JSON.stringify(docs.filter((d) => d.kind === kind))

describe("deploy/helm/talon", () => {
  it("renders valid objects with the default values and with every option on", async () => {
    const { validateObject } = await import("./k8sModels.js")
    // The CLI's --help is asked once (a process per subcommand the chart runs).
    const surface = cliSurface(["coordinator", "worker", "gateway"])
    for (const values of [defaults, everything]) {
      const docs = objects(values)
      expect(docs.map((d) => `${d.kind}/${(d.metadata as { name: string }).name}`).sort()).toEqual([
        "Deployment/talon-coordinator",
        "Deployment/talon-gateway",
        "Service/talon-coordinator",
        "Service/talon-gateway",
        "Service/talon-worker",
        "ServiceAccount/talon",
        "StatefulSet/talon-worker"
      ])
      for (const doc of docs) expect(await validateObject(doc), `${doc.kind}`).toBeUndefined()
      expect(deployProblems(docs, "", surface)).toEqual([])
    }
  }, 60_000)

  it("turns the options into the settings they stand for", () => {
    const plain = objects(defaults)
    expect(env(plain, "Deployment")).not.toContain("CONTROL_TLS")
    expect(env(plain, "Deployment")).toContain('"TALON_COORDINATOR_OBJECT_METADATA","value":"workers"')
    const all = objects(everything)
    expect(env(all, "Deployment")).toContain("TALON_COORDINATOR_CONTROL_TLS_TRUST_DOMAIN")
    expect(env(all, "Deployment")).toContain("TALON_ETCD_CLIENT_CERT_PATH")
    expect(env(all, "Deployment")).toContain("TALON_GATEWAY_AUTHORIZATION_PATH")
    expect(env(all, "StatefulSet")).toContain("TALON_WORKER_CONTROL_TLS_CA_CERT_PATH")
    // The gateway's cluster client dials coordinators and workers with the same Secret.
    expect(env(all, "Deployment")).toContain("TALON_CLIENT_CONTROL_TLS_CERT_PATH")
    expect(env(all, "Deployment")).toContain("TALON_CLIENT_DATA_TLS")
    expect(env(all, "Deployment")).toContain("TALON_COORDINATOR_DATA_TLS")
    expect(env(all, "StatefulSet")).toContain("TALON_WORKER_DATA_TLS")
    expect(env(plain, "StatefulSet")).not.toContain("DATA_TLS")
    const sa = all.find((d) => d.kind === "ServiceAccount") as { metadata: { annotations: Record<string, string> } }
    expect(sa.metadata.annotations["eks.amazonaws.com/role-arn"]).toContain("role/talon")
    expect(env(all, "StatefulSet")).toContain('"azure.workload.identity/use":"true"')
  })

  it("refuses template features outside the subset it renders", () => {
    const ctx: RenderContext = { Values: {}, Release: { Name: "r", Namespace: "n" } }
    expect(() => render("{{ include \"x\" . }}", ctx)).toThrow(/unsupported/)
    expect(() => render("{{ if .Values.a }}", ctx)).toThrow(/if without end/)
  })
})
