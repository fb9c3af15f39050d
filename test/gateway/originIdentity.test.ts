/**
 * The gateway's pass-through (writes, bucket listings, account listings) signs with a workload
 * identity instead of static keys: S3 through the stub's STS (AssumeRoleWithWebIdentity from a
 * token file), Azure through its Entra endpoint (a federated token file). Credentials are
 * fetched once and reused; revoked ones are answered with a retryable 503 and replaced on the
 * retry; a refused grant is a 503 that names the source, with nothing sent to the origin.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as S3 from "../../src/backend/S3.js"
import { Gateway } from "../../src/gateway/Gateway.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { scopedTempDir } from "../support/scopedTempDir.js"

describe("gateway pass-through on workload identity", () => {
  it.scopedLive("S3 via STS web identity and Azure via a federated token: fetched, used, replaced when revoked, refusals named", () =>
    Effect.gen(function* () {
      const dir = yield* scopedTempDir("talon-gw-identity-")
      const root = path.join(dir, "origin")
      fs.mkdirSync(path.join(root, "bkt"), { recursive: true })
      fs.mkdirSync(path.join(root, "ctr"), { recursive: true })
      const stub = yield* OriginStub.make({ root })
      yield* stub.setTokens({ ttlSeconds: 3600, honourSeconds: 3600, refuse: false })
      const tokenFile = path.join(dir, "token")
      fs.writeFileSync(tokenFile, "eyJhbGciOiJSUzI1NiJ9.projected.sig\n")
      const policy = { timeoutMs: 5_000, retries: 0, retryBaseMs: 1, retryMaxMs: 5, maxSockets: 8 }

      const gw = Context.get(
        yield* Layer.build(
          Gateway.layerDeployment({
            gateway: { listen: "127.0.0.1:0", auth: false, credentials: {} },
            route: "origin",
            router: {
              // No static key: only the identity can sign.
              s3: {
                ...S3.localOptions(stub.url),
                accessKeyId: "",
                policy,
                identity: { _tag: "WebIdentity", roleArn: "arn:aws:iam::123456789012:role/talon-gw", tokenFile, sessionName: "talon-gw", stsEndpoint: `${stub.url}/_talon/sts` }
              },
              azure: {
                account: "devstoreaccount1",
                endpoint: stub.azureUrl,
                policy,
                credential: {
                  _tag: "Identity",
                  identity: { _tag: "WorkloadIdentity", tenantId: "00000000-1111-2222-3333-444444444444", clientId: "app-1", tokenFile, authorityHost: `${stub.url}/_talon/entra` }
                }
              }
            }
          })
        ),
        Gateway
      )
      const call = (method: string, url: string, body?: string, headers: Record<string, string> = {}) =>
        Effect.promise(async () => {
          const res = await fetch(`${gw.url}${url}`, { method, ...(body === undefined ? {} : { body }), headers })
          return { status: res.status, text: await res.text() }
        })
      const issued = Effect.map(stub.tokenStats(), (s) => s.issued)

      // S3: a write, a bucket listing and the account's bucket list, all signed with one set of STS credentials.
      expect((yield* call("PUT", "/bkt/wi/a.txt", "hello")).status).toBe(200)
      expect(fs.readFileSync(path.join(root, "bkt", "wi", "a.txt"), "utf8")).toBe("hello")
      expect((yield* call("GET", "/")).text).toContain("<Name>bkt</Name>")
      expect((yield* call("GET", "/bkt?list-type=2")).text).toContain("<Key>wi/a.txt</Key>")
      expect((yield* issued).sts).toBe(1)

      // Azure: a blob write with an Entra token from the federated file.
      const azPut = yield* call("PUT", "/devstoreaccount1/ctr/wi/b.txt", "azure", { "x-ms-blob-type": "BlockBlob" })
      expect(azPut.status).toBe(201)
      expect(fs.readFileSync(path.join(root, "ctr", "wi", "b.txt"), "utf8")).toBe("azure")
      expect((yield* issued).entra).toBe(1)

      // Revoked: the origin refuses the held credentials; the gateway drops them and the retry gets new ones.
      yield* stub.expireTokens()
      const refused = yield* call("PUT", "/bkt/wi/c.txt", "again")
      expect(refused.status).toBe(503)
      expect(refused.text).toContain("temporary credentials (ExpiredToken)")
      expect((yield* call("PUT", "/bkt/wi/c.txt", "again")).status).toBe(200)
      expect((yield* issued).sts).toBe(2)
      expect((yield* call("PUT", "/devstoreaccount1/ctr/wi/d.txt", "again", { "x-ms-blob-type": "BlockBlob" })).status).toBe(503)
      expect((yield* call("PUT", "/devstoreaccount1/ctr/wi/d.txt", "again", { "x-ms-blob-type": "BlockBlob" })).status).toBe(201)
      expect((yield* issued).entra).toBe(2)

      // A refused grant: a 503 naming where the credentials were to come from; the object is not written.
      yield* stub.setTokens({ refuse: true })
      yield* stub.expireTokens()
      yield* call("PUT", "/bkt/wi/e.txt", "no") // the held credentials are refused and dropped
      const denied = yield* call("PUT", "/bkt/wi/e.txt", "no")
      expect(denied.status).toBe(503)
      expect(denied.text).toContain("STS AssumeRoleWithWebIdentity")
      expect(fs.existsSync(path.join(root, "bkt", "wi", "e.txt"))).toBe(false)
    })
  )
})
