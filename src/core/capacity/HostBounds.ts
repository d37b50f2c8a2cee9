/**
 * What no offering could ever hold (docs/jobs.md, "Admission"): a resource floor — `cpu`, `memory` or `disk` — above
 * that of the largest host a workload may be placed on. Such a workload would only wait for capacity that never comes
 * (or, on a host that took it anyway, fail to boot), so admission refuses it and names the largest there is. Where
 * the offerings are fixed (the catalog, the simulator's fleet) the largest is theirs; where hosts join over time (live
 * Nodes) a larger one may still come, so the bound is the larger of theirs and `Limits.hostFloorsMax`. Each floor is
 * held to its own largest, whichever offering has it. Pure.
 */
import * as Limits from "../Limits.ts"
import { type Cause, fieldInvalid, quote } from "../meta/ApiError.ts"
import { parseQuantity } from "../Units.ts"
import type { Offering } from "./Offering.ts"

interface Floors {
  readonly cpu?: string | undefined
  readonly memory?: string | undefined
  readonly disk?: string | undefined
}

const floors = [
  {
    field: "cpu",
    largest: (offering: Offering) => offering.vcpus,
    most: Limits.hostFloorsMax.cpu,
    unit: 1,
    suffix: "",
    noun: "vCPUs"
  },
  {
    field: "memory",
    largest: (offering: Offering) => offering.memoryGiB,
    most: Limits.hostFloorsMax.memoryGiB,
    unit: Limits.GiB,
    suffix: "Gi",
    noun: "memory"
  },
  {
    field: "disk",
    largest: (offering: Offering) => offering.diskGiB,
    most: Limits.hostFloorsMax.diskGiB,
    unit: Limits.GiB,
    suffix: "Gi",
    noun: "disk"
  }
] as const

/** The offerings a workload may be placed on now, and whether more may join (live Nodes). */
export interface Placeable {
  readonly offerings: ReadonlyArray<Offering>
  readonly joinable: boolean
}

/** The floors above every offering: a cause for each, and what to ask for instead. */
export interface Beyond {
  readonly causes: ReadonlyArray<Cause>
  readonly fix: string
}

/**
 * Each floor of `resources` (at `path`.cpu/memory/disk) that no offering could ever hold, or undefined when none is.
 * Fixed offerings that are none bound nothing (nothing is known to compare with).
 */
export const beyondEveryOffering = (
  resources: Floors | undefined,
  placeable: Placeable,
  path: string
): Beyond | undefined => {
  if (resources === undefined || (placeable.offerings.length === 0 && !placeable.joinable)) return undefined
  const causes: Array<Cause> = []
  const fixes: Array<string> = []
  for (const floor of floors) {
    const text = resources[floor.field]
    const wanted = text === undefined ? undefined : parseQuantity(text)
    if (wanted === undefined) continue
    const largest = placeable.offerings.length === 0 ? undefined : Math.max(...placeable.offerings.map(floor.largest))
    const bound = placeable.joinable ? Math.max(largest ?? 0, floor.most) : largest!
    if (wanted <= bound * floor.unit) continue
    const field = `${path}.${floor.field}`
    const amount = (value: number) => `${value}${floor.suffix}`
    const available = largest === undefined
      ? `no host has joined yet, and none could have more than ${amount(bound)} ${floor.noun}`
      : `the largest available has ${amount(largest)} ${floor.noun}`
    causes.push(fieldInvalid(field, `Invalid value: ${quote(text)}: no offering could ever hold it; ${available}`))
    fixes.push(`${field} at most ${quote(amount(largest ?? bound))}`)
  }
  return causes.length === 0
    ? undefined
    : { causes, fix: `Ask for what an offering holds: ${fixes.join(", ")} (kubectl get offerings lists them).` }
}
