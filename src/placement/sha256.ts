/**
 * SHA-256 (FIPS 180-4) over big-endian message words in a caller-owned Int32Array,
 * allocation-free.
 *
 * Why not node:crypto: its per-call binding overhead is larger than hashing the ~80–120
 * bytes of a placement lookup. Why words rather than bytes: assembling each word from byte
 * loads slows the rounds, so callers write message bytes straight into a byte view of the
 * word array at `index ^ 3` (see `hostWords`). Numbers: docs/decisions/measured-in-code.md.
 * Correctness is pinned by test/placement/sha256.test.ts against node:crypto.
 *
 * The rounds are mechanically unrolled: round i rotates the roles of a..h by i, adds K[i]
 * and the rolling 16-word schedule w[i mod 16], and uses Ch(e,f,g) = g ^ (e & (f ^ g)) and
 * Maj(a,b,c) = b ^ ((a ^ b) & (b ^ c)). `compress` and `compressAfter7` (everything below the
 * "generated" marker line) are written by scripts/gen-sha256.ts: change the generator, run
 * `npx tsx scripts/gen-sha256.ts`, never edit them by hand. test/placement/sha256.gen.test.ts
 * fails when the file and its generator disagree (`--check` does the same from the shell).
 */

const IV = Int32Array.of(0x6a09e667 | 0, 0xbb67ae85 | 0, 0x3c6ef372 | 0, 0xa54ff53a | 0, 0x510e527f | 0, 0x9b05688c | 0, 0x1f83d9ab | 0, 0x5be0cd19 | 0)
const K = Int32Array.of(
  0x428a2f98 | 0, 0x71374491 | 0, 0xb5c0fbcf | 0, 0xe9b5dba5 | 0, 0x3956c25b | 0, 0x59f111f1 | 0, 0x923f82a4 | 0, 0xab1c5ed5 | 0,
  0xd807aa98 | 0, 0x12835b01 | 0, 0x243185be | 0, 0x550c7dc3 | 0, 0x72be5d74 | 0, 0x80deb1fe | 0, 0x9bdc06a7 | 0, 0xc19bf174 | 0,
  0xe49b69c1 | 0, 0xefbe4786 | 0, 0x0fc19dc6 | 0, 0x240ca1cc | 0, 0x2de92c6f | 0, 0x4a7484aa | 0, 0x5cb0a9dc | 0, 0x76f988da | 0,
  0x983e5152 | 0, 0xa831c66d | 0, 0xb00327c8 | 0, 0xbf597fc7 | 0, 0xc6e00bf3 | 0, 0xd5a79147 | 0, 0x06ca6351 | 0, 0x14292967 | 0,
  0x27b70a85 | 0, 0x2e1b2138 | 0, 0x4d2c6dfc | 0, 0x53380d13 | 0, 0x650a7354 | 0, 0x766a0abb | 0, 0x81c2c92e | 0, 0x92722c85 | 0,
  0xa2bfe8a1 | 0, 0xa81a664b | 0, 0xc24b8b70 | 0, 0xc76c51a3 | 0, 0xd192e819 | 0, 0xd6990624 | 0, 0xf40e3585 | 0, 0x106aa070 | 0,
  0x19a4c116 | 0, 0x1e376c08 | 0, 0x2748774c | 0, 0x34b0bcb5 | 0, 0x391c0cb3 | 0, 0x4ed8aa4a | 0, 0x5b9cca4f | 0, 0x682e6ff3 | 0,
  0x748f82ee | 0, 0x78a5636f | 0, 0x84c87814 | 0, 0x8cc70208 | 0, 0x90befffa | 0, 0xa4506ceb | 0, 0xbef9a3f7 | 0, 0xc67178f2 | 0
)

const LITTLE_ENDIAN = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1

let swapped = new Int32Array(32)

/**
 * Message layout: byte i of the message lives at byte `i ^ 3` of the word array's buffer,
 * which on a little-endian host puts every word's bytes big-endian, as SHA-256 reads them.
 * A big-endian host sees each word byte-reversed, so the message words are swapped into a
 * scratch copy first (the caller's array keeps its layout, e.g. a preset domain prefix).
 */
const hostWords = (w: Int32Array, len: number): Int32Array => {
  if (LITTLE_ENDIAN) return w
  const need = paddedLength(len) >>> 2
  if (swapped.length < need) swapped = new Int32Array(need)
  for (let j = 0; j < (len + 3) >>> 2; j++) {
    const x = w[j]!
    swapped[j] = ((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)
  }
  return swapped
}

/** Bytes a message of `len` bytes occupies once padded (0x80, zeros, 64-bit bit length). */
export const paddedLength = (len: number): number => (((len + 8) >>> 6) + 1) << 6

/**
 * Writes the padding of a `len`-byte message held in `w` (big-endian words): the 0x80 marker
 * after the last byte, zeros, the bit length. Returns the padded length in words. Bytes of
 * `w` past the message may hold anything beforehand (the scratch is reused).
 */
const padWords = (w: Int32Array, len: number): number => {
  const words = paddedLength(len) >>> 2
  const i = len >>> 2
  const r = len & 3
  // Keep the word's r message bytes (its high end), then the marker.
  w[i] = r === 0 ? 0x80000000 | 0 : (w[i]! & (-1 << (32 - 8 * r))) | (0x80 << (24 - 8 * r))
  for (let j = i + 1; j < words - 2; j++) w[j] = 0
  w[words - 2] = Math.floor(len / 0x20000000)
  w[words - 1] = len << 3
  return words
}

/**
 * Hash the `len`-byte message in `message` (laid out as `hostWords` describes) into `out`
 * (eight digest words as int32). Pads in place, so it must hold `paddedLength(len) / 4` words.
 */
export const sha256Words = (message: Int32Array, len: number, out: Int32Array): void => {
  const w = hostWords(message, len)
  const words = padWords(w, len)
  out[0] = IV[0]!
  out[1] = IV[1]!
  out[2] = IV[2]!
  out[3] = IV[3]!
  out[4] = IV[4]!
  out[5] = IV[5]!
  out[6] = IV[6]!
  out[7] = IV[7]!
  for (let p = 0; p < words; p += 16) compress(out, w, p)
}

/**
 * Rounds 0–6 of the first block read only message words 0–6, so for messages that share a
 * constant 28-byte prefix (placement's domain strings) the state after them is a constant.
 * Returns that state, FIPS roles A..H, for `sha256WordsAfterPrefix`.
 */
export const prefixState = (prefix: Uint8Array): Int32Array => {
  if (prefix.length < 28) throw new RangeError(`a SHA-256 prefix state needs 28 constant bytes, got ${prefix.length}`)
  const st = Int32Array.from(IV)
  for (let i = 0; i < 7; i++) {
    const w = (prefix[i * 4]! << 24) | (prefix[i * 4 + 1]! << 16) | (prefix[i * 4 + 2]! << 8) | prefix[i * 4 + 3]!
    const [a, b, c, d, e, f, g, h] = st as unknown as [number, number, number, number, number, number, number, number]
    const t1 = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) + (g ^ (e & (f ^ g))) + K[i]! + w) | 0
    const t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) + ((a & b) ^ (a & c) ^ (b & c))) | 0
    st.set([(t1 + t2) | 0, a, b, c, (d + t1) | 0, e, f, g])
  }
  return st
}

