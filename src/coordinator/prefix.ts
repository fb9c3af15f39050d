/** Listing prefixes are parsed in core, where a worker answering ListObjects on its data port reads them too. */
export { parseListPrefix, type ListPrefix } from "../core/listPrefix.js"
