/**
 * Admission plugins: what a kind adds to the generic writes of Resources.ts beyond its schema, such as the rules that
 * read the store (a Secret's values, the secret references of a workload) or the estimate and price consent of a
 * compute kind (spec: Create semantics). The API server declares the seam; the runtime registers each kind's plugins
 * (src/runtime/Admission.ts), so the generic machinery names no kind and imports no service it serves.
 *
 * Every write of a kind runs its plugins in order: a plugin's `prepare` sees the admitted body before the strategy
 * makes the object (and may change it, as a Secret's values leave it), and its `finish` sees what the strategy made
 * (and may change it and add ops to the commit). A create's `review` runs once the object is made, dry runs included:
 * it may fill status (the estimate), refuse, or give a dry run its ETag. A removal commits each plugin's `removeOps`.
 */
import { Context, Effect, Layer } from "effect"
import type { JsonObject } from "../core/Json.ts"
import type { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import type { Disposition } from "../core/meta/Strategy.ts"
import type { WriteOp } from "../store/Store.ts"
import type { Principal } from "./Auth.ts"

/** The strategy's input, and what to do with what it decides: the final result and the ops committed beside it. */
export interface Prepared<A> {
  readonly input: JsonObject
  readonly finish: (result: A) => Effect.Effect<Finished<A>, ApiError>
}

export interface Finished<A> {
  readonly result: A
  readonly ops: ReadonlyArray<WriteOp>
  /**
   * Status fields the create response shows once and the store never keeps (an EnrollmentToken's token, a webhook's
   * signing secret). A dry run shows none.
   */
  readonly shownOnce?: JsonObject
}

export interface CreateRequest {
  readonly ref: ResourceRef
  readonly namespace: string | undefined
  readonly object: JsonObject
  /** Who writes (absent: the server's own controllers), for rules whose answer depends on what the caller may read. */
  readonly principal?: Principal | undefined
}

export interface UpdateRequest extends CreateRequest {
  readonly current: ResourceObject
}

export interface Review {
  readonly ref: ResourceRef
  readonly namespace: string | undefined
  /** The object as made (and as earlier plugins left it). */
  readonly object: ResourceObject
  readonly dryRun: boolean
  /** `If-Match` of the create: the ETag of a dry run it was shown. */
  readonly ifMatch: string | undefined
}

export interface Reviewed {
  readonly object: ResourceObject
  /** A dry run's ETag (a price quote, PriceConsent.ts); absent: the object's own. */
  readonly etag?: string
}

export interface AdmissionPlugin {
  /** For logs and docs. */
  readonly name: string
  readonly prepareCreate?: (request: CreateRequest) => Effect.Effect<Prepared<ResourceObject>, ApiError>
  readonly prepareUpdate?: (request: UpdateRequest) => Effect.Effect<Prepared<Disposition>, ApiError>
  readonly review?: (review: Review) => Effect.Effect<Reviewed, ApiError>
  /** Ops committed with the removal of `current` (a Secret's values go with it). */
  readonly removeOps?: (current: ResourceObject) => ReadonlyArray<WriteOp>
}

export class AdmissionPlugins extends Context.Service<AdmissionPlugins, {
  /** The plugins of a kind, in the order they run. */
  readonly of: (ref: ResourceRef) => ReadonlyArray<AdmissionPlugin>
}>()("nodus/apiserver/AdmissionPlugins") {
  /** No plugins: the API machinery alone (its own tests). */
  static readonly layerNone = Layer.succeed(AdmissionPlugins, AdmissionPlugins.of({ of: () => [] }))
}

const unprepared = <A>(input: JsonObject): Prepared<A> => ({
  input,
  finish: (result) => Effect.succeed({ result, ops: [] })
})

/** Runs the `prepare` of each plugin in turn; the finishes run in the same order, each on what the previous made. */
export const prepareAll = <A, R>(
  plugins: ReadonlyArray<AdmissionPlugin>,
  input: JsonObject,
  prepare: (plugin: AdmissionPlugin, input: JsonObject) => Effect.Effect<Prepared<A>, ApiError, R> | undefined
): Effect.Effect<Prepared<A>, ApiError, R> =>
  Effect.gen(function*() {
    let current: Prepared<A> = unprepared(input)
    const finishes: Array<Prepared<A>["finish"]> = []
    for (const plugin of plugins) {
      const prepared = prepare(plugin, current.input)
      if (prepared === undefined) continue
      current = yield* prepared
      finishes.push(current.finish)
    }
    return {
      input: current.input,
      finish: (made) =>
        Effect.gen(function*() {
          let result = made
          const ops: Array<WriteOp> = []
          let shownOnce: JsonObject | undefined
          for (const finish of finishes) {
            const finished = yield* finish(result)
            result = finished.result
            ops.push(...finished.ops)
            if (finished.shownOnce !== undefined) shownOnce = { ...shownOnce, ...finished.shownOnce }
          }
          return shownOnce === undefined ? { result, ops } : { result, ops, shownOnce }
        })
    }
  })

/** Runs the `review` of each plugin in turn; the last ETag a plugin gives wins. */
export const reviewAll = (plugins: ReadonlyArray<AdmissionPlugin>, review: Review): Effect.Effect<Reviewed, ApiError> =>
  Effect.gen(function*() {
    let reviewed: Reviewed = { object: review.object }
    for (const plugin of plugins) {
      if (plugin.review === undefined) continue
      const next = yield* plugin.review({ ...review, object: reviewed.object })
      const etag = next.etag ?? reviewed.etag
      reviewed = etag === undefined ? { object: next.object } : { object: next.object, etag }
    }
    return reviewed
  })
