/**
 * Which objects this process's controllers own (docs/scale-out.md). Several `nodus serve` processes may share one
 * PostgreSQL database; each object must then be stepped by exactly one of them at a time, and one that took over from
 * another (a process killed, or shards rebalanced when one joined) must not be undone by the one it replaced.
 *
 * - **Shards.** Objects are grouped by shard (a hash of the object's key); a process owns a shard while it holds the
 *   shard's lock. Effect Cluster decides who holds which lock (server/Cluster.ts: runners, shard locks on the API's
 *   PostgreSQL); this module is what the runtime sees of it: `owns`, `changes`, `singleton`.
 * - **Epochs, the fencing token.** A lock says who should own a shard, not that a process which believed it did has
 *   stopped writing (it may be paused, or its lock lapsed while a write was in flight). So the owner claims the
 *   shard's next epoch in the store when it takes the shard, and every write it makes on the shard's behalf carries
 *   `fence`: a `RequireRecord` of its epoch's record, which the next claim deletes. A stale owner's commit then fails
 *   as a whole — its status, Attempts, events and postings with it — so two owners overlapping briefly cannot both
 *   record a launch or a charge.
 * - **Singletons.** A process-wide loop (the API machinery's controllers, maintenance, the Budgets' statuses, the
 *   simulator's clock) runs in one process of the store at a time: the holder of the shard its name hashes to.
 *
 * One process alone on its store (the embedded PGlite, held by a lock on its data directory; the memory store) owns
 * everything at once and fences nothing: `layerWhole`, the default, no different from before.
 */
import { Cause, Context, Deferred, Effect, Layer, Option, PubSub, type Scope, Stream } from "effect"
import { isObject } from "../core/Json.ts"
import type { Store, WriteOp } from "../store/Store.ts"

/** The entity an object is owned as: its key (`<plural>/<namespace>/<name>`), as the reconciler queues it. */
export const entityOf = (plural: string, namespace: string, name: string): string => `${plural}/${namespace}/${name}`

/** Shards taken or given up at once. */
export interface OwnershipChange {
  readonly acquired: ReadonlyArray<string>
  readonly lost: ReadonlyArray<string>
  /** When the shards were taken (the process's clock): runs a lost owner left live end then. */
  readonly at: number
}

export interface OwnershipShape {
  /** This process owns every object, always (one process per store): nothing is sharded or fenced. */
  readonly whole: boolean
  /** The shard of an object (by its key: `<plural>/<namespace>/<name>`) or a singleton (by its name). */
  readonly shardOf: (entity: string) => string
  /** Whether this process owns the entity's shard now, its epoch claimed. */
  readonly owns: (entity: string) => boolean
  /** Ops that make a commit fail unless this process still holds the epoch it claimed for the entity's shard. */
  readonly fence: (entity: string) => ReadonlyArray<WriteOp>
  /** The shards this process takes and loses from now on (a follower subscribes, then reads what it owns). */
  readonly changes: Stream.Stream<OwnershipChange>
  /**
   * Runs `run` while this process holds the singleton `name` (its shard's epoch claimed first), in one process of the
   * store at a time; interrupted when the shard goes elsewhere, and started again when it comes back.
   */
  readonly singleton: <R>(
    name: string,
    run: Effect.Effect<void, never, R>
  ) => Effect.Effect<void, never, Scope.Scope | R>
}

/** One process owns everything: the embedded and memory stores, and every test that runs one server. */
const whole: OwnershipShape = {
  whole: true,
  shardOf: () => "whole",
  owns: () => true,
  fence: () => [],
  changes: Stream.never,
  singleton: (_name, run) => Effect.asVoid(Effect.forkScoped(run))
}

/**
 * A process that owns nothing and runs no singleton (`--role api`: the API alone, among processes that share the store
 * and own its objects). It joins no cluster: nothing is ever handed to it.
 */
const none: OwnershipShape = {
  whole: false,
  shardOf: () => "none",
  owns: () => false,
  fence: () => [closedFence("none")],
  changes: Stream.never,
  singleton: () => Effect.void
}

export class Ownership extends Context.Service<Ownership, OwnershipShape>()("nodus/runtime/Ownership") {
  static readonly layerWhole = Layer.succeed(Ownership, whole)
  static readonly layerNone = Layer.succeed(Ownership, none)
}

/** The shard of every entity while ownership is starting (nothing is owned then). */
const unassigned = "unassigned"

/**
 * Ownership that starts in the background: the layer is ready at once, owning nothing, while `start` (given the
 * stream of changes to announce on, subscribed to from the first moment) builds the real one; from then on it answers
 * as that one does, and singletons registered meanwhile start there. A start that fails is logged: nothing is owned.
 */
