/**
 * The capacity a backend has free now, as the estimates' placement preview reads it (docs/billing.md, "Estimates").
 * A backend that simulates or drives real capacity provides its markets once it holds them (the sim backend: its
 * world's SimCapacity), for as long as it runs; the estimates ask at every request. Without such a backend there is
 * no live market, and the preview falls back to the fleet with every host free.
 */
import { Context, Effect, Layer, type Scope } from "effect"
import type { Offering } from "../core/capacity/Offering.ts"
import type { Market } from "../core/capacity/Placement.ts"

/** The market a workload of a project sees (warm hosts are reused within their project only). */
export type MarketSource = (namespace: string) => Market

export class LiveMarket extends Context.Service<LiveMarket, {
  /** The live market of `namespace`, or undefined when no backend provides one. */
  readonly marketFor: (namespace: string) => Market | undefined
  /** The offerings the backend sells, when they are not the catalog's (live hosts: their Nodes' offerings). */
  readonly catalogNow: (namespace: string) => ReadonlyArray<Offering> | undefined
  /** Makes `source` the live market (and `catalog` the offerings, when given) until the scope closes. */
  readonly provide: (
    source: MarketSource,
    catalog?: (namespace: string) => ReadonlyArray<Offering>
  ) => Effect.Effect<void, never, Scope.Scope>
}>()("nodus/runtime/LiveMarket") {
  static readonly layer = Layer.sync(LiveMarket, () => {
    let current: {
      readonly source: MarketSource
      readonly catalog: ((namespace: string) => ReadonlyArray<Offering>) | undefined
    } | undefined
    return LiveMarket.of({
      marketFor: (namespace) => current?.source(namespace),
      catalogNow: (namespace) => current?.catalog?.(namespace),
      provide: (source, catalog) => {
        const provided = { source, catalog }
        return Effect.acquireRelease(
          Effect.sync(() => {
            current = provided
          }),
          () =>
            Effect.sync(() => {
              if (current === provided) current = undefined
            })
        )
      }
    })
  })
}
