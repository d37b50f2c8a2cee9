/**
 * Admission of a kind's spec alone, as the server admits it (decode with every issue, unknown fields refused,
 * normalization, decode again), for rule tables: one row per rule, input → expected code and field path.
 */
import { Result, Schema } from "effect"
import { isObject, type Json, type JsonObject } from "../../src/core/Json.ts"
import { admit } from "../../src/core/meta/Admission.ts"
import type { Cause } from "../../src/core/meta/ApiError.ts"
import { checkUpdate, type KindDefinition, normalizeSpec, type ServerSettings } from "../../src/core/schemas/Kind.ts"

const envelopes = new WeakMap<KindDefinition, Schema.Codec<unknown, unknown>>()

const envelopeOf = (definition: KindDefinition) => {
  let envelope = envelopes.get(definition)
  if (envelope === undefined) {
    envelopes.set(
      definition,
      envelope = Schema.Struct({ spec: definition.spec }) as unknown as Schema.Codec<unknown, unknown>
    )
  }
  return envelope
}

export type Admission =
  | { readonly _tag: "Admitted"; readonly spec: JsonObject }
  | { readonly _tag: "Refused"; readonly code: string; readonly causes: ReadonlyArray<Cause> }

/** Admits `spec` under Strict field validation; causes carry paths from the object root (`spec.…`). */
/** A spec admitted as Resources admits it (schema, normalization, server rules), by a production server unless told. */
export const admitSpec = (
  definition: KindDefinition,
  spec: Json,
  settings: ServerSettings = { developmentWebhooks: false }
): Admission => {
  const first = admit(envelopeOf(definition), { spec }, "Strict", { kind: "things" }, "Thing")
  if (Result.isFailure(first)) return { _tag: "Refused", code: first.failure.code, causes: first.failure.causes ?? [] }
  const decoded = first.success.object["spec"]
  if (!isObject(decoded)) return { _tag: "Admitted", spec: decoded as unknown as JsonObject }
  const stored = normalizeSpec(
    definition,
    decoded,
    (next) =>
      Result.map(
        admit(envelopeOf(definition), { spec: next }, "Ignore", { kind: "things" }, "Thing"),
        (again) => again.object["spec"] as JsonObject
      )
  )
  if (Result.isFailure(stored)) {
    return { _tag: "Refused", code: stored.failure.code, causes: stored.failure.causes ?? [] }
  }
  const broken = definition.serverRules?.(stored.success, settings) ?? []
  if (broken.length > 0) return { _tag: "Refused", code: "Invalid", causes: broken }
  return { _tag: "Admitted", spec: stored.success }
}

/** The fields of the causes of a refused admission (empty when admitted). */
export const refusedFields = (admission: Admission): ReadonlyArray<string> =>
  admission._tag === "Refused" ? admission.causes.map((cause) => cause.field) : []

/** The fields an update from `before` to `after` may not change (both admitted first). */
export const updateRefusals = (definition: KindDefinition, before: Json, after: Json) => {
  const previous = admitSpec(definition, before)
  const next = admitSpec(definition, after)
  if (previous._tag !== "Admitted" || next._tag !== "Admitted") {
    throw new Error("both sides of an update must be admissible")
  }
  const broken = checkUpdate(definition, previous.spec, next.spec)
  return {
    immutable: broken.immutable.map((cause) => cause.field),
    invalid: broken.invalid.map((cause) => cause.field)
  }
}

/** The defaults admission applies to every Job spec (spec: Job), stored and visible on read. */
export const jobDefaults = {
  completions: 1,
  parallelism: 1,
  state: "Running",
  placement: { queueTimeout: "24h" },
  recovery: {
    minProgressDuration: "2m",
    checkpoint: { format: "Snapshot", maxSize: "1Ti", paths: ["/platform/state"], retainAfterFinish: "168h" }
  }
}
