/**
 * The admission plugin `resourceFit` (docs/jobs.md, "Admission"): a workload whose `spec.resources` asks for more
 * cpu, memory or disk than any offering it may be placed on could ever hold is refused at create (and at an update
 * that changes its resources) with 422 Invalid at the field, naming the largest available — rather than admitted to
 * wait for capacity that never comes. The offerings are the backend's (live hosts: the project's Nodes, which more
 * may join; core/capacity/HostBounds.ts) or else the catalog's, as the estimates read them (Estimates.ts); a workload
 * placed on a customer Pool is not held to them.
 */
import { Effect } from "effect"
import type { AdmissionPlugin } from "../apiserver/AdmissionPlugins.ts"
import { beyondEveryOffering, type Placeable } from "../core/capacity/HostBounds.ts"
import { canonical, isObject, type Json, type JsonObject } from "../core/Json.ts"
import { ApiError, invalid, subjectOf } from "../core/meta/ApiError.ts"
import type { ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import type { Disposition } from "../core/meta/Strategy.ts"

const specOf = (object: JsonObject): JsonObject => (isObject(object["spec"]) ? object["spec"] : {})

const stringOf = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

const nameOf = (
  object: JsonObject
): string | undefined => (isObject(object["metadata"]) ? stringOf(object["metadata"]["name"]) : undefined)

/** The refusal of `object`'s resources, or undefined when each fits some offering of `catalog`. */
const refusalOf = (ref: ResourceRef, object: JsonObject, placeable: Placeable): ApiError | undefined => {
  const spec = specOf(object)
  const resources = spec["resources"]
  if (!isObject(resources)) return undefined
  if (isObject(spec["placement"]) && spec["placement"]["pool"] !== undefined) return undefined
  const floors = {
    cpu: stringOf(resources["cpu"]),
    memory: stringOf(resources["memory"]),
    disk: stringOf(resources["disk"])
  }
  const beyond = beyondEveryOffering(floors, placeable, "spec.resources")
  if (beyond === undefined) return undefined
  const { code, message, causes, subject } = invalid(subjectOf(ref, nameOf(object)), beyond.causes, ref.info.kind)
  return new ApiError({
    code,
    message,
    ...(causes === undefined ? {} : { causes }),
    ...(subject === undefined ? {} : { subject }),
    fix: beyond.fix
  })
}

/** `placeableOf(namespace)`: the offerings a workload of the project may be placed on, and whether more may join. */
export const resourceFitPlugin = (placeableOf: (namespace: string) => Placeable): AdmissionPlugin => {
  const check = (ref: ResourceRef, namespace: string | undefined, object: JsonObject) => {
    const refusal = refusalOf(ref, object, placeableOf(namespace ?? ""))
    return refusal === undefined ? Effect.void : Effect.fail(refusal)
  }
  return {
    name: "resourceFit",
    prepareCreate: ({ ref, namespace, object }) =>
      Effect.as(check(ref, namespace, object), {
        input: object,
        finish: (made: ResourceObject) => Effect.succeed({ result: made, ops: [] })
      }),
    // An object whose resources stay as they were is never refused for them (a stop, a label).
    prepareUpdate: ({ ref, namespace, object, current }) => {
      const before = isObject(current.spec) ? current.spec["resources"] : undefined
      const unchanged = canonical((specOf(object)["resources"] ?? null) as Json) === canonical((before ?? null) as Json)
      return Effect.as(unchanged ? Effect.void : check(ref, namespace, object), {
        input: object,
        finish: (result: Disposition) => Effect.succeed({ result, ops: [] })
      })
    }
  }
}
