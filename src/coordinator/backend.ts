/**
 * The origin the `talon coordinator` command answers StatObject/ListObjects from,
 * configured from the environment (TALON_S3_*).
 */
import * as S3 from "../backend/S3.js"

export const coordinatorBackendLayer = S3.layerConfig
