/**
 * The nodus TypeScript client (docs/clients.md, "TypeScript"): the `Client` Effect service and its layer, the
 * Promise-friendly `NodusClient`, and the client errors of the spec's table.
 */
export {
  Client,
  type ClientShape,
  type ExecOptions,
  type ExecResult,
  fromConfig,
  type JobHandle,
  type LogOptions,
  make,
  type SandboxHandle
} from "./Client.ts"
export { type ClientConfig, type ClientOptions, resolveConfig } from "./Config.ts"
export * from "./Errors.ts"
export { type FunctionCallHandle, type FunctionHandle, inlineMax, mapBatch, type MapOptions } from "./Functions.ts"
export { FunctionCall, NodusClient } from "./NodusClient.ts"
export { type CreateOptions, type ListOptions, type NodusObject, type ResourceCalls } from "./ResourceCalls.ts"
export { type RequestOptions, type Response, responseJson, responseText } from "./Transport.ts"
