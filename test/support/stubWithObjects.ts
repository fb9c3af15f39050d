/** An origin stub in this process over `<dir>/origin`, holding the given objects (`bucket/key` → bytes) before it starts. */
import * as fs from "node:fs"
import * as path from "node:path"
import { OriginStub } from "../../src/origin/OriginStub.js"

export const stubWithObjects = (dir: string, objects: Readonly<Record<string, Uint8Array>>) => {
  const root = path.join(dir, "origin")
  for (const [name, bytes] of Object.entries(objects)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true })
    fs.writeFileSync(path.join(root, name), bytes)
  }
  return OriginStub.make({ root })
}
