/**
 * The simulator as the capacity port (core/capacity/Capacity.ts): the Effect service every driver offers, over
 * `SimCapacity`'s synchronous methods and the engine's virtual time. The headless simulation calls `SimCapacity`
 * directly (no Effect per event in a hot loop of 10^7 steps: its synchronous facade, `launch`); the runtime's
 * reconciler calls this, and the capacity contract suite holds it to the same behaviour as every other driver.
 *
 * A program's behaviour comes from the owner's `sim.nodus.dev/*` annotations (Workloads.ts); a Sandbox's box is
 * SimBoxes' model, a Function's worker SimWorkers'. Changes are offered to
 * every subscriber of `changes` as the engine runs, in the order they happen.
 */
import { Effect, Layer, PubSub, Stream } from "effect"
import {
  type BoxReply,
  type CapacityChange,
  CapacityPort,
  type CapacityPortShape,
  type ProgramRequest
} from "../../core/capacity/Capacity.ts"
import { durationMs } from "../../core/StatusText.ts"
import { SimBoxes } from "./SimBoxes.ts"
import type { SimCapacity } from "./SimCapacity.ts"
import { SimWorkers, workerHostOf } from "./SimWorkers.ts"
import { simAnnotationPrefix, workloadFromAnnotations } from "./Workloads.ts"

/**
 * The port over `capacity`, and how many changes it has published so far (the sim backend runs the engine and the
 * reconciler by turns, and waits until the reconciler has taken in every change of an instant before its due keys
 * run). Changes are published as the engine runs: make the port before the engine runs.
 */
export const makeCounted = (
  capacity: SimCapacity
): Effect.Effect<{ readonly port: CapacityPortShape; readonly published: () => number }> =>
  Effect.gen(function*() {
    const changes = yield* PubSub.unbounded<CapacityChange>()
    let published = 0
    const publish = (change: CapacityChange) => {
      published++
      PubSub.publishUnsafe(changes, change)
    }
    const previousChange = capacity.onChange
    const previousFreed = capacity.onFreed
    // Set below: the owner's workers answer the calls a run that ended held before the change is told.
    let settleWorkers = (_owner: string) => {}
    capacity.onChange = (owner) => {
      settleWorkers(owner)
      previousChange(owner)
      publish({ _tag: "Attempt", owner })
    }
    capacity.onFreed = () => {
      previousFreed()
      publish({ _tag: "Freed" })
    }
    const boxes = new SimBoxes(capacity)
    const workers = new SimWorkers(workerHostOf(capacity))
    settleWorkers = (owner) => workers.settle(owner)
    /** The attempt of `owner` whose snapshot is checkpoint `seq` (its box's files are what a restore starts from). */
    const restoredBox = (owner: string, seq: number | undefined): string | undefined =>
      seq === undefined ? undefined : capacity.attemptsOf(owner).find((facts) => facts.checkpoint?.seq === seq)?.name
    const port: CapacityPortShape = {
      acquire: (request) => Effect.sync(() => capacity.acquire(request)),
      release: (owner, attempt, keepWarmMs) =>
        Effect.sync(() => {
          capacity.stop(owner, attempt, keepWarmMs)
          // A stop tells no change of its own: the calls a stopped worker held are answered now.
          workers.settle(owner)
        }),
      facts: (owner, attempt) => Effect.sync(() => capacity.facts(owner, attempt)),
      market: (namespace) => capacity.marketFor(namespace),
      forget: (owner) =>
        Effect.sync(() => {
          boxes.forget(owner)
          workers.forget(owner)
          capacity.forget(owner)
        }),
      changes: Stream.fromPubSub(changes),
      start: (owner, attempt, program) =>
        Effect.sync(() => {
          const worker = program.workload?.worker
          capacity.start(owner, attempt, {
            ...program,
            workload: workloadOf(program),
            startMs: worker === undefined ? 0 : workerStartMs(program.annotations)
          })
          // After the start, so that the box's main process can wait for its host to boot.
          if (program.workload?.sandbox === true) {
            boxes.open(
              owner,
              attempt,
              program.annotations,
              program.workload.workingDir,
              restoredBox(owner, program.restoreFromSeq),
              program.workload.argv
            )
          }
          if (worker !== undefined) workers.open(owner, attempt, program.annotations, worker.concurrency)
        }),
      checkpoint: (owner, attempt, episode) =>
        Effect.sync(() => {
          boxes.snapshot(owner, attempt)
          capacity.checkpoint(owner, attempt, episode)
        }),
      // A call to a worker is answered when it ends in virtual time (inside the engine's run), or at once when refused.
      box: (owner, attempt, request) =>
        request._tag === "Call" && workers.has(owner, attempt)
          ? Effect.callback<BoxReply>((resume) =>
            workers.call(owner, attempt, request, (reply) => resume(Effect.succeed(reply)))
          )
          : Effect.sync(() => boxes.call(owner, attempt, request))
    }
    return { port, published: () => published }
  })

/** The port over `capacity`. */
export const make = (capacity: SimCapacity): Effect.Effect<CapacityPortShape> =>
  Effect.map(makeCounted(capacity), ({ port }) => port)

export const layer = (capacity: SimCapacity) => Layer.effect(CapacityPort, make(capacity))

/** The simulated behaviour of a program: its owner's annotations; a serving program (a Sandbox's box) has no end. */
const workloadOf = (program: ProgramRequest) => {
  const model = workloadFromAnnotations(program.annotations)
  return program.service === true ? { ...model, durationMs: Number.POSITIVE_INFINITY, oomRate: 0 } : model
}

/** A Function worker's own start after its host is up (`sim.nodus.dev/worker-start`, default 0s; docs/simulator.md). */
const workerStartMs = (annotations: Readonly<Record<string, string>>) =>
  durationMs(annotations[`${simAnnotationPrefix}worker-start`], 0)
