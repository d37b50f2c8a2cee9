// The OpenAPI description of a FunctionCall's result long poll (kinds/function/http/FunctionCallResult.ts) and of a
// Function's map batches (kinds/function/http/FunctionMap.ts), docs/functions.md, added to the v1 document beside the
// kinds' own paths. Pure.

import { Schema } from "effect"
import type { JsonObject } from "../../../core/Json.ts"
import {
  functionCallBatchMax,
  functionCallResultWaitDefault,
  functionCallResultWaitMsMax
} from "../../../core/Limits.ts"
import { schemaName, toOpenApi30 } from "../../../http/openapi/OpenApi.ts"
import { json, operation, pathParameter, queryParameter } from "../../../http/openapi/Operations.ts"
import { FunctionCallBatch } from "../FunctionCallBatchSchema.ts"

/** The map batch's body and what it names (Payload), as components. */
export const functionCallSchemas = (): JsonObject =>
  Object.fromEntries(
    Object.entries(Schema.toJsonSchemaDocument(FunctionCallBatch).definitions).map((
      [name, schema]
    ) => [name, toOpenApi30(schema) as JsonObject])
  )

/** The map batch's path item, under the v1 root of `group`. */
const mapPath = (group: string): readonly [string, JsonObject] => [
  `/apis/${group}/v1/namespaces/{namespace}/functions/{name}/map`,
  {
    parameters: [
      pathParameter("namespace", "The project (namespace) of the Function."),
      pathParameter("name", "The name of the Function to call.")
    ],
    post: operation(
      "createFunctionCallBatch",
      "post",
      `Create one FunctionCall per input (at most ${functionCallBatchMax}; FunctionCallBatchTooLarge above), all or ` +
        "none, each admitted as a create of functioncalls is (FunctionNotFound, Invalid naming inputs[i]); for .map(). Needs the scopes of a " +
        "create of functioncalls. Honours Idempotency-Key.",
      {
        parameters: [
          queryParameter("dryRun", "All: admit the calls without creating them."),
          queryParameter("fieldValidation", "Strict, Warn (default) or Ignore, as on creates.")
        ],
        requestBody: { required: true, content: json("FunctionCallBatch") },
        responses: {
          "201": {
            description: "The calls created, in input order",
            content: json(`${schemaName(group, "v1", "FunctionCall")}List`)
          }
        }
      }
    )
  }
]

/** The result's and the map batch's path items, under the v1 root of `group`. */
export const functionCallPaths = (group: string): ReadonlyArray<readonly [string, JsonObject]> => [mapPath(group), [
  `/apis/${group}/v1/namespaces/{namespace}/functioncalls/{name}/result`,
  {
    parameters: [
      pathParameter("namespace", "The project (namespace) of the call."),
      pathParameter("name", "The name of the FunctionCall.")
    ],
    get: operation(
      "readFunctionCallResult",
      "get",
      "Wait until the call ends (phase Succeeded, Failed or Cancelled: status.result or " +
        "status.error) and answer it; when `timeout` passes first, the call as it is (ask again). For .remote() and .get().",
      {
        parameters: [
          queryParameter(
            "timeout",
            `How long to wait, a duration from 0s to ${
              functionCallResultWaitMsMax / 1000
            }s (default ${functionCallResultWaitDefault}).`
          )
        ],
        responses: {
          "200": { description: "The FunctionCall", content: json(schemaName(group, "v1", "FunctionCall")) }
        }
      }
    )
  }
]]
