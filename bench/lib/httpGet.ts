/** One HTTP GET through a keep-alive agent, the whole body buffered (bench clients that check bytes). */
import * as http from "node:http"

export interface Reply {
  readonly status: number
  readonly body: Buffer
}

export const httpGet = (agent: http.Agent, url: string, path: string, headers: Record<string, string>): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const u = new URL(url)
    const req = http.request({ host: u.hostname, port: u.port, method: "GET", path, headers, agent }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }))
      res.on("error", reject)
    })
    req.on("error", reject)
    req.end()
  })
