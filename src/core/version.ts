/** This build's version: what `talon --version` prints (package.json's "version"). */
export const VERSION = "0.1.0"

/** What every node reports as its build in its status (Talon's build_version). */
export const BUILD_VERSION = `talon-ts ${VERSION}`
