export { formatHostPort, type HostPort, parseHostPort, parseHostPortList } from "./address.js"
export {
  ControlChannel,
  ControlConnectError,
  ControlConnectionLost,
  ControlProtocolError,
  ControlRemoteError,
  ControlTimeout
} from "./ControlChannel.js"
export type { ControlChannelOptions, ControlError, RequestOptions } from "./ControlChannel.js"
export { FramedConnection, type FramedConnectionOptions, type Reply } from "./FramedConnection.js"
export { type Failure, type FailureKind, PipelinedConnection } from "./PipelinedConnection.js"
