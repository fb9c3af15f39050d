import { Config, type ConfigError, Effect, Layer, Option, Runtime, type Scope, Stream } from "effect"
import { Backend, type ObjectId } from "../core/ids.js"
import * as Azure from "./Azure.js"
import { BackendRequestError, BackendStore, type BackendStoreShape, uploadStream } from "./BackendStore.js"
import * as Gcs from "./Gcs.js"
import { pullInto } from "./rangePush.js"
import { readerFromStream } from "./rangeReaders.js"
import * as S3 from "./S3.js"

/** The provider stores a router dispatches to; a missing one fails requests for its objects. */
export interface RoutedStores {
  readonly s3?: BackendStoreShape | undefined
  readonly azure?: BackendStoreShape | undefined
  readonly gcs?: BackendStoreShape | undefined
}

const schemeOf = (backend: Backend) => (backend === Backend.S3 ? "s3" : backend === Backend.Azure ? "az" : "gs")

const unconfigured = (backend: Backend, object: string, operation: string) =>
  new BackendRequestError({
    object,
    operation,
    retryable: false,
    detail: `no ${schemeOf(backend)} backend is configured (set ${backend === Backend.S3 ? "TALON_S3_*" : backend === Backend.Azure ? "TALON_AZURE_*" : "TALON_GCS_*"})`
  })

const uri = (object: ObjectId) => `${schemeOf(object.backend)}://${object.bucket}/${object.objectPath}`

/**
 * One BackendStore over several providers, dispatching on `ObjectId.backend`, so one worker
 * serves `s3://` and `az://` objects alike. `list` takes the provider from
 * `options.backend`, or the only configured one.
 */
export const route = (stores: RoutedStores): BackendStoreShape => {
  const pick = (backend: Backend): BackendStoreShape | undefined =>
    backend === Backend.S3 ? stores.s3 : backend === Backend.Azure ? stores.azure : stores.gcs
  const configured: Array<Backend> = []
  if (stores.s3) configured.push(Backend.S3)
  if (stores.azure) configured.push(Backend.Azure)
  if (stores.gcs) configured.push(Backend.Gcs)
  return {
    stat: (object) => {
      const store = pick(object.backend)
      return store ? store.stat(object) : Effect.fail(unconfigured(object.backend, uri(object), "stat"))
    },
    getRange: (object, offset, length, options) => {
      const store = pick(object.backend)
      return store
        ? store.getRange(object, offset, length, options)
        : Stream.fail(unconfigured(object.backend, uri(object), "getRange"))
    },
    openRange: (object, offset, length, options) => {
      const store = pick(object.backend)
      if (store?.openRange !== undefined) return store.openRange(object, offset, length, options)
      const stream = store ? store.getRange(object, offset, length, options) : Stream.fail(unconfigured(object.backend, uri(object), "getRange"))
      return readerFromStream(Runtime.defaultRuntime, stream)
    },
    pushRange: (object, offset, length, options, sink, signal) => {
      const store = pick(object.backend)
      if (store?.pushRange !== undefined) return store.pushRange(object, offset, length, options, sink, signal)
      const stream = store ? store.getRange(object, offset, length, options) : Stream.fail(unconfigured(object.backend, uri(object), "getRange"))
      return pullInto(store?.openRange?.(object, offset, length, options) ?? readerFromStream(Runtime.defaultRuntime, stream), sink, signal)
    },
    list: (bucket, options) => {
      const backend = options?.backend ?? (configured.length === 1 ? configured[0] : undefined)
      if (backend === undefined) {
        return Effect.fail(
          new BackendRequestError({
            object: bucket,
            operation: "list",
            retryable: false,
            detail: configured.length === 0 ? "no backend is configured" : "several backends are configured: say which with options.backend"
          })
        )
      }
      const store = pick(backend)
      return store ? store.list(bucket, options) : Effect.fail(unconfigured(backend, `${schemeOf(backend)}://${bucket}/`, "list"))
    },
    put: (object, body) => {
      const store = pick(object.backend)
      return store ? store.put(object, body) : Effect.fail(unconfigured(object.backend, uri(object), "put"))
    },
    putStream: (object, length, body) => {
      const store = pick(object.backend)
      return store ? uploadStream(store, object, length, body) : Effect.fail(unconfigured(object.backend, uri(object), "put"))
    },
    delete: (object) => {
      const store = pick(object.backend)
      return store ? store.delete(object) : Effect.fail(unconfigured(object.backend, uri(object), "delete"))
    }
  }
}

export interface RouterOptions {
  readonly s3?: S3.S3Options | undefined
  readonly azure?: Azure.AzureOptions | undefined
  readonly gcs?: Gcs.GcsOptions | undefined
}

export const make = (options: RouterOptions): Effect.Effect<BackendStoreShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const s3 = options.s3 === undefined ? undefined : yield* S3.make(options.s3)
    const azure = options.azure === undefined ? undefined : yield* Azure.make(options.azure)
    const gcs = options.gcs === undefined ? undefined : yield* Gcs.make(options.gcs)
    return route({ s3, azure, gcs })
  })

export const layer = (options: RouterOptions): Layer.Layer<BackendStore> => Layer.scoped(BackendStore, make(options))

/**
 * Each provider whose settings are present (`TALON_S3_*` with credentials, `TALON_AZURE_ACCOUNT`,
 * any of `TALON_GCS_ENDPOINT`/`TALON_GCS_AUTH`/a key file/`STORAGE_EMULATOR_HOST`);
 * a provider with no settings is simply absent, a provider with invalid settings is an error.
 */
export const RouterConfig: Config.Config<RouterOptions> = Config.all({
  s3: Config.option(S3.S3Config),
  azure: Config.option(Azure.AzureConfig),
  gcs: Config.option(Gcs.GcsConfig)
}).pipe(
  Config.map((c) => ({ s3: Option.getOrUndefined(c.s3), azure: Option.getOrUndefined(c.azure), gcs: Option.getOrUndefined(c.gcs) }))
)

export const layerConfig: Layer.Layer<BackendStore, ConfigError.ConfigError> = Layer.scoped(
  BackendStore,
  Effect.flatMap(RouterConfig, make)
)

/** Every provider against one local origin (the stub serves S3 at `url`, Azure at `url/devstoreaccount1`, GCS's JSON API at `url/storage/v1`). */
export const localOptions = (url: string): RouterOptions => ({
  s3: S3.localOptions(url),
  azure: Azure.localOptions(url),
  gcs: Gcs.localOptions(url)
})

export const layerLocal = (url: string): Layer.Layer<BackendStore> => layer(localOptions(url))
