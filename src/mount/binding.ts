/**
 * Loads the libfuse3 binding (src/mount/fuse/native.ts over native/fuse.c) on demand, so only
 * `talon mount` needs libfuse3 and the addon; anything else keeps working without them.
 */
import { Data, Effect } from "effect"
import type { FuseBinding } from "./fuse/types.js"

export class FuseUnavailable extends Data.TaggedError("FuseUnavailable")<{ readonly detail: string }> {
  override get message() {
    return `the FUSE binding cannot load: ${this.detail}. Install fuse3 and libfuse3-dev (Debian/Ubuntu: apt-get install fuse3 libfuse3-dev), rebuild the addon (npx node-gyp rebuild), and make sure /dev/fuse exists (in a container: --device /dev/fuse --cap-add SYS_ADMIN)`
  }
}

// A variable specifier: the module is only resolved when a mount is asked for.
const NATIVE_MODULE = "./fuse/native.js"

const isBinding = (v: unknown): v is FuseBinding => typeof v === "object" && v !== null && typeof (v as FuseBinding).mount === "function"

/** The binding, from whichever form the native module exports it in (a loader function or the binding itself). */
export const loadFuseBinding: Effect.Effect<FuseBinding, FuseUnavailable> = Effect.tryPromise({
  try: async () => {
    const mod = (await import(NATIVE_MODULE)) as Record<string, unknown>
    for (const value of Object.values(mod)) {
      if (isBinding(value)) return value
    }
    for (const name of ["loadFuseBinding", "loadBinding", "load"]) {
      const f = mod[name]
      if (typeof f !== "function") continue
      const out: unknown = await (f as () => unknown)()
      if (isBinding(out)) return out
      // A load result: the binding, or why it is unavailable.
      if (typeof out === "object" && out !== null && "_tag" in out) {
        const r = out as { _tag: string; binding?: unknown; reason?: string }
        if (r._tag === "Loaded" && isBinding(r.binding)) return r.binding
        if (r._tag === "Unavailable") throw new Error(r.reason ?? "unavailable")
      }
      // An Effect-returning loader.
      if (Effect.isEffect(out)) {
        const b = await Effect.runPromise(out as Effect.Effect<unknown, unknown>)
        if (isBinding(b)) return b
      }
    }
    throw new Error(`${NATIVE_MODULE} exports no FuseBinding`)
  },
  catch: (e) => new FuseUnavailable({ detail: e instanceof Error ? e.message : String(e) })
})