/**
 * `sha256Words` for a message whose first 28 bytes are the prefix `mid` was computed from
 * (`prefixState`): the first block resumes at round 7. The caller guarantees the prefix.
 */
export const sha256WordsAfterPrefix = (message: Int32Array, len: number, out: Int32Array, mid: Int32Array): void => {
  const w = hostWords(message, len)
  const words = padWords(w, len)
  compressAfter7(out, w, mid)
  for (let p = 16; p < words; p += 16) compress(out, w, p)
}

let packed = new Int32Array(64)
const packedBytes = (): Uint8Array => new Uint8Array(packed.buffer)
let packedView = packedBytes()

/** Hash `msg[0, len)` into `out` (eight big-endian digest words as int32). Does not write `msg`. */
export const sha256Into = (msg: Uint8Array, len: number, out: Int32Array): void => {
  const need = paddedLength(len) >>> 2
  if (need > packed.length) {
    packed = new Int32Array(Math.max(need, packed.length * 2))
    packedView = packedBytes()
  }
  const bytes = packedView
  for (let i = 0; i < len; i++) bytes[i ^ 3] = msg[i]!
  sha256Words(packed, len, out)
}

// --- generated by scripts/gen-sha256.ts (npx tsx scripts/gen-sha256.ts): do not edit below ---

