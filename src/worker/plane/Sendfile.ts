import { Data, Effect, Layer } from "effect"
import { DataPlane } from "./DataPlane.js"
import { makeNativePlane, type NativeOptions } from "./Native.js"
import { makePortablePlane } from "./Portable.js"

/** `--data-plane native` was asked for explicitly and the addon cannot run here. */
export class NativePlaneUnavailable extends Data.TaggedError("NativePlaneUnavailable")<{ readonly reason: string }> {
  override get message() {
    return `the native data plane cannot run: ${this.reason} (use --data-plane portable, or auto to fall back)`
  }
}

export type DataPlaneChoice = "auto" | "native" | "portable"

const logChoice = (plane: DataPlane["Type"]) =>
  Effect.logInfo(`data plane: ${plane.name} (${plane.reason})`).pipe(Effect.as(plane))

const autoWith = (options: NativeOptions) =>
  Layer.effect(DataPlane, Effect.suspend(() => logChoice(makeNativePlane(options))))

const nativeWith = (options: NativeOptions) =>
  Layer.effect(
    DataPlane,
    Effect.suspend(() => {
      const plane = makeNativePlane(options)
      return plane.name === "native"
        ? logChoice(plane)
        : Effect.fail(new NativePlaneUnavailable({ reason: plane.reason.replace(/^fell back to portable: /, "") }))
    })
  )

const Auto = autoWith({})
const Native = nativeWith({})
const Portable = Layer.effect(DataPlane, Effect.suspend(() => logChoice(makePortablePlane())))

/**
 * The data-plane layers. `Auto` is the default: native where the addon loads, else portable
 * with the reason; `Native` insists (fails with NativePlaneUnavailable); `Portable` never
 * touches the addon. Each logs which plane runs and why.
 */
export const Sendfile = {
  Auto,
  Native,
  Portable,
  /** Auto / Native with an explicit addon path (tests; deployments that ship the addon elsewhere). */
  autoWith,
  nativeWith,
  /** Portable, saying why (data-plane TLS: bytes must pass through the TLS socket, which sendfile cannot). */
  portableBecause: (reason: string) => Layer.effect(DataPlane, Effect.suspend(() => logChoice(makePortablePlane({ reason })))),
  /** The layer for a `--data-plane` value. */
  layerFor: (choice: DataPlaneChoice) => (choice === "native" ? Native : choice === "portable" ? Portable : Auto)
} as const
