/**
 * hash-wasm's XXH3-64 alone, imported dynamically by epoch.ts when the native addon is missing: a
 * dynamic import of the package itself would bundle every one of its hashes into the chunk.
 */
export { createXXHash3 } from "hash-wasm"
