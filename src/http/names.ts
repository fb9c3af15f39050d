/** Bucket and container names as both S3 and Azure accept them (lowercase, 3-63 characters, no `..`). */
const BUCKET_RE = /^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$/

export const isValidBucket = (name: string): boolean => BUCKET_RE.test(name) && !name.includes("..")
