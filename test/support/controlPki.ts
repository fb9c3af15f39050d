/**
 * Test PKI for control-plane TLS with the real `openssl` (EC P-256 keys: quick to make): CAs,
 * and leaf certificates they sign with an IP SAN for 127.0.0.1 and, optionally, a Talon
 * workload identity (`spiffe://…` URI SAN); `days: -1` makes one that has already expired.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

export interface LeafFiles {
  readonly certPath: string
  readonly keyPath: string
}

const openssl = (dir: string, ...args: Array<string>) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] })
const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

/** A self-signed CA `<name>.pem` / `<name>.key` in `dir`; returns the certificate's path. */
export const makeCa = (dir: string, name: string): string => {
  openssl(dir, "req", "-x509", ...EC, "-keyout", `${name}.key`, "-out", `${name}.pem`, "-days", "2", "-subj", `/CN=${name}`)
  return path.join(dir, `${name}.pem`)
}

/** A leaf `<name>.pem` / `<name>.key` signed by CA `ca` (made by makeCa in the same dir). */
export const makeLeaf = (dir: string, ca: string, name: string, options: { readonly spiffe?: string; readonly days?: number } = {}): LeafFiles => {
  openssl(dir, "req", ...EC, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`)
  fs.writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=IP:127.0.0.1${options.spiffe === undefined ? "" : `,URI:${options.spiffe}`}\n`)
  openssl(dir, "x509", "-req", "-in", `${name}.csr`, "-CA", `${ca}.pem`, "-CAkey", `${ca}.key`, "-CAcreateserial", "-out", `${name}.pem`, "-days", String(options.days ?? 2), "-extfile", `${name}.ext`)
  return { certPath: path.join(dir, `${name}.pem`), keyPath: path.join(dir, `${name}.key`) }
}