const compress = (s: Int32Array, w: Int32Array, p: number): void => {
  let w0 = w[p + 0]
  let w1 = w[p + 1]
  let w2 = w[p + 2]
  let w3 = w[p + 3]
  let w4 = w[p + 4]
  let w5 = w[p + 5]
  let w6 = w[p + 6]
  let w7 = w[p + 7]
  let w8 = w[p + 8]
  let w9 = w[p + 9]
  let w10 = w[p + 10]
  let w11 = w[p + 11]
  let w12 = w[p + 12]
  let w13 = w[p + 13]
  let w14 = w[p + 14]
  let w15 = w[p + 15]
  let a = s[0]!, b = s[1]!, c = s[2]!, d = s[3]!, e = s[4]!, f = s[5]!, g = s[6]!, h = s[7]!
  // Maj(a, b, c) = b ^ ((a ^ b) & (b ^ c)), and this round's a ^ b is the next round's b ^ c.
  let t1 = 0, u = 0, v = 0, x = 0, y = b ^ c
  // round 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) + 0x428a2f98 + w0) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 1
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) + 0x71374491 + w1) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 2
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) - 0x4a3f0431 + w2) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 3
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) - 0x164a245b + w3) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 4
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) + 0x3956c25b + w4) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 5
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) + 0x59f111f1 + w5) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 6
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) - 0x6dc07d5c + w6) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 7
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) - 0x54e3a12b + w7) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 8
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) - 0x27f85568 + w8) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 9
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) + 0x12835b01 + w9) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 10
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) + 0x243185be + w10) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 11
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) + 0x550c7dc3 + w11) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 12
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) + 0x72be5d74 + w12) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 13
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) - 0x7f214e02 + w13) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 14
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) - 0x6423f959 + w14) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 15
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) - 0x3e640e8c + w15) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 16
  u = ((w1 >>> 11) | (w1 << 21)) ^ w1
  v = ((w14 >>> 2) | (w14 << 30)) ^ w14
  w0 = (w0 + (((u >>> 7) | (u << 25)) ^ (w1 >>> 3)) + w9 + (((v >>> 17) | (v << 15)) ^ (w14 >>> 10))) | 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) - 0x1b64963f + w0) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 17
  u = ((w2 >>> 11) | (w2 << 21)) ^ w2
  v = ((w15 >>> 2) | (w15 << 30)) ^ w15
  w1 = (w1 + (((u >>> 7) | (u << 25)) ^ (w2 >>> 3)) + w10 + (((v >>> 17) | (v << 15)) ^ (w15 >>> 10))) | 0
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) - 0x1041b87a + w1) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 18
  u = ((w3 >>> 11) | (w3 << 21)) ^ w3
  v = ((w0 >>> 2) | (w0 << 30)) ^ w0
  w2 = (w2 + (((u >>> 7) | (u << 25)) ^ (w3 >>> 3)) + w11 + (((v >>> 17) | (v << 15)) ^ (w0 >>> 10))) | 0
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) + 0x0fc19dc6 + w2) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 19
  u = ((w4 >>> 11) | (w4 << 21)) ^ w4
  v = ((w1 >>> 2) | (w1 << 30)) ^ w1
  w3 = (w3 + (((u >>> 7) | (u << 25)) ^ (w4 >>> 3)) + w12 + (((v >>> 17) | (v << 15)) ^ (w1 >>> 10))) | 0
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) + 0x240ca1cc + w3) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 20
  u = ((w5 >>> 11) | (w5 << 21)) ^ w5
  v = ((w2 >>> 2) | (w2 << 30)) ^ w2
  w4 = (w4 + (((u >>> 7) | (u << 25)) ^ (w5 >>> 3)) + w13 + (((v >>> 17) | (v << 15)) ^ (w2 >>> 10))) | 0
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) + 0x2de92c6f + w4) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 21
  u = ((w6 >>> 11) | (w6 << 21)) ^ w6
  v = ((w3 >>> 2) | (w3 << 30)) ^ w3
  w5 = (w5 + (((u >>> 7) | (u << 25)) ^ (w6 >>> 3)) + w14 + (((v >>> 17) | (v << 15)) ^ (w3 >>> 10))) | 0
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) + 0x4a7484aa + w5) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 22
  u = ((w7 >>> 11) | (w7 << 21)) ^ w7
  v = ((w4 >>> 2) | (w4 << 30)) ^ w4
  w6 = (w6 + (((u >>> 7) | (u << 25)) ^ (w7 >>> 3)) + w15 + (((v >>> 17) | (v << 15)) ^ (w4 >>> 10))) | 0
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) + 0x5cb0a9dc + w6) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 23
  u = ((w8 >>> 11) | (w8 << 21)) ^ w8
  v = ((w5 >>> 2) | (w5 << 30)) ^ w5
  w7 = (w7 + (((u >>> 7) | (u << 25)) ^ (w8 >>> 3)) + w0 + (((v >>> 17) | (v << 15)) ^ (w5 >>> 10))) | 0
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) + 0x76f988da + w7) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 24
  u = ((w9 >>> 11) | (w9 << 21)) ^ w9
  v = ((w6 >>> 2) | (w6 << 30)) ^ w6
  w8 = (w8 + (((u >>> 7) | (u << 25)) ^ (w9 >>> 3)) + w1 + (((v >>> 17) | (v << 15)) ^ (w6 >>> 10))) | 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) - 0x67c1aeae + w8) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 25
  u = ((w10 >>> 11) | (w10 << 21)) ^ w10
  v = ((w7 >>> 2) | (w7 << 30)) ^ w7
  w9 = (w9 + (((u >>> 7) | (u << 25)) ^ (w10 >>> 3)) + w2 + (((v >>> 17) | (v << 15)) ^ (w7 >>> 10))) | 0
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) - 0x57ce3993 + w9) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 26
  u = ((w11 >>> 11) | (w11 << 21)) ^ w11
  v = ((w8 >>> 2) | (w8 << 30)) ^ w8
  w10 = (w10 + (((u >>> 7) | (u << 25)) ^ (w11 >>> 3)) + w3 + (((v >>> 17) | (v << 15)) ^ (w8 >>> 10))) | 0
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) - 0x4ffcd838 + w10) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 27
  u = ((w12 >>> 11) | (w12 << 21)) ^ w12
  v = ((w9 >>> 2) | (w9 << 30)) ^ w9
  w11 = (w11 + (((u >>> 7) | (u << 25)) ^ (w12 >>> 3)) + w4 + (((v >>> 17) | (v << 15)) ^ (w9 >>> 10))) | 0
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) - 0x40a68039 + w11) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 28
  u = ((w13 >>> 11) | (w13 << 21)) ^ w13
  v = ((w10 >>> 2) | (w10 << 30)) ^ w10
  w12 = (w12 + (((u >>> 7) | (u << 25)) ^ (w13 >>> 3)) + w5 + (((v >>> 17) | (v << 15)) ^ (w10 >>> 10))) | 0
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) - 0x391ff40d + w12) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 29
  u = ((w14 >>> 11) | (w14 << 21)) ^ w14
  v = ((w11 >>> 2) | (w11 << 30)) ^ w11
  w13 = (w13 + (((u >>> 7) | (u << 25)) ^ (w14 >>> 3)) + w6 + (((v >>> 17) | (v << 15)) ^ (w11 >>> 10))) | 0
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) - 0x2a586eb9 + w13) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 30
  u = ((w15 >>> 11) | (w15 << 21)) ^ w15
  v = ((w12 >>> 2) | (w12 << 30)) ^ w12
  w14 = (w14 + (((u >>> 7) | (u << 25)) ^ (w15 >>> 3)) + w7 + (((v >>> 17) | (v << 15)) ^ (w12 >>> 10))) | 0
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) + 0x06ca6351 + w14) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 31
  u = ((w0 >>> 11) | (w0 << 21)) ^ w0
  v = ((w13 >>> 2) | (w13 << 30)) ^ w13
  w15 = (w15 + (((u >>> 7) | (u << 25)) ^ (w0 >>> 3)) + w8 + (((v >>> 17) | (v << 15)) ^ (w13 >>> 10))) | 0
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) + 0x14292967 + w15) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 32
  u = ((w1 >>> 11) | (w1 << 21)) ^ w1
  v = ((w14 >>> 2) | (w14 << 30)) ^ w14
  w0 = (w0 + (((u >>> 7) | (u << 25)) ^ (w1 >>> 3)) + w9 + (((v >>> 17) | (v << 15)) ^ (w14 >>> 10))) | 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) + 0x27b70a85 + w0) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 33
  u = ((w2 >>> 11) | (w2 << 21)) ^ w2
  v = ((w15 >>> 2) | (w15 << 30)) ^ w15
  w1 = (w1 + (((u >>> 7) | (u << 25)) ^ (w2 >>> 3)) + w10 + (((v >>> 17) | (v << 15)) ^ (w15 >>> 10))) | 0
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) + 0x2e1b2138 + w1) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 34
  u = ((w3 >>> 11) | (w3 << 21)) ^ w3
  v = ((w0 >>> 2) | (w0 << 30)) ^ w0
  w2 = (w2 + (((u >>> 7) | (u << 25)) ^ (w3 >>> 3)) + w11 + (((v >>> 17) | (v << 15)) ^ (w0 >>> 10))) | 0
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) + 0x4d2c6dfc + w2) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 35
  u = ((w4 >>> 11) | (w4 << 21)) ^ w4
  v = ((w1 >>> 2) | (w1 << 30)) ^ w1
  w3 = (w3 + (((u >>> 7) | (u << 25)) ^ (w4 >>> 3)) + w12 + (((v >>> 17) | (v << 15)) ^ (w1 >>> 10))) | 0
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) + 0x53380d13 + w3) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 36
  u = ((w5 >>> 11) | (w5 << 21)) ^ w5
  v = ((w2 >>> 2) | (w2 << 30)) ^ w2
  w4 = (w4 + (((u >>> 7) | (u << 25)) ^ (w5 >>> 3)) + w13 + (((v >>> 17) | (v << 15)) ^ (w2 >>> 10))) | 0
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) + 0x650a7354 + w4) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 37
  u = ((w6 >>> 11) | (w6 << 21)) ^ w6
  v = ((w3 >>> 2) | (w3 << 30)) ^ w3
  w5 = (w5 + (((u >>> 7) | (u << 25)) ^ (w6 >>> 3)) + w14 + (((v >>> 17) | (v << 15)) ^ (w3 >>> 10))) | 0
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) + 0x766a0abb + w5) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 38
  u = ((w7 >>> 11) | (w7 << 21)) ^ w7
  v = ((w4 >>> 2) | (w4 << 30)) ^ w4
  w6 = (w6 + (((u >>> 7) | (u << 25)) ^ (w7 >>> 3)) + w15 + (((v >>> 17) | (v << 15)) ^ (w4 >>> 10))) | 0
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) - 0x7e3d36d2 + w6) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 39
  u = ((w8 >>> 11) | (w8 << 21)) ^ w8
  v = ((w5 >>> 2) | (w5 << 30)) ^ w5
  w7 = (w7 + (((u >>> 7) | (u << 25)) ^ (w8 >>> 3)) + w0 + (((v >>> 17) | (v << 15)) ^ (w5 >>> 10))) | 0
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) - 0x6d8dd37b + w7) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 40
  u = ((w9 >>> 11) | (w9 << 21)) ^ w9
  v = ((w6 >>> 2) | (w6 << 30)) ^ w6
  w8 = (w8 + (((u >>> 7) | (u << 25)) ^ (w9 >>> 3)) + w1 + (((v >>> 17) | (v << 15)) ^ (w6 >>> 10))) | 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) - 0x5d40175f + w8) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 41
  u = ((w10 >>> 11) | (w10 << 21)) ^ w10
  v = ((w7 >>> 2) | (w7 << 30)) ^ w7
  w9 = (w9 + (((u >>> 7) | (u << 25)) ^ (w10 >>> 3)) + w2 + (((v >>> 17) | (v << 15)) ^ (w7 >>> 10))) | 0
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) - 0x57e599b5 + w9) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 42
  u = ((w11 >>> 11) | (w11 << 21)) ^ w11
  v = ((w8 >>> 2) | (w8 << 30)) ^ w8
  w10 = (w10 + (((u >>> 7) | (u << 25)) ^ (w11 >>> 3)) + w3 + (((v >>> 17) | (v << 15)) ^ (w8 >>> 10))) | 0
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) - 0x3db47490 + w10) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 43
  u = ((w12 >>> 11) | (w12 << 21)) ^ w12
  v = ((w9 >>> 2) | (w9 << 30)) ^ w9
  w11 = (w11 + (((u >>> 7) | (u << 25)) ^ (w12 >>> 3)) + w4 + (((v >>> 17) | (v << 15)) ^ (w9 >>> 10))) | 0
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) - 0x3893ae5d + w11) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 44
  u = ((w13 >>> 11) | (w13 << 21)) ^ w13
  v = ((w10 >>> 2) | (w10 << 30)) ^ w10
  w12 = (w12 + (((u >>> 7) | (u << 25)) ^ (w13 >>> 3)) + w5 + (((v >>> 17) | (v << 15)) ^ (w10 >>> 10))) | 0
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) - 0x2e6d17e7 + w12) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 45
  u = ((w14 >>> 11) | (w14 << 21)) ^ w14
  v = ((w11 >>> 2) | (w11 << 30)) ^ w11
  w13 = (w13 + (((u >>> 7) | (u << 25)) ^ (w14 >>> 3)) + w6 + (((v >>> 17) | (v << 15)) ^ (w11 >>> 10))) | 0
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) - 0x2966f9dc + w13) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 46
  u = ((w15 >>> 11) | (w15 << 21)) ^ w15
  v = ((w12 >>> 2) | (w12 << 30)) ^ w12
  w14 = (w14 + (((u >>> 7) | (u << 25)) ^ (w15 >>> 3)) + w7 + (((v >>> 17) | (v << 15)) ^ (w12 >>> 10))) | 0
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) - 0x0bf1ca7b + w14) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 47
  u = ((w0 >>> 11) | (w0 << 21)) ^ w0
  v = ((w13 >>> 2) | (w13 << 30)) ^ w13
  w15 = (w15 + (((u >>> 7) | (u << 25)) ^ (w0 >>> 3)) + w8 + (((v >>> 17) | (v << 15)) ^ (w13 >>> 10))) | 0
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) + 0x106aa070 + w15) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 48
  u = ((w1 >>> 11) | (w1 << 21)) ^ w1
  v = ((w14 >>> 2) | (w14 << 30)) ^ w14
  w0 = (w0 + (((u >>> 7) | (u << 25)) ^ (w1 >>> 3)) + w9 + (((v >>> 17) | (v << 15)) ^ (w14 >>> 10))) | 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) + 0x19a4c116 + w0) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 49
  u = ((w2 >>> 11) | (w2 << 21)) ^ w2
  v = ((w15 >>> 2) | (w15 << 30)) ^ w15
  w1 = (w1 + (((u >>> 7) | (u << 25)) ^ (w2 >>> 3)) + w10 + (((v >>> 17) | (v << 15)) ^ (w15 >>> 10))) | 0
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) + 0x1e376c08 + w1) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 50
  u = ((w3 >>> 11) | (w3 << 21)) ^ w3
  v = ((w0 >>> 2) | (w0 << 30)) ^ w0
  w2 = (w2 + (((u >>> 7) | (u << 25)) ^ (w3 >>> 3)) + w11 + (((v >>> 17) | (v << 15)) ^ (w0 >>> 10))) | 0
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) + 0x2748774c + w2) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 51
  u = ((w4 >>> 11) | (w4 << 21)) ^ w4
  v = ((w1 >>> 2) | (w1 << 30)) ^ w1
  w3 = (w3 + (((u >>> 7) | (u << 25)) ^ (w4 >>> 3)) + w12 + (((v >>> 17) | (v << 15)) ^ (w1 >>> 10))) | 0
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) + 0x34b0bcb5 + w3) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 52
  u = ((w5 >>> 11) | (w5 << 21)) ^ w5
  v = ((w2 >>> 2) | (w2 << 30)) ^ w2
  w4 = (w4 + (((u >>> 7) | (u << 25)) ^ (w5 >>> 3)) + w13 + (((v >>> 17) | (v << 15)) ^ (w2 >>> 10))) | 0
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) + 0x391c0cb3 + w4) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 53
  u = ((w6 >>> 11) | (w6 << 21)) ^ w6
  v = ((w3 >>> 2) | (w3 << 30)) ^ w3
  w5 = (w5 + (((u >>> 7) | (u << 25)) ^ (w6 >>> 3)) + w14 + (((v >>> 17) | (v << 15)) ^ (w3 >>> 10))) | 0
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) + 0x4ed8aa4a + w5) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 54
  u = ((w7 >>> 11) | (w7 << 21)) ^ w7
  v = ((w4 >>> 2) | (w4 << 30)) ^ w4
  w6 = (w6 + (((u >>> 7) | (u << 25)) ^ (w7 >>> 3)) + w15 + (((v >>> 17) | (v << 15)) ^ (w4 >>> 10))) | 0
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) + 0x5b9cca4f + w6) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 55
  u = ((w8 >>> 11) | (w8 << 21)) ^ w8
  v = ((w5 >>> 2) | (w5 << 30)) ^ w5
  w7 = (w7 + (((u >>> 7) | (u << 25)) ^ (w8 >>> 3)) + w0 + (((v >>> 17) | (v << 15)) ^ (w5 >>> 10))) | 0
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) + 0x682e6ff3 + w7) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 56
  u = ((w9 >>> 11) | (w9 << 21)) ^ w9
  v = ((w6 >>> 2) | (w6 << 30)) ^ w6
  w8 = (w8 + (((u >>> 7) | (u << 25)) ^ (w9 >>> 3)) + w1 + (((v >>> 17) | (v << 15)) ^ (w6 >>> 10))) | 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) + 0x748f82ee + w8) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 57
  u = ((w10 >>> 11) | (w10 << 21)) ^ w10
  v = ((w7 >>> 2) | (w7 << 30)) ^ w7
  w9 = (w9 + (((u >>> 7) | (u << 25)) ^ (w10 >>> 3)) + w2 + (((v >>> 17) | (v << 15)) ^ (w7 >>> 10))) | 0
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) + 0x78a5636f + w9) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 58
  u = ((w11 >>> 11) | (w11 << 21)) ^ w11
  v = ((w8 >>> 2) | (w8 << 30)) ^ w8
  w10 = (w10 + (((u >>> 7) | (u << 25)) ^ (w11 >>> 3)) + w3 + (((v >>> 17) | (v << 15)) ^ (w8 >>> 10))) | 0
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) - 0x7b3787ec + w10) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 59
  u = ((w12 >>> 11) | (w12 << 21)) ^ w12
  v = ((w9 >>> 2) | (w9 << 30)) ^ w9
  w11 = (w11 + (((u >>> 7) | (u << 25)) ^ (w12 >>> 3)) + w4 + (((v >>> 17) | (v << 15)) ^ (w9 >>> 10))) | 0
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) - 0x7338fdf8 + w11) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 60
  u = ((w13 >>> 11) | (w13 << 21)) ^ w13
  v = ((w10 >>> 2) | (w10 << 30)) ^ w10
  w12 = (w12 + (((u >>> 7) | (u << 25)) ^ (w13 >>> 3)) + w5 + (((v >>> 17) | (v << 15)) ^ (w10 >>> 10))) | 0
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) - 0x6f410006 + w12) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 61
  u = ((w14 >>> 11) | (w14 << 21)) ^ w14
  v = ((w11 >>> 2) | (w11 << 30)) ^ w11
  w13 = (w13 + (((u >>> 7) | (u << 25)) ^ (w14 >>> 3)) + w6 + (((v >>> 17) | (v << 15)) ^ (w11 >>> 10))) | 0
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) - 0x5baf9315 + w13) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 62
  u = ((w15 >>> 11) | (w15 << 21)) ^ w15
  v = ((w12 >>> 2) | (w12 << 30)) ^ w12
  w14 = (w14 + (((u >>> 7) | (u << 25)) ^ (w15 >>> 3)) + w7 + (((v >>> 17) | (v << 15)) ^ (w12 >>> 10))) | 0
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) - 0x41065c09 + w14) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 63
  u = ((w0 >>> 11) | (w0 << 21)) ^ w0
  v = ((w13 >>> 2) | (w13 << 30)) ^ w13
  w15 = (w15 + (((u >>> 7) | (u << 25)) ^ (w0 >>> 3)) + w8 + (((v >>> 17) | (v << 15)) ^ (w13 >>> 10))) | 0
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) - 0x398e870e + w15) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  s[0] = (s[0]! + a) | 0
  s[1] = (s[1]! + b) | 0
  s[2] = (s[2]! + c) | 0
  s[3] = (s[3]! + d) | 0
  s[4] = (s[4]! + e) | 0
  s[5] = (s[5]! + f) | 0
  s[6] = (s[6]! + g) | 0
  s[7] = (s[7]! + h) | 0
}

