/** Tiny XML writers for the provider-shaped bodies the stub returns. */

// XML 1.0 cannot carry most C0 controls even as references; S3 clients that need them
// ask for `encoding-type=url`. Dropping them keeps the document parseable.
const INVALID_XML_CHARS = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g

export const escapeXml = (value: string): string =>
  value
    .replace(INVALID_XML_CHARS, "")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&apos;")

/** `<name>value</name>`, or nothing when the value is undefined. */
export const el = (name: string, value: string | number | boolean | undefined): string =>
  value === undefined ? "" : `<${name}>${escapeXml(String(value))}</${name}>`

export const S3_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
export const XML_DECL_S3 = `<?xml version="1.0" encoding="UTF-8"?>\n`
export const XML_DECL_AZURE = `<?xml version="1.0" encoding="utf-8"?>`
