import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Logger } from "effect"
import { DataPlane } from "../../../src/worker/plane/DataPlane.js"
import { makeNativePlane } from "../../../src/worker/plane/Native.js"
import { loadNativeAddon } from "../../../src/worker/plane/NativeAddon.js"
import { NativePlaneUnavailable, Sendfile } from "../../../src/worker/plane/Sendfile.js"

const bogus = "/nonexistent/talon-plane/talon_sendfile.node"
const quiet = Logger.replace(Logger.defaultLogger, Logger.none)

describe("Sendfile layers", () => {
  it("loads the addon built by npm install on this machine", () => {
    const load = loadNativeAddon()
    expect(load._tag, load._tag === "Unavailable" ? load.reason : "").toBe("Loaded")
  })

  it("falls back to portable with a reason naming the path when the addon cannot load", () => {
    const plane = makeNativePlane({ addonPath: bogus })
    expect(plane.name).toBe("portable")
    expect(plane.reason).toContain("fell back to portable")
    expect(plane.reason).toContain("failed to load")
    expect(plane.reason).toContain(bogus)
    expect(plane.reason).toContain("npm rebuild")
  })

  it.effect("Auto runs native where the addon loads, and says so", () =>
    Effect.gen(function* () {
      const plane = yield* DataPlane
      expect(plane.name).toBe("native")
      expect(plane.reason).toContain("talon_sendfile.node")
    }).pipe(Effect.provide(Sendfile.Auto), Effect.provide(quiet))
  )

  it.effect("autoWith a bogus addon path provides the portable plane, and logs why", () =>
    Effect.gen(function* () {
      const logs: Array<string> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ message }) => logs.push(String(message)))
      )
      const plane = yield* Effect.provide(DataPlane, Layer.provide(Sendfile.autoWith({ addonPath: bogus }), capture))
      expect(plane.name).toBe("portable")
      expect(logs.join("\n")).toContain(`data plane: portable (fell back to portable: native addon failed to load from ${bogus}`)
    })
  )

  it.effect("an explicit native choice fails with an actionable error when the addon cannot load", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(Effect.provide(DataPlane, Sendfile.nativeWith({ addonPath: bogus })))
      expect(Exit.isFailure(exit)).toBe(true)
      const error = yield* Effect.flip(Effect.provide(DataPlane, Sendfile.nativeWith({ addonPath: bogus })))
      expect(error).toBeInstanceOf(NativePlaneUnavailable)
      expect(error.message).toContain(bogus)
      expect(error.message).toContain("--data-plane portable")
    }).pipe(Effect.provide(quiet))
  )

  it.effect("layerFor maps --data-plane values to the layers", () =>
    Effect.gen(function* () {
      expect((yield* Effect.provide(DataPlane, Sendfile.layerFor("portable"))).name).toBe("portable")
      expect((yield* Effect.provide(DataPlane, Sendfile.layerFor("native"))).name).toBe("native")
      expect((yield* Effect.provide(DataPlane, Sendfile.layerFor("auto"))).name).toBe("native")
    }).pipe(Effect.provide(quiet))
  )
})