/** The first block from round 7 on, resuming from `mid`; the chaining input is the IV. */
const compressAfter7 = (s: Int32Array, w: Int32Array, mid: Int32Array): void => {
  const p = 0
  let w0 = w[p + 0]
  let w1 = w[p + 1]
  let w2 = w[p + 2]
  let w3 = w[p + 3]
  let w4 = w[p + 4]
  let w5 = w[p + 5]
  let w6 = w[p + 6]
  let w7 = w[p + 7]
  let w8 = w[p + 8]
  let w9 = w[p + 9]
  let w10 = w[p + 10]
  let w11 = w[p + 11]
  let w12 = w[p + 12]
  let w13 = w[p + 13]
  let w14 = w[p + 14]
  let w15 = w[p + 15]
  let b = mid[0]!, c = mid[1]!, d = mid[2]!, e = mid[3]!, f = mid[4]!, g = mid[5]!, h = mid[6]!, a = mid[7]!
  // Maj(a, b, c) = b ^ ((a ^ b) & (b ^ c)), and this round's a ^ b is the next round's b ^ c.
  let t1 = 0, u = 0, v = 0, y = 0, x = c ^ d
  // round 7
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) - 0x54e3a12b + w7) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 8
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) - 0x27f85568 + w8) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 9
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) + 0x12835b01 + w9) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 10
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) + 0x243185be + w10) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 11
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) + 0x550c7dc3 + w11) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 12
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) + 0x72be5d74 + w12) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 13
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) - 0x7f214e02 + w13) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 14
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) - 0x6423f959 + w14) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 15
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) - 0x3e640e8c + w15) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 16
  u = ((w1 >>> 11) | (w1 << 21)) ^ w1
  v = ((w14 >>> 2) | (w14 << 30)) ^ w14
  w0 = (w0 + (((u >>> 7) | (u << 25)) ^ (w1 >>> 3)) + w9 + (((v >>> 17) | (v << 15)) ^ (w14 >>> 10))) | 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) - 0x1b64963f + w0) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 17
  u = ((w2 >>> 11) | (w2 << 21)) ^ w2
  v = ((w15 >>> 2) | (w15 << 30)) ^ w15
  w1 = (w1 + (((u >>> 7) | (u << 25)) ^ (w2 >>> 3)) + w10 + (((v >>> 17) | (v << 15)) ^ (w15 >>> 10))) | 0
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) - 0x1041b87a + w1) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 18
  u = ((w3 >>> 11) | (w3 << 21)) ^ w3
  v = ((w0 >>> 2) | (w0 << 30)) ^ w0
  w2 = (w2 + (((u >>> 7) | (u << 25)) ^ (w3 >>> 3)) + w11 + (((v >>> 17) | (v << 15)) ^ (w0 >>> 10))) | 0
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) + 0x0fc19dc6 + w2) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 19
  u = ((w4 >>> 11) | (w4 << 21)) ^ w4
  v = ((w1 >>> 2) | (w1 << 30)) ^ w1
  w3 = (w3 + (((u >>> 7) | (u << 25)) ^ (w4 >>> 3)) + w12 + (((v >>> 17) | (v << 15)) ^ (w1 >>> 10))) | 0
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) + 0x240ca1cc + w3) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 20
  u = ((w5 >>> 11) | (w5 << 21)) ^ w5
  v = ((w2 >>> 2) | (w2 << 30)) ^ w2
  w4 = (w4 + (((u >>> 7) | (u << 25)) ^ (w5 >>> 3)) + w13 + (((v >>> 17) | (v << 15)) ^ (w2 >>> 10))) | 0
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) + 0x2de92c6f + w4) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 21
  u = ((w6 >>> 11) | (w6 << 21)) ^ w6
  v = ((w3 >>> 2) | (w3 << 30)) ^ w3
  w5 = (w5 + (((u >>> 7) | (u << 25)) ^ (w6 >>> 3)) + w14 + (((v >>> 17) | (v << 15)) ^ (w3 >>> 10))) | 0
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) + 0x4a7484aa + w5) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 22
  u = ((w7 >>> 11) | (w7 << 21)) ^ w7
  v = ((w4 >>> 2) | (w4 << 30)) ^ w4
  w6 = (w6 + (((u >>> 7) | (u << 25)) ^ (w7 >>> 3)) + w15 + (((v >>> 17) | (v << 15)) ^ (w4 >>> 10))) | 0
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) + 0x5cb0a9dc + w6) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 23
  u = ((w8 >>> 11) | (w8 << 21)) ^ w8
  v = ((w5 >>> 2) | (w5 << 30)) ^ w5
  w7 = (w7 + (((u >>> 7) | (u << 25)) ^ (w8 >>> 3)) + w0 + (((v >>> 17) | (v << 15)) ^ (w5 >>> 10))) | 0
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) + 0x76f988da + w7) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 24
  u = ((w9 >>> 11) | (w9 << 21)) ^ w9
  v = ((w6 >>> 2) | (w6 << 30)) ^ w6
  w8 = (w8 + (((u >>> 7) | (u << 25)) ^ (w9 >>> 3)) + w1 + (((v >>> 17) | (v << 15)) ^ (w6 >>> 10))) | 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) - 0x67c1aeae + w8) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 25
  u = ((w10 >>> 11) | (w10 << 21)) ^ w10
  v = ((w7 >>> 2) | (w7 << 30)) ^ w7
  w9 = (w9 + (((u >>> 7) | (u << 25)) ^ (w10 >>> 3)) + w2 + (((v >>> 17) | (v << 15)) ^ (w7 >>> 10))) | 0
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) - 0x57ce3993 + w9) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 26
  u = ((w11 >>> 11) | (w11 << 21)) ^ w11
  v = ((w8 >>> 2) | (w8 << 30)) ^ w8
  w10 = (w10 + (((u >>> 7) | (u << 25)) ^ (w11 >>> 3)) + w3 + (((v >>> 17) | (v << 15)) ^ (w8 >>> 10))) | 0
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) - 0x4ffcd838 + w10) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 27
  u = ((w12 >>> 11) | (w12 << 21)) ^ w12
  v = ((w9 >>> 2) | (w9 << 30)) ^ w9
  w11 = (w11 + (((u >>> 7) | (u << 25)) ^ (w12 >>> 3)) + w4 + (((v >>> 17) | (v << 15)) ^ (w9 >>> 10))) | 0
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) - 0x40a68039 + w11) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 28
  u = ((w13 >>> 11) | (w13 << 21)) ^ w13
  v = ((w10 >>> 2) | (w10 << 30)) ^ w10
  w12 = (w12 + (((u >>> 7) | (u << 25)) ^ (w13 >>> 3)) + w5 + (((v >>> 17) | (v << 15)) ^ (w10 >>> 10))) | 0
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) - 0x391ff40d + w12) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 29
  u = ((w14 >>> 11) | (w14 << 21)) ^ w14
  v = ((w11 >>> 2) | (w11 << 30)) ^ w11
  w13 = (w13 + (((u >>> 7) | (u << 25)) ^ (w14 >>> 3)) + w6 + (((v >>> 17) | (v << 15)) ^ (w11 >>> 10))) | 0
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) - 0x2a586eb9 + w13) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 30
  u = ((w15 >>> 11) | (w15 << 21)) ^ w15
  v = ((w12 >>> 2) | (w12 << 30)) ^ w12
  w14 = (w14 + (((u >>> 7) | (u << 25)) ^ (w15 >>> 3)) + w7 + (((v >>> 17) | (v << 15)) ^ (w12 >>> 10))) | 0
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) + 0x06ca6351 + w14) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 31
  u = ((w0 >>> 11) | (w0 << 21)) ^ w0
  v = ((w13 >>> 2) | (w13 << 30)) ^ w13
  w15 = (w15 + (((u >>> 7) | (u << 25)) ^ (w0 >>> 3)) + w8 + (((v >>> 17) | (v << 15)) ^ (w13 >>> 10))) | 0
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) + 0x14292967 + w15) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 32
  u = ((w1 >>> 11) | (w1 << 21)) ^ w1
  v = ((w14 >>> 2) | (w14 << 30)) ^ w14
  w0 = (w0 + (((u >>> 7) | (u << 25)) ^ (w1 >>> 3)) + w9 + (((v >>> 17) | (v << 15)) ^ (w14 >>> 10))) | 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) + 0x27b70a85 + w0) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 33
  u = ((w2 >>> 11) | (w2 << 21)) ^ w2
  v = ((w15 >>> 2) | (w15 << 30)) ^ w15
  w1 = (w1 + (((u >>> 7) | (u << 25)) ^ (w2 >>> 3)) + w10 + (((v >>> 17) | (v << 15)) ^ (w15 >>> 10))) | 0
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) + 0x2e1b2138 + w1) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 34
  u = ((w3 >>> 11) | (w3 << 21)) ^ w3
  v = ((w0 >>> 2) | (w0 << 30)) ^ w0
  w2 = (w2 + (((u >>> 7) | (u << 25)) ^ (w3 >>> 3)) + w11 + (((v >>> 17) | (v << 15)) ^ (w0 >>> 10))) | 0
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) + 0x4d2c6dfc + w2) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 35
  u = ((w4 >>> 11) | (w4 << 21)) ^ w4
  v = ((w1 >>> 2) | (w1 << 30)) ^ w1
  w3 = (w3 + (((u >>> 7) | (u << 25)) ^ (w4 >>> 3)) + w12 + (((v >>> 17) | (v << 15)) ^ (w1 >>> 10))) | 0
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) + 0x53380d13 + w3) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 36
  u = ((w5 >>> 11) | (w5 << 21)) ^ w5
  v = ((w2 >>> 2) | (w2 << 30)) ^ w2
  w4 = (w4 + (((u >>> 7) | (u << 25)) ^ (w5 >>> 3)) + w13 + (((v >>> 17) | (v << 15)) ^ (w2 >>> 10))) | 0
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) + 0x650a7354 + w4) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 37
  u = ((w6 >>> 11) | (w6 << 21)) ^ w6
  v = ((w3 >>> 2) | (w3 << 30)) ^ w3
  w5 = (w5 + (((u >>> 7) | (u << 25)) ^ (w6 >>> 3)) + w14 + (((v >>> 17) | (v << 15)) ^ (w3 >>> 10))) | 0
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) + 0x766a0abb + w5) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 38
  u = ((w7 >>> 11) | (w7 << 21)) ^ w7
  v = ((w4 >>> 2) | (w4 << 30)) ^ w4
  w6 = (w6 + (((u >>> 7) | (u << 25)) ^ (w7 >>> 3)) + w15 + (((v >>> 17) | (v << 15)) ^ (w4 >>> 10))) | 0
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) - 0x7e3d36d2 + w6) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 39
  u = ((w8 >>> 11) | (w8 << 21)) ^ w8
  v = ((w5 >>> 2) | (w5 << 30)) ^ w5
  w7 = (w7 + (((u >>> 7) | (u << 25)) ^ (w8 >>> 3)) + w0 + (((v >>> 17) | (v << 15)) ^ (w5 >>> 10))) | 0
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) - 0x6d8dd37b + w7) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 40
  u = ((w9 >>> 11) | (w9 << 21)) ^ w9
  v = ((w6 >>> 2) | (w6 << 30)) ^ w6
  w8 = (w8 + (((u >>> 7) | (u << 25)) ^ (w9 >>> 3)) + w1 + (((v >>> 17) | (v << 15)) ^ (w6 >>> 10))) | 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) - 0x5d40175f + w8) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 41
  u = ((w10 >>> 11) | (w10 << 21)) ^ w10
  v = ((w7 >>> 2) | (w7 << 30)) ^ w7
  w9 = (w9 + (((u >>> 7) | (u << 25)) ^ (w10 >>> 3)) + w2 + (((v >>> 17) | (v << 15)) ^ (w7 >>> 10))) | 0
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) - 0x57e599b5 + w9) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 42
  u = ((w11 >>> 11) | (w11 << 21)) ^ w11
  v = ((w8 >>> 2) | (w8 << 30)) ^ w8
  w10 = (w10 + (((u >>> 7) | (u << 25)) ^ (w11 >>> 3)) + w3 + (((v >>> 17) | (v << 15)) ^ (w8 >>> 10))) | 0
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) - 0x3db47490 + w10) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 43
  u = ((w12 >>> 11) | (w12 << 21)) ^ w12
  v = ((w9 >>> 2) | (w9 << 30)) ^ w9
  w11 = (w11 + (((u >>> 7) | (u << 25)) ^ (w12 >>> 3)) + w4 + (((v >>> 17) | (v << 15)) ^ (w9 >>> 10))) | 0
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) - 0x3893ae5d + w11) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 44
  u = ((w13 >>> 11) | (w13 << 21)) ^ w13
  v = ((w10 >>> 2) | (w10 << 30)) ^ w10
  w12 = (w12 + (((u >>> 7) | (u << 25)) ^ (w13 >>> 3)) + w5 + (((v >>> 17) | (v << 15)) ^ (w10 >>> 10))) | 0
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) - 0x2e6d17e7 + w12) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 45
  u = ((w14 >>> 11) | (w14 << 21)) ^ w14
  v = ((w11 >>> 2) | (w11 << 30)) ^ w11
  w13 = (w13 + (((u >>> 7) | (u << 25)) ^ (w14 >>> 3)) + w6 + (((v >>> 17) | (v << 15)) ^ (w11 >>> 10))) | 0
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) - 0x2966f9dc + w13) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 46
  u = ((w15 >>> 11) | (w15 << 21)) ^ w15
  v = ((w12 >>> 2) | (w12 << 30)) ^ w12
  w14 = (w14 + (((u >>> 7) | (u << 25)) ^ (w15 >>> 3)) + w7 + (((v >>> 17) | (v << 15)) ^ (w12 >>> 10))) | 0
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) - 0x0bf1ca7b + w14) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 47
  u = ((w0 >>> 11) | (w0 << 21)) ^ w0
  v = ((w13 >>> 2) | (w13 << 30)) ^ w13
  w15 = (w15 + (((u >>> 7) | (u << 25)) ^ (w0 >>> 3)) + w8 + (((v >>> 17) | (v << 15)) ^ (w13 >>> 10))) | 0
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) + 0x106aa070 + w15) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 48
  u = ((w1 >>> 11) | (w1 << 21)) ^ w1
  v = ((w14 >>> 2) | (w14 << 30)) ^ w14
  w0 = (w0 + (((u >>> 7) | (u << 25)) ^ (w1 >>> 3)) + w9 + (((v >>> 17) | (v << 15)) ^ (w14 >>> 10))) | 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) + 0x19a4c116 + w0) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 49
  u = ((w2 >>> 11) | (w2 << 21)) ^ w2
  v = ((w15 >>> 2) | (w15 << 30)) ^ w15
  w1 = (w1 + (((u >>> 7) | (u << 25)) ^ (w2 >>> 3)) + w10 + (((v >>> 17) | (v << 15)) ^ (w15 >>> 10))) | 0
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) + 0x1e376c08 + w1) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 50
  u = ((w3 >>> 11) | (w3 << 21)) ^ w3
  v = ((w0 >>> 2) | (w0 << 30)) ^ w0
  w2 = (w2 + (((u >>> 7) | (u << 25)) ^ (w3 >>> 3)) + w11 + (((v >>> 17) | (v << 15)) ^ (w0 >>> 10))) | 0
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) + 0x2748774c + w2) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 51
  u = ((w4 >>> 11) | (w4 << 21)) ^ w4
  v = ((w1 >>> 2) | (w1 << 30)) ^ w1
  w3 = (w3 + (((u >>> 7) | (u << 25)) ^ (w4 >>> 3)) + w12 + (((v >>> 17) | (v << 15)) ^ (w1 >>> 10))) | 0
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) + 0x34b0bcb5 + w3) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 52
  u = ((w5 >>> 11) | (w5 << 21)) ^ w5
  v = ((w2 >>> 2) | (w2 << 30)) ^ w2
  w4 = (w4 + (((u >>> 7) | (u << 25)) ^ (w5 >>> 3)) + w13 + (((v >>> 17) | (v << 15)) ^ (w2 >>> 10))) | 0
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) + 0x391c0cb3 + w4) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 53
  u = ((w6 >>> 11) | (w6 << 21)) ^ w6
  v = ((w3 >>> 2) | (w3 << 30)) ^ w3
  w5 = (w5 + (((u >>> 7) | (u << 25)) ^ (w6 >>> 3)) + w14 + (((v >>> 17) | (v << 15)) ^ (w3 >>> 10))) | 0
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) + 0x4ed8aa4a + w5) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 54
  u = ((w7 >>> 11) | (w7 << 21)) ^ w7
  v = ((w4 >>> 2) | (w4 << 30)) ^ w4
  w6 = (w6 + (((u >>> 7) | (u << 25)) ^ (w7 >>> 3)) + w15 + (((v >>> 17) | (v << 15)) ^ (w4 >>> 10))) | 0
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) + 0x5b9cca4f + w6) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 55
  u = ((w8 >>> 11) | (w8 << 21)) ^ w8
  v = ((w5 >>> 2) | (w5 << 30)) ^ w5
  w7 = (w7 + (((u >>> 7) | (u << 25)) ^ (w8 >>> 3)) + w0 + (((v >>> 17) | (v << 15)) ^ (w5 >>> 10))) | 0
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) + 0x682e6ff3 + w7) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  // round 56
  u = ((w9 >>> 11) | (w9 << 21)) ^ w9
  v = ((w6 >>> 2) | (w6 << 30)) ^ w6
  w8 = (w8 + (((u >>> 7) | (u << 25)) ^ (w9 >>> 3)) + w1 + (((v >>> 17) | (v << 15)) ^ (w6 >>> 10))) | 0
  u = ((e >>> 14) | (e << 18)) ^ e
  u = ((u >>> 5) | (u << 27)) ^ e
  t1 = (h + ((u >>> 6) | (u << 26)) + (g ^ (e & (f ^ g))) + 0x748f82ee + w8) | 0
  x = a ^ b
  d = (d + t1) | 0
  v = ((a >>> 9) | (a << 23)) ^ a
  v = ((v >>> 11) | (v << 21)) ^ a
  h = (t1 + ((v >>> 2) | (v << 30)) + (b ^ (x & y))) | 0
  // round 57
  u = ((w10 >>> 11) | (w10 << 21)) ^ w10
  v = ((w7 >>> 2) | (w7 << 30)) ^ w7
  w9 = (w9 + (((u >>> 7) | (u << 25)) ^ (w10 >>> 3)) + w2 + (((v >>> 17) | (v << 15)) ^ (w7 >>> 10))) | 0
  u = ((d >>> 14) | (d << 18)) ^ d
  u = ((u >>> 5) | (u << 27)) ^ d
  t1 = (g + ((u >>> 6) | (u << 26)) + (f ^ (d & (e ^ f))) + 0x78a5636f + w9) | 0
  y = h ^ a
  c = (c + t1) | 0
  v = ((h >>> 9) | (h << 23)) ^ h
  v = ((v >>> 11) | (v << 21)) ^ h
  g = (t1 + ((v >>> 2) | (v << 30)) + (a ^ (y & x))) | 0
  // round 58
  u = ((w11 >>> 11) | (w11 << 21)) ^ w11
  v = ((w8 >>> 2) | (w8 << 30)) ^ w8
  w10 = (w10 + (((u >>> 7) | (u << 25)) ^ (w11 >>> 3)) + w3 + (((v >>> 17) | (v << 15)) ^ (w8 >>> 10))) | 0
  u = ((c >>> 14) | (c << 18)) ^ c
  u = ((u >>> 5) | (u << 27)) ^ c
  t1 = (f + ((u >>> 6) | (u << 26)) + (e ^ (c & (d ^ e))) - 0x7b3787ec + w10) | 0
  x = g ^ h
  b = (b + t1) | 0
  v = ((g >>> 9) | (g << 23)) ^ g
  v = ((v >>> 11) | (v << 21)) ^ g
  f = (t1 + ((v >>> 2) | (v << 30)) + (h ^ (x & y))) | 0
  // round 59
  u = ((w12 >>> 11) | (w12 << 21)) ^ w12
  v = ((w9 >>> 2) | (w9 << 30)) ^ w9
  w11 = (w11 + (((u >>> 7) | (u << 25)) ^ (w12 >>> 3)) + w4 + (((v >>> 17) | (v << 15)) ^ (w9 >>> 10))) | 0
  u = ((b >>> 14) | (b << 18)) ^ b
  u = ((u >>> 5) | (u << 27)) ^ b
  t1 = (e + ((u >>> 6) | (u << 26)) + (d ^ (b & (c ^ d))) - 0x7338fdf8 + w11) | 0
  y = f ^ g
  a = (a + t1) | 0
  v = ((f >>> 9) | (f << 23)) ^ f
  v = ((v >>> 11) | (v << 21)) ^ f
  e = (t1 + ((v >>> 2) | (v << 30)) + (g ^ (y & x))) | 0
  // round 60
  u = ((w13 >>> 11) | (w13 << 21)) ^ w13
  v = ((w10 >>> 2) | (w10 << 30)) ^ w10
  w12 = (w12 + (((u >>> 7) | (u << 25)) ^ (w13 >>> 3)) + w5 + (((v >>> 17) | (v << 15)) ^ (w10 >>> 10))) | 0
  u = ((a >>> 14) | (a << 18)) ^ a
  u = ((u >>> 5) | (u << 27)) ^ a
  t1 = (d + ((u >>> 6) | (u << 26)) + (c ^ (a & (b ^ c))) - 0x6f410006 + w12) | 0
  x = e ^ f
  h = (h + t1) | 0
  v = ((e >>> 9) | (e << 23)) ^ e
  v = ((v >>> 11) | (v << 21)) ^ e
  d = (t1 + ((v >>> 2) | (v << 30)) + (f ^ (x & y))) | 0
  // round 61
  u = ((w14 >>> 11) | (w14 << 21)) ^ w14
  v = ((w11 >>> 2) | (w11 << 30)) ^ w11
  w13 = (w13 + (((u >>> 7) | (u << 25)) ^ (w14 >>> 3)) + w6 + (((v >>> 17) | (v << 15)) ^ (w11 >>> 10))) | 0
  u = ((h >>> 14) | (h << 18)) ^ h
  u = ((u >>> 5) | (u << 27)) ^ h
  t1 = (c + ((u >>> 6) | (u << 26)) + (b ^ (h & (a ^ b))) - 0x5baf9315 + w13) | 0
  y = d ^ e
  g = (g + t1) | 0
  v = ((d >>> 9) | (d << 23)) ^ d
  v = ((v >>> 11) | (v << 21)) ^ d
  c = (t1 + ((v >>> 2) | (v << 30)) + (e ^ (y & x))) | 0
  // round 62
  u = ((w15 >>> 11) | (w15 << 21)) ^ w15
  v = ((w12 >>> 2) | (w12 << 30)) ^ w12
  w14 = (w14 + (((u >>> 7) | (u << 25)) ^ (w15 >>> 3)) + w7 + (((v >>> 17) | (v << 15)) ^ (w12 >>> 10))) | 0
  u = ((g >>> 14) | (g << 18)) ^ g
  u = ((u >>> 5) | (u << 27)) ^ g
  t1 = (b + ((u >>> 6) | (u << 26)) + (a ^ (g & (h ^ a))) - 0x41065c09 + w14) | 0
  x = c ^ d
  f = (f + t1) | 0
  v = ((c >>> 9) | (c << 23)) ^ c
  v = ((v >>> 11) | (v << 21)) ^ c
  b = (t1 + ((v >>> 2) | (v << 30)) + (d ^ (x & y))) | 0
  // round 63
  u = ((w0 >>> 11) | (w0 << 21)) ^ w0
  v = ((w13 >>> 2) | (w13 << 30)) ^ w13
  w15 = (w15 + (((u >>> 7) | (u << 25)) ^ (w0 >>> 3)) + w8 + (((v >>> 17) | (v << 15)) ^ (w13 >>> 10))) | 0
  u = ((f >>> 14) | (f << 18)) ^ f
  u = ((u >>> 5) | (u << 27)) ^ f
  t1 = (a + ((u >>> 6) | (u << 26)) + (h ^ (f & (g ^ h))) - 0x398e870e + w15) | 0
  y = b ^ c
  e = (e + t1) | 0
  v = ((b >>> 9) | (b << 23)) ^ b
  v = ((v >>> 11) | (v << 21)) ^ b
  a = (t1 + ((v >>> 2) | (v << 30)) + (c ^ (y & x))) | 0
  s[0] = (a + 0x6a09e667) | 0
  s[1] = (b - 0x4498517b) | 0
  s[2] = (c + 0x3c6ef372) | 0
  s[3] = (d - 0x5ab00ac6) | 0
  s[4] = (e + 0x510e527f) | 0
  s[5] = (f - 0x64fa9774) | 0
  s[6] = (g + 0x1f83d9ab) | 0
  s[7] = (h + 0x5be0cd19) | 0
}
