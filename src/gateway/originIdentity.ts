/**
 * The gateway's own origin identity when it is a workload identity rather than static keys:
 * the same token sources and cache the workers' backends use (awsIdentity.ts, azureIdentity.ts,
 * bearerTokens.ts), read by the pass-through signer and the few origin calls the gateway makes
 * itself. Static keys (and SAS) need none of this: the signer reads them from the options.
 */
import { Cause, Effect, Redacted, Runtime, type Scope } from "effect"
import { awsCredentialSource } from "../backend/awsIdentity.js"
import { azureTokenSource } from "../backend/azureIdentity.js"
import { bearer, CredentialError } from "../backend/bearerTokens.js"
import { cachedTokens } from "../backend/bearerTokens.js"
import type { Transport } from "../backend/http.js"
import type { RouterOptions } from "../backend/Router.js"

export interface OriginCredentials {
  /** Temporary S3 credentials, fetched or renewed as needed (absent: the static key pair signs). */
  readonly s3?: (() => Promise<{ accessKeyId: string; secretAccessKey: string; sessionToken: string }>) | undefined
  /** The Azure `authorization` header from an Entra token (absent: Shared Key or SAS). */
  readonly azureAuthorization?: (() => Promise<string>) | undefined
  /** Drops `provider`'s cached credentials (the origin refused them). */
  readonly invalidate?: ((provider: "s3" | "azure") => void) | undefined
}

/** Token caches for whichever providers use a workload identity; they renew in `scope`'s lifetime. */
export const makeOriginCredentials = (options: RouterOptions, transport: Transport): Effect.Effect<OriginCredentials, never, Scope.Scope> =>
  Effect.gen(function* () {
    const run = Runtime.runPromise(yield* Effect.runtime<never>())
    const aws = options.s3?.identity === undefined ? undefined : yield* cachedTokens(awsCredentialSource(transport, options.s3.identity))
    const azureCredential = options.azure?.credential
    const azure = azureCredential?._tag === "Identity" ? yield* cachedTokens(azureTokenSource(transport, azureCredential.identity)) : undefined
    return {
      s3:
        aws === undefined
          ? undefined
          : () =>
              run(
                Effect.map(aws.get, (c) => ({
                  accessKeyId: c.accessKeyId,
                  secretAccessKey: Redacted.value(c.secretAccessKey),
                  sessionToken: Redacted.value(c.sessionToken)
                }))
              ),
      azureAuthorization: azure === undefined ? undefined : () => run(Effect.map(azure.get, bearer)),
      invalidate: (provider) => (provider === "s3" ? aws : azure)?.invalidate()
    }
  })

/** The CredentialError inside a rejection from the providers above, or undefined for any other failure. */
export const credentialFailure = (error: unknown): CredentialError | undefined => {
  const cause = Runtime.isFiberFailure(error) ? Cause.squash(error[Runtime.FiberFailureCauseId]) : error
  return cause instanceof CredentialError ? cause : undefined
}
