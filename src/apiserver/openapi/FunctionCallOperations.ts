// The OpenAPI description of a FunctionCall's result long poll (apiserver/http/FunctionCallResult.ts,
// docs/functions.md), added to the v1 document beside the kind's own paths. Pure.

import type { JsonObject } from "../../core/Json.ts"
import { functionCallResultWaitDefault, functionCallResultWaitMsMax } from "../../core/Limits.ts"
import { schemaName } from "./OpenApi.ts"
import { json, operation, pathParameter, queryParameter } from "./Operations.ts"

/** The result's path item, under the v1 root of `group`. */
export const functionCallPaths = (group: string): ReadonlyArray<readonly [string, JsonObject]> => [[
  `/apis/${group}/v1/namespaces/{namespace}/functioncalls/{name}/result`,
  {
    parameters: [pathParameter("namespace", "The project (namespace) of the call."), pathParameter("name", "The name of the FunctionCall.")],
    get: operation("readFunctionCallResult", "get", "Wait until the call ends (phase Succeeded, Failed or Cancelled: status.result or " +
      "status.error) and answer it; when `timeout` passes first, the call as it is (ask again). For .remote() and .get().", {
      parameters: [queryParameter("timeout", `How long to wait, a duration from 0s to ${functionCallResultWaitMsMax / 1000}s (default ${functionCallResultWaitDefault}).`)],
      responses: { "200": { description: "The FunctionCall", content: json(schemaName(group, "v1", "FunctionCall")) } }
    })
  }
]]
