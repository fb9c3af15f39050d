import { Command } from "@effect/cli"
import { Console, Effect } from "effect"
import { explicitFrom, flaggedKeys, flagsOf } from "../config/cli.js"
import { resolve } from "../config/Setting.js"
import { SAMPLE_KEY, SEED_BUCKET } from "../origin/seed.js"
import { UpSchema, type UpSettings } from "./config.js"
import { LocalCluster, type LocalClusterShape } from "./LocalCluster.js"

/** One flag per setting, each generated from its declaration in ./config.ts. */
const upOptions = flagsOf(UpSchema, flaggedKeys(UpSchema))

const gatewayHowTo = (gateway: LocalClusterShape["gateway"]): Array<string> => {
  if (gateway === undefined) return []
  const open = !gateway.options.auth
  return [
    "",
    "Through the gateway with unmodified S3 / Azure clients:",
    `  AWS_ACCESS_KEY_ID=${open ? "any" : "<key>"} AWS_SECRET_ACCESS_KEY=${open ? "any" : "<secret>"} aws --endpoint-url ${gateway.url} --region us-east-1 s3 cp s3://${SEED_BUCKET}/${SAMPLE_KEY} -`,
    `  new S3Client({ endpoint: "${gateway.url}", forcePathStyle: true, region: "us-east-1", credentials })   // @aws-sdk/client-s3`,
    `  new BlobServiceClient("${gateway.azureUrl("devstoreaccount1")}", new StorageSharedKeyCredential(account, key))   // @azure/storage-blob`,
    ...(open
      ? [
          "",
          "WARNING: the gateway does NOT check credentials (no TALON_GATEWAY_ACCESS_KEY_ID/SECRET_ACCESS_KEY or",
          "TALON_GATEWAY_AZURE_ACCOUNT/KEY set): anyone who can reach it can read and write. Fine on loopback for a demo."
        ]
      : [`  (auth on: ${gateway.authSummary})`])
  ]
}

export const up = Command.make("up", upOptions, (flags) =>
  Effect.scoped(
    Effect.gen(function* () {
      const o = yield* resolve(UpSchema, explicitFrom<UpSettings, keyof UpSettings>(flags))
      const cluster = yield* LocalCluster.make({
        dir: o.dir,
        keep: o.keep,
        workers: o.workers,
        ephemeral: o.ephemeral,
        colocate: o.colocate,
        worker: o.pageSize === undefined ? {} : { pageSize: o.pageSize }
      })
      const coord = cluster.coordinator.controlAddress
      const lines = [
        "talon up: a local cache cluster is running (Ctrl-C stops it)",
        `  origin stub   ${cluster.origin.url}  (S3 path-style; Azure at ${cluster.origin.azureUrl}; GCS JSON API at ${cluster.origin.url}/storage/v1, tokens from its metadata-server emulation)`,
        `  coordinator   control ${coord}, admin http://${cluster.coordinator.adminAddress}`,
        `                management page http://${cluster.coordinator.adminAddress}/ui`,
        ...(cluster.gateway === undefined
          ? []
          : [
              `  gateway       ${cluster.gateway.url}  (${cluster.gateway.route} route; S3 path-style, Azure at ${cluster.gateway.azureUrl("devstoreaccount1")})`,
              ...(cluster.gateway.adminUrl === undefined ? [] : [`                admin ${cluster.gateway.adminUrl} (/healthz, /readyz, /metrics)`])
            ]),
        ...cluster.workers.map(
          (w) => `  ${w.node.id.padEnd(13)} data ${w.dataAddress}, admin http://${w.adminAddress} (${w.dataPlane} plane, ${w.serveMode})`
        ),
        `  data dir      ${cluster.dir}${o.dir !== undefined || o.keep ? " (kept)" : " (removed on exit)"}`,
        "",
        "Read through the cache:",
        `  npx talon read s3://${SEED_BUCKET}/${SAMPLE_KEY} --offset 0 --length 64 --coordinator ${coord} | xxd | head`,
        `  npx talon read gs://${SEED_BUCKET}/${SAMPLE_KEY} --offset 0 --length 64 --coordinator ${coord} | xxd | head`,
        `  npx talon cluster --coordinator ${coord}`,
        ...gatewayHowTo(cluster.gateway),
        `  npx talon loadgen --addr ${cluster.workers[0]?.dataAddress ?? "127.0.0.1:7001"} --object s3://${SEED_BUCKET}/${SAMPLE_KEY} --size 64M --conns 64 --seconds 5`
      ]
      yield* Console.log(lines.join("\n"))
      return yield* Effect.never
    })
  )
).pipe(
  Command.withDescription(
    "Start a whole local cluster in one process: an origin stub seeded with sample data, a coordinator, N workers with their own cache dirs, and the S3/Azure gateway on the cache route."
  )
)
