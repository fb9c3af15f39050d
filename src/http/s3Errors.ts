/** S3's error document (`<Error><Code>…`), and its answers to a read refused by conditions or range. */
import { discardBody, type HttpCtx, sendXml } from "./context.js"
import type { ReadFailure } from "./readDecision.js"
import { el, escapeXml, XML_DECL_S3 } from "./xml.js"

export const s3Error = (
  ctx: HttpCtx,
  status: number,
  code: string,
  message: string,
  extra: Record<string, string | number | undefined> = {},
  headers: Record<string, string | number> = {}
): void => {
  discardBody(ctx)
  const fields = Object.entries(extra)
    .map(([k, v]) => el(k, v))
    .join("")
  sendXml(
    ctx,
    status,
    `${XML_DECL_S3}<Error><Code>${code}</Code><Message>${escapeXml(message)}</Message>${fields}<RequestId>${ctx.requestId}</RequestId><HostId>${ctx.requestId}</HostId></Error>`,
    headers
  )
}

/** S3's answer to a read refused by its conditions or range. */
export const s3ReadFailure = (
  ctx: HttpCtx,
  failure: ReadFailure,
  key: string,
  size: number,
  range: string | undefined
): void => {
  if (failure === "precondition-failed") {
    s3Error(ctx, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", {
      Condition: "If-Match",
      Key: key
    })
  } else if (failure === "unsatisfiable") {
    s3Error(
      ctx,
      416,
      "InvalidRange",
      "The requested range is not satisfiable",
      { RangeRequested: range, ActualObjectSize: size },
      { "Content-Range": `bytes */${size}` }
    )
  } else {
    s3Error(ctx, 416, "InvalidRange", "Multiple ranges in one request are not supported; request one range per GET", {
      RangeRequested: range,
      ActualObjectSize: size
    }, { "Content-Range": `bytes */${size}` })
  }
}
