/**
 * The estimate hook of creates (spec: Create semantics; Estimate). Every dry run and every real create of a kind asks
 * this service for the object's `status.estimate`; the billing work provides the real estimator (pricebook, holds,
 * p50/p90 bands, blocking reasons) behind this same interface. Until then `layerNone` estimates nothing, and objects
 * go out without `status.estimate`.
 */
import { Context, Effect, Layer, Option } from "effect"
import type { Json } from "../core/Json.ts"
import type { ResourceObject } from "../core/ObjectMeta.ts"
import type { ResourceRef } from "./Resources.ts"

export class Estimates extends Context.Service<Estimates, {
  /** The estimate of creating `object` now, when its kind has one. */
  readonly estimate: (ref: ResourceRef, object: ResourceObject) => Effect.Effect<Option.Option<Json>>
}>()("nodus/server/Estimates") {
  static readonly layerNone = Layer.succeed(Estimates, Estimates.of({ estimate: () => Effect.succeed(Option.none()) }))
}

/** The object with its estimate in `status.estimate` (other status fields kept). */
export const withEstimate = (object: ResourceObject, estimate: Option.Option<Json>): ResourceObject => {
  if (Option.isNone(estimate)) return object
  const status = object.status !== undefined && object.status !== null && typeof object.status === "object" && !Array.isArray(object.status) ? object.status : {}
  return { ...object, status: { ...status, estimate: estimate.value } }
}
