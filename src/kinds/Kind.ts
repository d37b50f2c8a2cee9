/**
 * What the runtime needs of a kind it runs (Registry.ts holds the entries): its machine, and how a stored object's spec
 * is read for it.
 */
import type { Effect } from "effect"
import type { Blocking } from "../core/billing/Billing.ts"
import type { Pricebook } from "../core/billing/Pricebook.ts"
import type { Offering, Variant } from "../core/capacity/Offering.ts"
import type { Market } from "../core/capacity/Placement.ts"
import type { ProviderModel } from "../core/capacity/ProviderModels.ts"
import type { ReconcileKind } from "../core/controller/Reconcile.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import type { ServedKind } from "../core/schemas/Kind.ts"
import type { Funds } from "./Estimate.ts"
import type { SampledPart, SampleRequest } from "./job/JobSampling.ts"

/** A kind's registration with the reconcile core (its name and machine), and what the runtime reads besides. */
export interface RuntimeKind<Spec, Status> extends ReconcileKind<Spec, Status> {
  /**
   * The spec of a stored object as the machine reads it: the kind's schema with its defaults (the object was admitted
   * already; this gives it its types), and server-owned annotations folded in. Undefined for a spec the schema refuses
   * (an object stored under an older schema), which is then left alone.
   */
  readonly specOf: (object: ResourceObject, group: string) => Spec | undefined
  /** How an object of the kind is estimated on dry runs and creates (spec: Estimate); none: it gets no estimate. */
  readonly estimator?: KindEstimator<Spec>
}

/** Why sampled runs could not be had (the runtime's EstimateSamplerError is one). */
export interface SampleFailure {
  readonly message: string
}

/** What an estimate reads now, as the runtime's Estimates service gathers it per request. */
export interface EstimateContext {
  readonly now: number
  readonly catalog: ReadonlyArray<Offering>
  readonly models: (variant: Variant) => ProviderModel
  /** Capacity now, for the placement preview (the backend's live market, or the fleet with every host free). */
  readonly market: Market
  readonly pricebook: Pricebook
  /** The balance, the arrears and the matching Budgets' rooms. */
  readonly funds: Funds
  /** Seeds sampled runs: the spec's hash, so the same spec gives the same bands. */
  readonly seed: string
  /** The simulated runs behind cost bands, cached and off the event loop (EstimateSampler.ts). */
  readonly sample: (request: SampleRequest) => Effect.Effect<SampledPart, SampleFailure>
}

export interface KindEstimator<Spec> {
  /** `status.estimate`, and why a real create would be refused now (empty: it would be admitted). */
  readonly estimate: (
    spec: Spec,
    context: EstimateContext
  ) => Effect.Effect<
    { readonly estimate: Record<string, unknown>; readonly blocking: ReadonlyArray<Blocking> },
    SampleFailure
  >
}

/** A kind of any spec and status: the registry holds kinds of different types side by side. */
// biome-ignore lint: the registry is heterogeneous; each entry is typed where it is written.
export type AnyRuntimeKind = RuntimeKind<any, any>

/**
 * A kind's one entry in the registry (src/kinds/Kinds.ts): how it is served and, for a kind with a machine, what runs
 * it.
 */
export interface KindEntry extends ServedKind {
  readonly runtime?: AnyRuntimeKind
}