export const layerStarting = <E, R>(start: (changes: PubSub.PubSub<OwnershipChange>) => Layer.Layer<Ownership, E, R>) =>
  Layer.effect(
    Ownership,
    Effect.gen(function*() {
      const changes = yield* PubSub.unbounded<OwnershipChange>()
      const ready = yield* Deferred.make<OwnershipShape>()
      let started: OwnershipShape | undefined
      yield* Effect.forkScoped(
        Effect.flatMap(Effect.scope, (scope) => Layer.buildWithScope(start(changes), scope)).pipe(
          Effect.flatMap((context) => Deferred.succeed(ready, started = Context.get(context, Ownership))),
          Effect.catchCause((cause) =>
            Effect.logError("ownership: could not start; this process owns nothing", Cause.pretty(cause))
          )
        )
      )
      return {
        whole: false,
        shardOf: (entity) => started?.shardOf(entity) ?? unassigned,
        owns: (entity) => started?.owns(entity) ?? false,
        fence: (entity) => started?.fence(entity) ?? [closedFence(unassigned)],
        changes: Stream.fromPubSub(changes),
        singleton: (name, run) =>
          Effect.asVoid(Effect.forkScoped(Effect.flatMap(Deferred.await(ready), (owner) => owner.singleton(name, run))))
      } satisfies OwnershipShape
    })
  )

/** The server's ownership where it provides one; one process owning everything where none is (the runtime's tests). */
export const currentOwnership = Effect.map(Effect.serviceOption(Ownership), Option.getOrElse(() => whole))

// ---------------------------------------------------------------------------------------------------------------------
// Epochs in the store

/** One record per shard: its latest epoch (`{ epoch, runner, at }`), read to claim the next. */
export const epochTable = "nodus-shard-epoch"

/** One record per shard, `<shard>@<epoch>`, for its latest epoch only: what a write's fence requires. */
export const fenceTable = "nodus-shard-fence"

const fenceId = (shard: string, epoch: number) => `${shard}@${epoch}`

/** The fence of an owner of `shard` at `epoch`: the commit holds only while no later epoch was claimed. */
export const fenceOf = (shard: string, epoch: number): WriteOp => ({
  _tag: "RequireRecord",
  table: fenceTable,
  id: fenceId(shard, epoch),
  present: true
})

/** A fence no commit passes: for a shard this process does not own (its epoch 0 is never claimed). */
export const closedFence = (shard: string): WriteOp => fenceOf(shard, 0)

/**
 * The ops that claim epoch `latest + 1` of `shard`: they hold only if `latest` is still the latest (its fence record is
 * there, or for a first claim no epoch is recorded), and delete that fence, so its owner's writes fail from then on.
 */
export const claimOps = (shard: string, latest: number, runner: string, at: number): ReadonlyArray<WriteOp> => {
  const next = latest + 1
  const value = { epoch: next, runner, at }
  return [
    latest === 0 ? { _tag: "RequireRecord", table: epochTable, id: shard, present: false } : fenceOf(shard, latest),
    ...(latest === 0 ? [] : [{ _tag: "DeleteRecord", table: fenceTable, id: fenceId(shard, latest) } as const]),
    { _tag: "PutRecord", table: fenceTable, id: fenceId(shard, next), value },
    { _tag: "PutRecord", table: epochTable, id: shard, value }
  ]
}

/** The latest epoch recorded for `shard` (0: none yet). */
export const latestEpoch = (store: Store["Service"], shard: string) =>
  Effect.map(store.getRecord(epochTable, shard, 0), (found) => {
    const value = Option.getOrUndefined(found)
    return isObject(value) && typeof value["epoch"] === "number" ? value["epoch"] : 0
  })

/** Claims attempts of one shard before giving up (each loses only to a claim made in between). */
const claimTriesMax = 5

/**
 * Claims the next epoch of each shard, in one commit when none raced, else one by one; answers the epochs claimed
 * (a shard another claim kept winning is left out: its lock holder claims it next pass).
 */
export const claimEpochs = (store: Store["Service"], shards: ReadonlyArray<string>, runner: string, at: number) =>
  Effect.gen(function*() {
    const latest = yield* Effect.forEach(shards, (shard) => latestEpoch(store, shard), { concurrency: 8 })
    const together = yield* Effect.exit(
      store.commit(shards.flatMap((shard, index) => claimOps(shard, latest[index]!, runner, at)))
    )
    const claimed = new Map<string, number>()
    if (together._tag === "Success") {
      shards.forEach((shard, index) => claimed.set(shard, latest[index]! + 1))
      return claimed
    }
    for (const shard of shards) {
      for (let tries = 0; tries < claimTriesMax; tries++) {
        const current = yield* latestEpoch(store, shard)
        const one = yield* Effect.exit(store.commit(claimOps(shard, current, runner, at)))
        if (one._tag === "Success") {
          claimed.set(shard, current + 1)
          break
        }
      }
    }
    return claimed
  })
