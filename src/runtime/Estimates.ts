/**
 * The estimate hook of creates (spec: Create semantics; Estimate; docs/billing.md, "Estimates"). Every dry run and
 * every real create of a kind asks this service for the object's `status.estimate`. A kind is estimated by the
 * estimator its registration names (Registry.ts; a Job's is kinds/job/JobKind.ts over kinds/job/JobEstimate.ts),
 * over what this service reads per request: the catalog, the ledger's funds, the live market and the sampled runs. A
 * real create that the estimate says would be refused fails with the first blocking reason's code, its amounts and its
 * fix (spec: Create semantics 3), while a dry run answers the estimate with every blocking reason listed. Kinds without
 * an estimator get none (`layerNone` estimates nothing at all, for tests of the API machinery).
 *
 * Per request: the placement preview over the backend's live capacity (LiveMarket.ts; the fleet with every host free
 * where no backend provides one) and the funds. The sampled part — the simulated runs behind the bands — comes from
 * the EstimateSampler (a worker thread in the server) through a bounded LRU cache keyed by all it depends on, so
 * identical Jobs (sweeps, retries, a benchmark) cost a lookup, and concurrent ones share one sampling.
 */
import { Cache, Clock, Context, Effect, Equal, Exit, Hash, Layer, Option } from "effect"
import { createHash } from "node:crypto"
import type { Blocking } from "../core/billing/Billing.ts"
import { currentPricebook } from "../core/billing/Pricebook.ts"
import { type Offering, type Variant, variantKeyOf } from "../core/capacity/Offering.ts"
import type { Market } from "../core/capacity/Placement.ts"
import { defaultProviderModels, freeMarketOf, type ProviderModel } from "../core/capacity/ProviderModels.ts"
import { canonical, isObject, type Json, type JsonObject } from "../core/Json.ts"
import { lastValues } from "../core/Memo.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { tryParseMicroUsd } from "../core/Money.ts"
import { loadCatalog } from "../data/CatalogData.ts"
import type { SampleRequest } from "../kinds/job/JobSampling.ts"
import type { EstimateContext, RuntimeKind } from "../kinds/Kind.ts"
import { BudgetService } from "./Budgets.ts"
import { EstimateSampler } from "./EstimateSampler.ts"
import { LedgerService } from "./LedgerService.ts"
import { LiveMarket } from "./LiveMarket.ts"
import { KindRegistry } from "./Registry.ts"

export interface EstimateResult {
  readonly estimate: Json
  /** Why a real create would fail (empty: it would be admitted). */
  readonly blocking: ReadonlyArray<Blocking>
}

export class Estimates extends Context.Service<Estimates, {
  /** The estimate of creating `object` now, when its kind has one. */
  readonly estimate: (ref: ResourceRef, object: ResourceObject) => Effect.Effect<Option.Option<EstimateResult>>
}>()("nodus/runtime/Estimates") {
  static readonly layerNone = Layer.succeed(Estimates, Estimates.of({ estimate: () => Effect.succeed(Option.none()) }))

  /**
   * Job estimates over the catalog, the provider models, the ledger (LedgerService), the live market (LiveMarket)
   * and the sampled runs (EstimateSampler).
   */
  static readonly layer = (options: EstimatorOptions = {}) => Layer.effect(Estimates, make(options))
}

/** What the estimates read per request (the funds, the Budgets' rooms, the live market, the kinds' estimators). */
export type EstimatesReads = BudgetService | LedgerService | LiveMarket | KindRegistry

export interface EstimatorOptions {
  readonly catalog?: ReadonlyArray<Offering>
  readonly models?: (variant: Variant) => ProviderModel
  /** Capacity the placement preview sees; unless told, the live market, else the fleet with every host free. */
  readonly market?: Market
}

/**
 * Sampled parts kept for reuse. An entry is about 2 KiB (the part's bands, and the request its key carries), so
 * the cache stays within a few MiB; 1,024 distinct Jobs cover a sweep's or a team's recent variations, and the
 * least recently used one goes first.
 */
export const sampleCacheCapacity = 1024

/**
 * Specs decoded for estimates, kept by their text: a sweep, a benchmark or a retrying client sends one spec many times.
 */
const decodedSpecsMax = 256

/** A spec longer than this is decoded at each estimate rather than kept (the key is its whole text). */
const decodedSpecTextMax = 16_384

/**
 * A cache key: everything the sampled part depends on — the spec (the seed is its hash), the chosen variant, the
 * pricebook version and the provider model (all but its capacity: every sample gets hosts of its own). The request
 * rides along for the lookup; equality is the text alone.
 */
class SampleKey implements Equal.Equal {
  readonly text: string
  readonly request: SampleRequest

  constructor(request: SampleRequest) {
    const model = request.model as unknown as Record<string, unknown>
    const modelText = Object.keys(model).filter((key) => key !== "capacity").sort().map((key) =>
      `${key}=${String(model[key])}`
    ).join(",")
    this.text = `${request.seed}|${variantKeyOf(request.variant)}|${request.pricebook.version}|${modelText}`
    this.request = request
  }

  [Equal.symbol](that: Equal.Equal): boolean {
    return that instanceof SampleKey && that.text === this.text
  }

  [Hash.symbol](): number {
    return Hash.string(this.text)
  }
}

/** The default fleet (the sim backend's too): the estimate's models are the simulator's. */
const defaultModels = defaultProviderModels()

