/** The request head the fill's origin client (receiveConnection.ts) writes for a bodiless request. */
import type { OriginRequest } from "./http.js"
import { ReceiveError } from "./receiveTypes.js"

export const requestHead = (r: OriginRequest): string => {
  let head = `${r.method} ${r.path} HTTP/1.1\r\n`
  let host = false
  for (const name in r.headers) {
    const value = r.headers[name]!
    if (/[\r\n]/.test(name) || /[\r\n]/.test(value)) throw new ReceiveError(`header ${name} holds a line break`, "EINVAL")
    if (name.toLowerCase() === "host") host = true
    head += `${name}: ${value}\r\n`
  }
  if (!host) head += `host: ${r.port === 80 ? r.hostname : `${r.hostname}:${r.port}`}\r\n`
  return `${head}connection: keep-alive\r\n\r\n`
}

