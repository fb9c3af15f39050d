export * from "./ids.js"
export * from "./objectId.js"
export * from "./geometry.js"
export * from "./bitmap.js"
