/**
 * One page of the coordinator's JSON object listing (`GET /api/v1/objects` on its admin HTTP
 * port). Talon's ListObjects has no cursor and no dates, so a Talon client never sees this:
 * it carries what a filesystem listing needs beyond it (pages past 10,000 keys, a delimiter,
 * the origin's last-modified time) on a channel outside the Talon wire.
 */
import { Schema } from "effect"

export const ObjectListingEntry = Schema.Struct({
  /** Namespace path, as ListObjects spells it (`/s3/bucket/key`). */
  path: Schema.String,
  size: Schema.NonNegativeInt,
  version: Schema.String,
  /** ISO 8601; absent when the origin's listing did not say. */
  lastModified: Schema.optional(Schema.String)
})
export type ObjectListingEntry = typeof ObjectListingEntry.Type

export const ObjectListingPage = Schema.Struct({
  prefix: Schema.String,
  entries: Schema.Array(ObjectListingEntry),
  /** With a delimiter: the namespace paths (ending in it) one level down that hold more keys. */
  prefixes: Schema.Array(Schema.String),
  /** Pass back as `cursor` for the next page; null on the last one. */
  next: Schema.NullOr(Schema.String),
  /** The answering coordinator's control address, so a client can tell it reached its own cluster's coordinator. */
  control: Schema.optional(Schema.String)
})
export type ObjectListingPage = typeof ObjectListingPage.Type

export const OBJECT_LISTING_PATH = "/api/v1/objects"
/** The most entries (objects and prefixes) one page holds: S3's own page size. */
export const OBJECT_LISTING_MAX_PAGE = 1000
