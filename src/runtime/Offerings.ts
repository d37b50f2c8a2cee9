/**
 * Offerings (spec: Offering, "a purchasable capacity shape with its rates"): the catalog as objects, each with whether
 * capacity of it can be had now (`status.available`), read from the capacity port's market. The backend that holds
 * the port seeds them at start and refreshes the ones whose availability changed.
 */
import { Clock, Effect, Result } from "effect"
import type { Resources, WriteOptions } from "../apiserver/Resources.ts"
import { catalogPricebookVersion, offeringObject } from "../core/capacity/Catalog.ts"
import { type Offering, variantsOf } from "../core/capacity/Offering.ts"
import type { Market } from "../core/capacity/Placement.ts"
import { equals, isObject, type Json } from "../core/Json.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { timestamp } from "../core/meta/Strategy.ts"
import { refOfKind } from "../kinds/Kinds.ts"
import { quietly, runtimeComponent, statusWriter } from "./ObjectWriter.ts"

const writeOptions: WriteOptions = { dryRun: false, fieldValidation: "Ignore", fieldManager: runtimeComponent }

export const makeOfferings = (
  services: {
    readonly resources: Resources["Service"]
    readonly group: string
    readonly catalog: ReadonlyArray<Offering>
    readonly market: Market
  }
) => {
  const { resources, catalog, market } = services
  const ref = refOfKind(services.group, "Offering")
  const shown = new Map<string, boolean>()
  const writeStatus = statusWriter(resources)

  /** Whether some variant of the offering has a free host now. */
  const available = (offering: Offering): boolean =>
    variantsOf(offering).some((variant) => market.available(variant) > 0)

  const writeAvailability = (offering: Offering, now: boolean) =>
    Effect.gen(function*() {
      const status = {
        available: now,
        pricebookVersion: catalogPricebookVersion,
        updatedTime: timestamp(yield* Clock.currentTimeMillis)
      }
      yield* writeStatus(
        { ref, namespace: undefined, name: offering.id, uid: undefined, resourceVersion: undefined },
        status
      )
      shown.set(offering.id, now)
    })

  const isCurrent = (object: ResourceObject, now: boolean): boolean =>
    isObject(object.status) && object.status["available"] === now &&
    object.status["pricebookVersion"] === catalogPricebookVersion

  /** Creates the Offering, or replaces its spec when the catalog changed since it was written. */
  const ensure = (offering: Offering) =>
    Effect.gen(function*() {
      const { metadata, spec } = offeringObject(offering, catalogPricebookVersion)
      const body = { apiVersion: ref.apiVersion, kind: ref.info.kind, metadata, spec }
      const found = yield* Effect.result(resources.get(ref, undefined, offering.id))
      if (Result.isFailure(found)) {
        if (found.failure.code !== "NotFound") return yield* found.failure
        yield* resources.create(ref, undefined, body, writeOptions)
      } else if (!equals(found.success.spec ?? null, spec as unknown as Json)) {
        yield* resources.replace(ref, undefined, offering.id, {
          ...body,
          metadata: { ...metadata, resourceVersion: found.success.metadata.resourceVersion }
        }, writeOptions)
      } else if (isCurrent(found.success, available(offering))) {
        // A restart over the same catalog: nothing to write (a whole catalog of status writes costs a second on
        // PGlite).
        return shown.set(offering.id, available(offering))
      }
      yield* writeAvailability(offering, available(offering))
    })

  const seed = Effect.forEach(catalog, (offering) => quietly(`Offering ${offering.id}`)(ensure(offering)), {
    discard: true
  })

  /** Writes the offerings whose availability changed. */
  const refresh = Effect.forEach(catalog, (offering) => {
    const now = available(offering)
    return shown.get(offering.id) === now
      ? Effect.void
      : quietly(`Offering ${offering.id}`)(writeAvailability(offering, now))
  }, { discard: true })

  return { seed, refresh }
}
