/** Test PKI with the real `openssl`: a CA and a server certificate for 127.0.0.1 it signed. */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

export interface Issued {
  readonly ca: Buffer
  readonly cert: Buffer
  readonly key: Buffer
}

/** Issues `<name>-ca.pem` and `<name>.pem`/`<name>.key` in `dir`; returns their contents. */
export const issueCert = (dir: string, name: string): Issued => {
  const openssl = (...args: Array<string>) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] })
  openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}-ca.key`, "-out", `${name}-ca.pem`, "-days", "2", "-subj", `/CN=${name} test CA`)
  openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", "/CN=127.0.0.1")
  fs.writeFileSync(path.join(dir, `${name}.ext`), "subjectAltName=IP:127.0.0.1\n")
  openssl("x509", "-req", "-in", `${name}.csr`, "-CA", `${name}-ca.pem`, "-CAkey", `${name}-ca.key`, "-CAcreateserial", "-out", `${name}.pem`, "-days", "2", "-extfile", `${name}.ext`)
  const read = (f: string) => fs.readFileSync(path.join(dir, f))
  return { ca: read(`${name}-ca.pem`), cert: read(`${name}.pem`), key: read(`${name}.key`) }
}
