/**
 * The simulator as the capacity port (core/capacity/Capacity.ts): the Effect service every driver offers, over
 * `SimCapacity`'s synchronous methods and the engine's virtual time. The headless simulation calls `SimCapacity`
 * directly (no Effect per event in a hot loop of 10^7 steps: its synchronous facade, `launch`); the runtime's
 * reconciler calls this, and the capacity contract suite holds it to the same behaviour as every other driver.
 *
 * A program's behaviour comes from the owner's `sim.nodus.dev/*` annotations (Workloads.ts). Changes are offered to
 * every subscriber of `changes` as the engine runs, in the order they happen.
 */
import { Effect, Layer, PubSub, Stream } from "effect"
import { type CapacityChange, CapacityPort, type CapacityPortShape } from "../../core/capacity/Capacity.ts"
import type { SimCapacity } from "./SimCapacity.ts"
import { workloadFromAnnotations } from "./Workloads.ts"

/**
 * The port over `capacity`, and how many changes it has published so far (the sim backend runs the engine and the
 * reconciler by turns, and waits until the reconciler has taken in every change of an instant before its due keys
 * run). Changes are published as the engine runs: make the port before the engine runs.
 */
export const makeCounted = (capacity: SimCapacity): Effect.Effect<{ readonly port: CapacityPortShape; readonly published: () => number }> =>
  Effect.gen(function*() {
    const changes = yield* PubSub.unbounded<CapacityChange>()
    let published = 0
    const publish = (change: CapacityChange) => {
      published++
      PubSub.publishUnsafe(changes, change)
    }
    const previousChange = capacity.onChange
    const previousFreed = capacity.onFreed
    capacity.onChange = (owner) => {
      previousChange(owner)
      publish({ _tag: "Attempt", owner })
    }
    capacity.onFreed = () => {
      previousFreed()
      publish({ _tag: "Freed" })
    }
    const port: CapacityPortShape = {
      acquire: (request) => Effect.sync(() => capacity.acquire(request)),
      release: (owner, attempt, keepWarmMs) => Effect.sync(() => capacity.stop(owner, attempt, keepWarmMs)),
      facts: (owner, attempt) => Effect.sync(() => capacity.facts(owner, attempt)),
      market: (namespace) => capacity.marketFor(namespace),
      forget: (owner) => Effect.sync(() => capacity.forget(owner)),
      changes: Stream.fromPubSub(changes),
      start: (owner, attempt, program) => Effect.sync(() => capacity.start(owner, attempt, { ...program, workload: workloadFromAnnotations(program.annotations) })),
      checkpoint: (owner, attempt, episode) => Effect.sync(() => capacity.checkpoint(owner, attempt, episode))
    }
    return { port, published: () => published }
  })

/** The port over `capacity`. */
export const make = (capacity: SimCapacity): Effect.Effect<CapacityPortShape> => Effect.map(makeCounted(capacity), ({ port }) => port)

export const layer = (capacity: SimCapacity) => Layer.effect(CapacityPort, make(capacity))
