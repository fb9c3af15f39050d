import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { afterAll, describe, expect, it } from "vitest"
import { Effect } from "effect"
import { SAMPLE_KEY, SEED_BUCKET, sampleBytes } from "../../src/origin/seed.js"
import { TalonClient } from "../../src/client/TalonClient.js"
import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3"
import { BlobServiceClient, StorageSharedKeyCredential } from "@azure/storage-blob"
import { AZURITE_ACCOUNT, AZURITE_KEY } from "../../src/origin/OriginStub.js"
import { eventually } from "../support/eventually.js"

// `npm start` = `talon up`: a real child process, read through it with the client library,
// then Ctrl-C (SIGINT) must stop everything and remove the temp dir.
const children: Array<ChildProcess> = []
afterAll(() => children.forEach((c) => c.kill("SIGKILL")))

const startUp = () =>
  new Promise<{ child: ChildProcess; out: () => string; banner: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ["bin/talon.mjs", "up", "--ephemeral"], { stdio: ["ignore", "pipe", "pipe"] })
    children.push(child)
    let out = ""
    const onData = (d: Buffer) => {
      out += d.toString()
      if (out.includes("Read through the cache:")) resolve({ child, out: () => out, banner: out })
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.on("exit", (code) => reject(new Error(`talon up exited early (${code}):\n${out}`)))
  })

describe("talon up", () => {
  it("starts a cluster that serves the origin's bytes, and Ctrl-C stops it cleanly", async () => {
    const { child, out, banner } = await startUp()
    const coordinator = /coordinator\s+control (\S+),/.exec(banner)?.[1]
    const dir = /data dir\s+(\S+)/.exec(banner)?.[1]
    expect(coordinator).toBeDefined()
    expect(dir && fs.existsSync(dir)).toBe(true)

    const offset = 3 * 1024 * 1024 + 17
    const bytes = await Effect.runPromise(
      Effect.gen(function* () {
        const client = yield* TalonClient
        // Workers register asynchronously; the client refreshes membership and retries once.
        return yield* eventually(client.read(`s3://${SEED_BUCKET}/${SAMPLE_KEY}`, offset, 4096), {
          what: "a read through the started cluster",
          within: "15 seconds",
          every: "100 millis"
        })
      }).pipe(Effect.provide(TalonClient.layer({ coordinator: coordinator!, membershipTtlMs: 200 })))
    )
    expect(Buffer.from(bytes).equals(sampleBytes(offset, 4096))).toBe(true)

    // The gateway on the cache route, driven by the unmodified SDKs.
    const gateway = /gateway\s+(http:\/\/\S+)/.exec(banner)?.[1]
    expect(gateway).toBeDefined()
    expect(banner).toContain("WARNING: the gateway does NOT check credentials")
    const s3 = new S3Client({
      endpoint: gateway!,
      forcePathStyle: true,
      region: "us-east-1",
      credentials: { accessKeyId: "any", secretAccessKey: "any" }
    })
    const got = await s3.send(
      new GetObjectCommand({ Bucket: SEED_BUCKET, Key: SAMPLE_KEY, Range: `bytes=${offset}-${offset + 65535}` })
    )
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(sampleBytes(offset, 65536))).toBe(true)
    s3.destroy()
    const blob = new BlobServiceClient(
      `${gateway}/${AZURITE_ACCOUNT}`,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_KEY)
    )
      .getContainerClient(SEED_BUCKET)
      .getBlobClient(SAMPLE_KEY)
    const azureBytes = await blob.downloadToBuffer(offset, 4096)
    expect(azureBytes.equals(sampleBytes(offset, 4096))).toBe(true)

    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
    child.kill("SIGINT")
    expect(await exited).toBe(0)
    expect(fs.existsSync(dir!)).toBe(false)
    expect(out()).not.toMatch(/ERROR/)
  }, 180_000)
})
