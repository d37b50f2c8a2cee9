/**
 * The body of `POST …/namespaces/{ns}/functions/{name}/map` (nodus's design: the spec fixes map batches of up to
 * 1,000 calls but shows no endpoint; docs/functions.md, "Map batches"): one FunctionCall per input, all of one map.
 * The one schema the handler (kinds/function/http/FunctionMap.ts) and the OpenAPI document read. Each call it makes is
 * then admitted as a single create would be, so the rules of a FunctionCall live in schemas/FunctionCall.ts alone.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { described, duration, nonEmpty, notEmpty, optional } from "../../core/meta/Fields.ts"
import { LabelValue } from "../../core/meta/ObjectMeta.ts"
import { NonNegativeInt, Payload } from "../../core/schemas/Shared.ts"

export const functionCallBatchKind = "FunctionCallBatch"

/**
 * The label of a map's calls, valued its mapId (spec: FunctionCall.mapId — "the server adds the label
 * {api_group}/map").
 */
export const mapLabel = (group: string) => `${group}/map`

export const FunctionCallBatch = Schema.Struct({
  apiVersion: optional(Schema.String, "<group>/v1, as the Function's."),
  kind: optional(Schema.Literal(functionCallBatchKind), "FunctionCallBatch."),
  metadata: optional(
    Schema.Struct({
      labels: optional(Schema.Record(Schema.String, Schema.String), "Labels given to every call of the batch."),
      annotations: optional(
        Schema.Record(Schema.String, Schema.String),
        "Annotations given to every call (the caller's Python minor, <group>/python)."
      )
    }),
    "What every call's metadata carries; the calls' names are generated from the Function's."
  ),
  mapId: described(
    LabelValue.check(notEmpty),
    "The map the calls belong to (each call's spec.mapId and label <group>/map); the same for every batch of one map."
  ),
  startIndex: optional(NonNegativeInt, "The mapIndex of the first input (default 0); input i gets startIndex + i."),
  session: optional(nonEmpty, "The caller's session id, for every call."),
  timeout: optional(
    duration({ minimumMs: Limits.functionTimeoutMsMin, maximumMs: Limits.functionTimeoutMsMax }),
    "Every call's deadline, at most the Function's; unset takes the Function's."
  ),
  inputs: described(
    Schema.Array(Payload),
    `One Payload per call, at most ${Limits.functionCallBatchMax} (FunctionCallBatchTooLarge above).`
  )
}).annotate({
  identifier: functionCallBatchKind,
  description: "A batch of one map's calls of a Function, created together or not at all."
})

export type FunctionCallBatchType = typeof FunctionCallBatch.Type
