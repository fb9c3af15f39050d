/**
 * The admin token guarding the management page. Read from TALON_ADMIN_TOKEN, or Talon's
 * TALON_COORDINATOR_AUTH_TOKEN; unset = the page is open, like the rest of the admin port.
 */
import { timingSafeEqual } from "node:crypto"
import { Config, Option, Redacted } from "effect"

export const adminTokenConfig: Config.Config<Option.Option<Redacted.Redacted<string>>> = Config.option(
  Config.redacted("TALON_ADMIN_TOKEN").pipe(Config.orElse(() => Config.redacted("TALON_COORDINATOR_AUTH_TOKEN")))
).pipe(Config.map(Option.filter((t) => Redacted.value(t) !== "")))

/** Constant-time, so the comparison does not tell how much of a guess was right. */
export const tokenMatches = (token: Redacted.Redacted<string>, given: string | undefined): boolean => {
  if (given === undefined) return false
  const a = Buffer.from(Redacted.value(token))
  const b = Buffer.from(given)
  return a.length === b.length && timingSafeEqual(a, b)
}
