// The registry this project installs from serves only rust-just's linux-x64 binary package,
// so `npm install` leaves rust-just's other optional platform packages out of
// package-lock.json, and `npm ci` then refuses the lock ("Missing: rust-just-darwin-arm64").
// Recording them as optional, platform-restricted entries lets `npm ci` skip them as it
// would on any registry. Run after any `npm install` that rewrites the lock.
import * as fs from "node:fs"

const lockPath = new URL("../package-lock.json", import.meta.url)
const lock = JSON.parse(fs.readFileSync(lockPath, "utf8"))
const just = lock.packages["node_modules/rust-just"]
const platforms = {
  "darwin-arm64": ["darwin", "arm64"], "darwin-x64": ["darwin", "x64"], "linux-arm": ["linux", "arm"],
  "linux-arm64": ["linux", "arm64"], "linux-armv7": ["linux", "arm"], "linux-loong64": ["linux", "loong64"],
  "linux-riscv64": ["linux", "riscv64"], "linux-x64": ["linux", "x64"], "windows-arm64": ["win32", "arm64"],
  "windows-x64": ["win32", "x64"]
}
for (const [name, [os, cpu]] of Object.entries(platforms)) {
  const key = `node_modules/rust-just-${name}`
  lock.packages[key] ??= { version: just.version, cpu: [cpu], dev: true, license: "CC0-1.0", optional: true, os: [os] }
}
const sorted = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
lock.packages = sorted
fs.writeFileSync(lockPath, JSON.stringify(lock, null, 2) + "\n")
