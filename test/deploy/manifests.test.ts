/**
 * The deploy files are only worth shipping if they would be accepted as written: every Kubernetes
 * object validates against the API's own schemas (kubernetes-models carries them), and every
 * `talon` subcommand, flag and TALON_* variable a manifest or the Dockerfile uses is one the CLI
 * really accepts (asked of the real CLI's --help, not of a list kept here).
 */
import { describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { parseAllDocuments } from "yaml"
import { cliSurface } from "./cliSurface.js"
import { deployProblems } from "./manifestCheck.js"

const root = path.resolve(import.meta.dirname, "../..")
const k8sDir = path.join(root, "deploy", "k8s")

const readDocs = (file: string): ReadonlyArray<Record<string, unknown>> =>
  parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join("; ")}`)
    return d.toJS() as Record<string, unknown>
  }).filter((d) => d !== null)

const manifests = fs
  .readdirSync(k8sDir)
  .filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml")
  .flatMap((f) => readDocs(path.join(k8sDir, f)).map((doc) => ({ file: f, doc })))

describe("deploy/k8s", () => {
  it("holds the objects a cluster needs", () => {
    const kinds = manifests.map(({ doc }) => `${doc.kind}/${(doc.metadata as { name: string }).name}`).sort()
    expect(kinds).toEqual(
      expect.arrayContaining([
        "Deployment/talon-coordinator",
        "Service/talon-coordinator",
        "StatefulSet/talon-worker",
        "Service/talon-worker",
        "Deployment/talon-gateway",
        "PodDisruptionBudget/talon-worker",
        "PodDisruptionBudget/talon-coordinator",
        "ServiceMonitor/talon",
        "Secret/talon"
      ])
    )
    const kustomization = readDocs(path.join(k8sDir, "kustomization.yaml"))[0] as { resources: Array<string> }
    for (const r of kustomization.resources) expect(fs.existsSync(path.join(k8sDir, r)), `kustomization lists ${r}`).toBe(true)
    const listed = new Set(kustomization.resources)
    for (const f of fs.readdirSync(k8sDir).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml")) {
      expect(listed.has(f), `${f} is not in kustomization.yaml`).toBe(true)
    }
  })

  it("validates every object against the Kubernetes API schemas", async () => {
    const { validateObject } = await import("./k8sModels.js")
    for (const { file, doc } of manifests) {
      const problem = await validateObject(doc)
      expect(problem, `${file}: ${doc.kind}`).toBeUndefined()
    }
  })

  it("fails an object the API would refuse", async () => {
    const { validateObject } = await import("./k8sModels.js")
    const sts = structuredClone(manifests.find(({ doc }) => doc.kind === "StatefulSet")!.doc) as any
    sts.spec.replicas = "three"
    expect(await validateObject(sts)).toMatch(/replicas/)
  })

  it("uses only subcommands, flags and TALON_* variables the CLI accepts", () => {
    const surface = cliSurface()
    const dockerfile = fs.readFileSync(path.join(root, "deploy", "Dockerfile"), "utf8")
    expect(deployProblems(manifests.map((m) => m.doc), dockerfile, surface)).toEqual([])
    // ...and the check is not a formality: a planted typo in a flag and in a variable is reported.
    const planted = structuredClone(manifests.find(({ doc }) => doc.kind === "StatefulSet")!.doc) as any
    planted.spec.template.spec.containers[0].args.push("--cache-dirs", "/x")
    planted.spec.template.spec.containers[0].env.push({ name: "TALON_WORKER_CAPACITYY", value: "1G" })
    const problems = deployProblems([planted], dockerfile, surface)
    expect(problems.join("\n")).toMatch(/worker: unknown flag --cache-dirs/)
    expect(problems.join("\n")).toMatch(/TALON_WORKER_CAPACITYY/)
  })
})

describe("deploy/Dockerfile", () => {
  it("builds the addon in a builder stage and runs as non-root from Node 20 slim", () => {
    const text = fs.readFileSync(path.join(root, "deploy", "Dockerfile"), "utf8")
    const froms = [...text.matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1])
    expect(froms.length).toBeGreaterThanOrEqual(2)
    expect(froms.at(-1)).toMatch(/^node:20[-.\w]*slim$/)
    expect(text).toMatch(/^USER\s+(node|\d+)\s*$/m)
    expect(text).toMatch(/ENTRYPOINT \["\/app\/bin\/talon\.mjs"\]/)
    for (const m of text.matchAll(/^COPY (?!--from)(.+)$/gm)) {
      const sources = m[1].split(/\s+/).filter((s) => !s.startsWith("--")).slice(0, -1)
      for (const s of sources) expect(fs.existsSync(path.join(root, s)), `Dockerfile copies ${s}`).toBe(true)
    }
  })
})
