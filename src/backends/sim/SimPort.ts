/**
 * The simulator as a `CapacityPort` (src/core/capacity/Capacity.ts): the Effect-shaped interface every capacity driver
 * offers, over `SimCapacity`'s synchronous methods. The headless simulation calls `SimCapacity` directly (no Effect
 * per event in the hot loop); this adapter is what the capacity contract suite holds to the port's behaviour, and
 * what a live driver will be compared with.
 */
import { Effect } from "effect"
import type { CapacityPort } from "../../core/capacity/Capacity.ts"
import type { SimCapacity, WorkloadModel } from "./SimCapacity.ts"

export const simCapacityPort = (capacity: SimCapacity, workloadOf: (owner: string) => WorkloadModel): CapacityPort => {
  const listeners: Array<(owner: string) => void> = []
  const previous = capacity.onChange
  capacity.onChange = (owner) => {
    previous(owner)
    for (const listener of listeners) listener(owner)
  }
  return {
    launch: (request) => Effect.sync(() => capacity.launch({ ...request, workload: workloadOf(request.owner) })),
    checkpoint: (owner, attempt, episode) => Effect.sync(() => capacity.checkpoint(owner, attempt, episode)),
    stop: (owner, attempt, keepWarmMs) => Effect.sync(() => capacity.stop(owner, attempt, keepWarmMs)),
    facts: (owner, attempt) => Effect.sync(() => capacity.facts(owner, attempt)),
    available: (variant, namespace) => Effect.sync(() => capacity.available(variant, namespace)),
    onChange: (listener) => Effect.sync(() => void listeners.push(listener))
  }
}
