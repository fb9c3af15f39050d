/** Azure Blob's error document (`x-ms-error-code` + `<Error>`), and its answers to a read refused by conditions or range. */
import { discardBody, type HttpCtx, sendXml } from "./context.js"
import type { ReadFailure } from "./readDecision.js"
import { escapeXml, XML_DECL_AZURE } from "./xml.js"

/** The x-ms-version the stub and the gateway answer with when a request names none. */
export const AZURE_API_VERSION = "2025-05-05"

export const azureError = (ctx: HttpCtx, status: number, code: string, message: string, headers: Record<string, string | number> = {}) => {
  discardBody(ctx)
  const body = `${XML_DECL_AZURE}<Error><Code>${code}</Code><Message>${escapeXml(
    `${message}\nRequestId:${ctx.requestId}\nTime:${new Date().toISOString()}`
  )}</Message></Error>`
  sendXml(ctx, status, body, { ...headers, "x-ms-error-code": code })
}

export const azureReadFailure = (ctx: HttpCtx, failure: ReadFailure, size: number): void => {
  if (failure === "precondition-failed") {
    return azureError(ctx, 412, "ConditionNotMet", "The condition specified using HTTP conditional header(s) is not met.")
  }
  const message =
    failure === "unsatisfiable"
      ? "The range specified is invalid for the current size of the resource."
      : "Multiple ranges in one request are not supported; request one range per Get Blob."
  azureError(ctx, 416, "InvalidRange", message, { "Content-Range": `bytes */${size}` })
}
