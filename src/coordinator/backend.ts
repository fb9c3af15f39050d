/**
 * The origin the `talon coordinator` command answers StatObject/ListObjects from:
 * S3 and/or Azure, routed by each object's backend tag, configured from the
 * environment (TALON_S3_*, TALON_AZURE_*).
 */
import * as Router from "../backend/Router.js"

export const coordinatorBackendLayer = Router.layerConfig
