/** The state-store contract on the in-process backend (what `talon up` uses). */
import { afterAll, describe } from "vitest"
import { ClusterStateStore } from "../../../src/coordinator/state/ClusterStateStore.js"
import { storeContract } from "./contract.js"
import { FAST, openStoreOnTestClock, type StoreHandle } from "./support.js"

describe("ClusterStateStore.Memory", () => {
  const handles: Array<StoreHandle> = []
  // One in-process store per settings: the "instances" of a test share it, as coordinators in one process would.
  const shared = new Map<string, Promise<StoreHandle>>()
  afterAll(async () => {
    for (const h of shared.values()) await (await h).close()
  })
  storeContract(
    {
      durable: false,
      open: async (overrides = {}) => {
        const key = JSON.stringify(overrides, (_, v) => (typeof v === "object" && v !== null && "_tag" in v ? String(v) : v))
        if (!shared.has(key)) shared.set(key, openStoreOnTestClock(ClusterStateStore.Memory({ ...FAST, ...overrides })))
        const h = await shared.get(key)!
        return { ...h, close: async () => {} }
      }
    },
    handles
  )
})
