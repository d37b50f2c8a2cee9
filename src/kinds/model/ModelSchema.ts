/**
 * Model (spec: Areas — Models and agents; Availability: models — list and read only; Environment examples pin "model
 * URI ending in @<40-hex revision>"): a model known to the platform, written by the service and read by users, which
 * InferenceEndpoints serve. The spec does not show its fields; this module decides a small schema
 * (docs/kinds/Model.md): where the weights are, the family, the pinned revision, the context window and the price.
 */
import { Schema } from "effect"
import { described, intAtLeast, matching, nonEmpty, oneOf, optional, usd } from "../../core/meta/Fields.ts"
import { kindInfo, readOps } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition } from "../../core/schemas/Shared.ts"

/** Model phases (nodus). */
export const modelPhases = ["Available", "Deprecated"] as const

const ModelPricing = Schema.Struct({
  inputUSDPerMillionTokens: optional(usd, "USD per million input tokens."),
  cachedInputUSDPerMillionTokens: optional(usd, "USD per million input tokens read from the cache."),
  outputUSDPerMillionTokens: optional(usd, "USD per million output tokens.")
}).annotate({
  identifier: "ModelPricing",
  description:
    "Token prices as decimal USD strings, per million tokens (per-token prices are below the ledger's micro-USD)."
})

export const ModelSpec = Schema.Struct({
  uri: described(nonEmpty, "Where the weights are, e.g. hf://org/name."),
  family: optional(nonEmpty, "The model family, e.g. llama or qwen."),
  revision: optional(
    matching(/^[0-9a-f]{40}$/u, "must be 40 lowercase hex digits"),
    "The pinned revision (40 hex digits), as in <uri>@<revision>."
  ),
  contextWindow: optional(intAtLeast(1), "The context window in tokens."),
  pricing: optional(ModelPricing, "Token prices.")
}).annotate({ identifier: "ModelSpec", description: "A model known to the platform (written by the service)." })

export const ModelStatus = Schema.Struct({
  phase: optional(oneOf(modelPhases), "Available, or Deprecated (still served, not for new endpoints)."),
  conditions: optional(Schema.Array(Condition), "Conditions."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects.")
}).annotate({ identifier: "ModelStatus", description: "Whether the model is offered." })

export const model: KindDefinition = {
  spec: ModelSpec,
  status: ModelStatus
  // Written by the service only (models are list and read for users): no update rules.
}

/**
 * How the API serves Model (spec: Availability by kind) and its schema: its entry in the registry (src/kinds/Kinds.ts).
 */
export const modelServed: ServedKind = {
  info: kindInfo({
    kind: "Model",
    plural: "models",
    shortNames: ["mdl"],
    operations: readOps,
    hasSpec: false,
    description: "A model known to the platform."
  }),
  definition: model
}
