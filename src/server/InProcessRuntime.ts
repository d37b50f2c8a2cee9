/**
 * The runtime over a capacity port in this process, with a memory store of its own and no API server: the reconciler,
 * the FunctionCall dispatcher, the ledger, Budgets and blobs, wired as the sim backend wires them. For replays and
 * tests that step it on their own time (runtime/VirtualTime.ts): `nodus replay-functions`, and the runtime's tests.
 */
import { Layer } from "effect"
import { AdmissionPlugins } from "../apiserver/AdmissionPlugins.ts"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { Blobs } from "../apiserver/Blobs.ts"
import { Ids } from "../apiserver/Ids.ts"
import { Resources } from "../apiserver/Resources.ts"
import { currentPricebook } from "../core/billing/Pricebook.ts"
import { CapacityPort, type CapacityPortShape } from "../core/capacity/Capacity.ts"
import type { Offering } from "../core/capacity/Offering.ts"
import type { AnyRuntimeKind } from "../kinds/Kind.ts"
import { BudgetService } from "../runtime/Budgets.ts"
import { EventOutbox } from "../runtime/EventOutbox.ts"
import * as FunctionDispatch from "../runtime/FunctionDispatch.ts"
import { LedgerService } from "../runtime/LedgerService.ts"
import { Reconciler } from "../runtime/Reconciler.ts"
import { KindRegistry } from "../runtime/Registry.ts"
import * as BlobStore from "../store/BlobStore.ts"
import { ChangeFeed, defaultFeedOptions } from "../store/ChangeFeed.ts"
import * as MemoryStore from "../store/MemoryStore.ts"
import type { Store } from "../store/Store.ts"

/** The API group such a runtime serves. */
export const inProcessGroup = "nodus.dev"

/** A change feed that pushes every change to its followers; its poll, a fallback, never runs. */
export const pushedFeed = ChangeFeed.layerWith({ ...defaultFeedOptions, pollInterval: "365 days" })

export interface InProcessRuntimeOptions<E> {
  readonly port: CapacityPortShape
  readonly catalog: ReadonlyArray<Offering>
  readonly kinds: ReadonlyArray<AnyRuntimeKind>
  /** When runs the store knows but the port does not were lost (Reconciler's `lostAt`). */
  readonly lostAt: number
  /** The credits a new ledger starts with. */
  readonly starterMicro: bigint
  /** Object ids (default: random ones). */
  readonly ids?: Layer.Layer<Ids>
  /** The change feed over the store (default: `pushedFeed`). */
  readonly feed?: Layer.Layer<ChangeFeed, E, Store>
}

export const inProcessRuntime = <E = never>(options: InProcessRuntimeOptions<E>) => {
  const store = Layer.fresh(MemoryStore.layer)
  const ids = options.ids ?? Ids.layer
  const outbox = EventOutbox.layer.pipe(Layer.provideMerge(ids))
  const ledger = LedgerService.layer({ starterMicro: options.starterMicro }).pipe(Layer.provideMerge(outbox))
  const budgets = BudgetService.layer.pipe(Layer.provideMerge(Layer.mergeAll(options.feed ?? pushedFeed, ledger)))
  const blobs = Blobs.layer.pipe(Layer.provide(BlobStore.layerMemory))
  const resources = Resources.layer.pipe(Layer.provideMerge(AdmissionPlugins.layerNone))
  const base = Layer.mergeAll(
    resources,
    budgets,
    blobs,
    Layer.succeed(ApiConfig, {
      group: inProcessGroup,
      publicUrl: () => "http://127.0.0.1",
      bookmarkInterval: "30 seconds"
    }),
    KindRegistry.layer(options.kinds),
    Layer.succeed(CapacityPort, options.port)
  ).pipe(Layer.provideMerge(Layer.merge(store, ids)))
  return Reconciler.layer({ catalog: () => options.catalog, pricebook: currentPricebook, lostAt: options.lostAt }).pipe(
    Layer.provide(FunctionDispatch.layer()),
    Layer.provideMerge(base)
  )
}