function make(options: EstimatorOptions) {
  return Effect.gen(function*() {
    const ledger = yield* LedgerService
    const live = yield* LiveMarket
    const budgets = yield* BudgetService
    const sampler = yield* EstimateSampler
    const registry = yield* KindRegistry
    const catalog = options.catalog ?? loadCatalog()
    const models = options.models ?? defaultModels
    const freeFleet = freeMarketOf(models)
    // A failed sampling is not kept: the next request for the same Job tries again.
    const sampled = yield* Cache.makeWith((key: SampleKey) => sampler.sample(key.request), {
      capacity: sampleCacheCapacity,
      timeToLive: (exit) => (Exit.isSuccess(exit) ? Number.POSITIVE_INFINITY : 0)
    })
    const estimators = new Map(
      registry.kinds.flatMap((kind) => (kind.estimator === undefined ? [] : [[kind.kind, kind] as const]))
    )
    const sample = (request: SampleRequest) => Cache.get(sampled, new SampleKey(request))

    /**
     * The kind's typed spec of `object` (its schema's decoding, about a third of a cached Job estimate's CPU), the same
     * for the same spec text and annotations (which carry a price bound): kept for the last `decodedSpecsMax` of them.
     */
    const decoded = lastValues<unknown>(decodedSpecsMax)
    const specOf = (
      kind: RuntimeKind<unknown, unknown>,
      object: ResourceObject,
      group: string,
      specText: string
    ): unknown => {
      if (specText.length > decodedSpecTextMax) return kind.specOf(object, group)
      const key = `${kind.kind}\n${group}\n${JSON.stringify(object.metadata.annotations ?? null)}\n${specText}`
      return decoded(key, () => kind.specOf(object, group))
    }

    /** What an estimate of `object` reads now. */
    const contextOf = (object: ResourceObject, specText: string): Effect.Effect<EstimateContext> =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        // Read at each request: what is free changes as the backend places and releases work.
        const market = options.market ?? live.marketFor(object.metadata.namespace ?? "") ?? freeFleet
        // The first hold must fit every matching Budget too (spec: Estimate.holdUSD).
        const owner = { namespace: object.metadata.namespace ?? "", labels: object.metadata.labels ?? {} }
        const funds = yield* ledger.read((current) => ({
          available: current.available,
          arrears: current.arrears,
          rooms: budgets.roomsFor(current, owner, now)
        }))
        // The same spec gives the same bands: the seed is the spec's hash.
        const seed = createHash("sha256").update(specText).digest("hex").slice(0, 16)
        return {
          now,
          catalog: live.catalogNow(object.metadata.namespace ?? "") ?? catalog,
          models,
          market,
          pricebook: currentPricebook,
          funds,
          seed,
          sample
        }
      })

    const estimate = (ref: ResourceRef, object: ResourceObject): Effect.Effect<Option.Option<EstimateResult>> => {
      const kind = estimators.get(ref.info.kind)
      if (kind?.estimator === undefined || !isObject(object.spec)) return Effect.succeed(Option.none())
      const specText = canonical(object.spec as Json)
      const spec = specOf(kind, object, ref.group, specText)
      if (spec === undefined) return Effect.succeed(Option.none())
      const estimator = kind.estimator
      return Effect.flatMap(contextOf(object, specText), (context) => estimator.estimate(spec, context)).pipe(
        Effect.map(({ estimate, blocking }) => Option.some({ estimate: estimate as JsonObject, blocking })),
        // An estimate is advice: one that fails (a crashed worker, a bug) is logged and the object goes out without it.
        Effect.catchCause((cause) =>
          Effect.as(
            Effect.logWarning(
              `estimate of ${ref.info.kind} ${object.metadata.namespace ?? ""}/${object.metadata.name} failed`,
              cause
            ),
            Option.none()
          )
        )
      )
    }
    return Estimates.of({ estimate })
  })
}

/** The object with its estimate in `status.estimate` (other status fields kept). */
export const withEstimate = (object: ResourceObject, result: Option.Option<EstimateResult>): ResourceObject => {
  if (Option.isNone(result)) return object
  const status = object.status !== undefined && object.status !== null && typeof object.status === "object" &&
      !Array.isArray(object.status)
    ? object.status
    : {}
  return { ...object, status: { ...status, estimate: result.value.estimate } }
}

/**
 * The rate and pricebook version of an estimate, as a dry run's ETag quotes them and a bound create compares them
 * (PriceConsent.ts). No rate when there is no estimate or it names none (no offering matches).
 */
export const quotedRateOf = (
  result: Option.Option<EstimateResult>
): { readonly rateMicro?: bigint; readonly pricebookVersion?: string } => {
  if (Option.isNone(result) || !isObject(result.value.estimate)) return {}
  const { rateUSDPerHour: rate, pricebookVersion } = result.value.estimate
  const rateMicro = typeof rate === "string" ? tryParseMicroUsd(rate) : undefined
  return {
    ...(rateMicro === undefined ? {} : { rateMicro }),
    ...(typeof pricebookVersion === "string" ? { pricebookVersion } : {})
  }
}

/** The error a real create fails with when the estimate says it would be refused (spec: Create semantics 3). */
export const refusalOf = (result: Option.Option<EstimateResult>): ApiError | undefined => {
  if (Option.isNone(result)) return undefined
  const [first] = result.value.blocking
  return first === undefined ? undefined : new ApiError({ code: first.code, message: first.message, fix: first.fix })
}
