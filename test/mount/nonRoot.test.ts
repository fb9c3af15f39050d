/**
 * `talon mount` by a user other than root (run as `nobody` through setpriv; fusermount3 is
 * setuid): it mounts where /dev/fuse is open to that user, and otherwise refuses with a message
 * that says why and what to change; `--allow-other` without `user_allow_other` in
 * /etc/fuse.conf is refused naming that line. Needs root to switch users, so it runs where the
 * kernel tests run as root (CI).
 */
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { isMounted, kernelMountUnavailable, sh } from "./fixtures/kernel.js"

const NOBODY = 65534

const why =
  (await kernelMountUnavailable()) ??
  (process.geteuid?.() !== 0 ? "not root: cannot switch to nobody" : undefined) ??
  ((await sh("setpriv", ["--version"])).code !== 0 ? "setpriv (util-linux) is missing" : undefined)
if (why !== undefined) console.warn(`[mount] SKIPPING the non-root mount tests: ${why}`)

const asNobody = (args: ReadonlyArray<string>) =>
  sh("setpriv", ["--reuid", String(NOBODY), "--regid", String(NOBODY), "--clear-groups", "env", `HOME=${os.tmpdir()}`, process.execPath, path.resolve("bin/talon.mjs"), ...args], 150_000)

describe.skipIf(why !== undefined)("talon mount as a non-root user", () => {
  let dir: string
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "talon-mount-nobody-"))
    await fs.chmod(dir, 0o755)
    for (const d of ["mnt", "other"]) {
      await fs.mkdir(path.join(dir, d))
      await fs.chown(path.join(dir, d), NOBODY, NOBODY)
    }
  })
  afterAll(async () => {
    for (const d of ["mnt", "other"]) if (await isMounted(path.join(dir, d))) await sh("fusermount3", ["-uz", path.join(dir, d)])
    await fs.rm(dir, { recursive: true, force: true })
  })

  it("mounts where /dev/fuse is open to the user, else says why; --allow-other names /etc/fuse.conf's user_allow_other", async () => {
    const mnt = path.join(dir, "mnt")
    const other = path.join(dir, "other")
    const common = ["--coordinator", "127.0.0.1:1", "--coordinator-admin", "", "--admin-listen", "127.0.0.1:0"]
    const devFuseOpen = (await sh("setpriv", ["--reuid", String(NOBODY), "--regid", String(NOBODY), "--clear-groups", "test", "-r", "/dev/fuse", "-a", "-w", "/dev/fuse"])).code === 0
    const userAllowOther = (await fs.readFile("/etc/fuse.conf", "utf8").catch(() => "")).split("\n").some((l) => l.trim() === "user_allow_other")
    const [plain, allowOther] = await Promise.all([
      // Where nothing can mount, the refusal is checked in the foreground: one `talon` start, not a
      // parent and a child (that a child's failure reaches the parent is daemon.test.ts's).
      asNobody(["mount", mnt, ...common, ...(devFuseOpen ? [] : ["--foreground"])]),
      // Refused before mounting when the line is missing; where it is set, the mount would stay up: not run.
      userAllowOther ? undefined : asNobody(["mount", other, "--foreground", "--allow-other", ...common])
    ])
    console.log(`[mount] as nobody (/dev/fuse ${devFuseOpen ? "open" : "root-only"}, user_allow_other ${userAllowOther ? "set" : "unset"}): ${plain.code} ${plain.stdout}${plain.stderr}`)
    if (devFuseOpen) {
      expect(plain.code, plain.stderr).toBe(0)
      expect(plain.stdout).toMatch(/mounted by pid \d+/)
      const ls = await sh("setpriv", ["--reuid", String(NOBODY), "--regid", String(NOBODY), "--clear-groups", "ls", mnt])
      expect(ls.stdout.trim()).toBe("s3")
      expect((await asNobody(["umount", mnt])).code).toBe(0)
    } else {
      expect(plain.code).not.toBe(0)
      expect(plain.stderr).toMatch(/cannot open \/dev\/fuse as uid 65534 \(Permission denied\).*chmod 0666 \/dev\/fuse.*or mount as root/)
      expect(await isMounted(mnt)).toBe(false)
    }
    if (allowOther !== undefined) {
      expect(allowOther.code).not.toBe(0)
      expect(allowOther.stderr).toMatch(/--allow-other without root needs the line `user_allow_other` in \/etc\/fuse.conf/)
      expect(await isMounted(other)).toBe(false)
    }
  }, 300_000)
})
