/**
 * The estimate hook of creates (spec: Create semantics; Estimate; docs/billing.md, "Estimates"). Every dry run and
 * every real create of a kind asks this service for the object's `status.estimate`. A Job gets the simulator's
 * estimate (Estimator.ts) over the catalog and the ledger's funds; a real create that the estimate says would be
 * refused fails with the first blocking reason's code, its amounts and its fix (spec: Create semantics 3), while a
 * dry run answers the estimate with every blocking reason listed. Other kinds estimate nothing yet (`layerNone`
 * estimates nothing at all, for tests of the API machinery).
 */
import { createHash } from "node:crypto"
import { Clock, Context, Effect, Layer, Option, Result } from "effect"
import { ApiError } from "../core/ApiError.ts"
import type { Blocking } from "../core/Billing.ts"
import { canonical, isObject, type Json, type JsonObject } from "../core/Json.ts"
import type { ResourceObject } from "../core/ObjectMeta.ts"
import type { Offering, Variant } from "../core/Offering.ts"
import type { Market } from "../core/Placement.ts"
import { currentPricebook } from "../core/Pricebook.ts"
import { loadCatalog } from "../backends/sim/CatalogData.ts"
import { estimateJob } from "../backends/sim/Estimator.ts"
import { defaultFleet, providerModelsOf } from "../backends/sim/Run.ts"
import { admitJobSpec } from "../backends/sim/Scenario.ts"
import type { ProviderModel } from "../backends/sim/SimCapacity.ts"
import { LedgerService } from "./LedgerService.ts"
import { defaultHostsPerVariant } from "./SimWorld.ts"
import type { ResourceRef } from "./Resources.ts"

export interface EstimateResult {
  readonly estimate: Json
  /** Why a real create would fail (empty: it would be admitted). */
  readonly blocking: ReadonlyArray<Blocking>
}

export class Estimates extends Context.Service<Estimates, {
  /** The estimate of creating `object` now, when its kind has one. */
  readonly estimate: (ref: ResourceRef, object: ResourceObject) => Effect.Effect<Option.Option<EstimateResult>>
}>()("nodus/server/Estimates") {
  static readonly layerNone = Layer.succeed(Estimates, Estimates.of({ estimate: () => Effect.succeed(Option.none()) }))

  /** Job estimates over the catalog, the provider models and the ledger (LedgerService). */
  static readonly layer = (options: EstimatorOptions = {}) => Layer.effect(Estimates, make(options))
}

export interface EstimatorOptions {
  readonly catalog?: ReadonlyArray<Offering>
  readonly models?: (variant: Variant) => ProviderModel
  /** Capacity the placement preview sees; every variant has its fleet's hosts free unless told. */
  readonly market?: Market
}

/** The stored spec with its types; admission checked it already, so undefined only for a spec of an older schema. */
const admitted = (spec: JsonObject) => {
  try {
    return admitJobSpec(spec)
  } catch {
    return undefined
  }
}

/** The sim backend's fleet (SimWorld's defaults): the estimate's models are the simulator's. */
const defaultModels = providerModelsOf(defaultFleet(defaultHostsPerVariant))

function make(options: EstimatorOptions) {
  return Effect.gen(function*() {
    const ledger = yield* LedgerService
    const catalog = options.catalog ?? loadCatalog()
    const models = options.models ?? defaultModels
    const market: Market = options.market ?? {
      available: (variant) => models(variant).capacity,
      bootMs: (variant) => models(variant).bootMedianMs,
      meanTimeBetweenInterruptionsMs: (variant) => (variant.interruptible ? models(variant).preemptionMtbfMs : undefined)
    }
    const estimate = (ref: ResourceRef, object: ResourceObject): Effect.Effect<Option.Option<EstimateResult>> => {
      // An estimate is advice: one that fails (a bug) is logged and the object goes out without it.
      const spec = ref.info.kind === "Job" && isObject(object.spec) ? admitted(object.spec) : undefined
      if (spec === undefined) return Effect.succeed(Option.none())
      return Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const funds = yield* ledger.read((current) => ({ available: current.available, arrears: current.arrears, rooms: [] }))
        // The same spec gives the same bands: the seed is the spec's hash.
        const seed = createHash("sha256").update(canonical(object.spec as Json)).digest("hex").slice(0, 16)
        const attempted = yield* Effect.result(Effect.try(() => estimateJob({ spec, catalog, models, market, pricebook: currentPricebook, now, funds, seed })))
        if (Result.isFailure(attempted)) {
          yield* Effect.logWarning(`estimate of Job ${object.metadata.namespace ?? ""}/${object.metadata.name} failed`, attempted.failure)
          return Option.none()
        }
        const estimate = attempted.success
        const blocking = (estimate["blockingReasons"] ?? []) as ReadonlyArray<Blocking>
        return Option.some({ estimate: estimate as JsonObject, blocking })
      })
    }
    return Estimates.of({ estimate })
  })
}

/** The object with its estimate in `status.estimate` (other status fields kept). */
export const withEstimate = (object: ResourceObject, result: Option.Option<EstimateResult>): ResourceObject => {
  if (Option.isNone(result)) return object
  const status = object.status !== undefined && object.status !== null && typeof object.status === "object" && !Array.isArray(object.status) ? object.status : {}
  return { ...object, status: { ...status, estimate: result.value.estimate } }
}

/** The error a real create fails with when the estimate says it would be refused (spec: Create semantics 3). */
export const refusalOf = (result: Option.Option<EstimateResult>): ApiError | undefined => {
  if (Option.isNone(result)) return undefined
  const [first] = result.value.blocking
  return first === undefined ? undefined : new ApiError({ code: first.code, message: first.message, fix: first.fix })
}
