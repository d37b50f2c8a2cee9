/**
 * Ownership over Effect Cluster (docs/scale-out.md), for servers that share one PostgreSQL database: every `nodus
 * serve` process is a runner of `effect/cluster`'s Sharding, registered with its shard locks in the same database
 * (SqlRunnerStorage: a runners table with heartbeats, and PostgreSQL advisory locks held on a connection of their
 * own). Each runner computes the shards' assignment from the healthy runners (a hash ring) and takes the locks of its
 * own; a runner whose heartbeat is older than `shardLockExpirationMs` drops out of the ring, and its shards are taken
 * by the others (its advisory locks went with its connection when it died). A runner that joins takes its share from
 * the others, which let go of it first.
 *
 * No message crosses between runners (`Runners.layerNoop`, no message storage): the runtime asks only which shards
 * this process holds. A pass every `pollMs` compares them with the shards whose epochs it has claimed
 * (runtime/Ownership.ts): a shard newly held gets its next epoch claimed in the store, then is announced as acquired;
 * a shard no longer held is announced as lost at once. Every `verifyEveryPasses` passes the claimed epochs are read
 * back: a shard this process lost and took again between two passes (another runner's epoch claimed in between) is
 * announced lost, then claimed anew, so its writes stop failing on a superseded fence. Singletons run on the runner
 * that holds the shard of their name, once that shard's epoch is claimed.
 *
 * Loaded only for PostgreSQL, and in the background (Server.ts, Ownership.layerStarting): the server listens first,
 * owning nothing until its runner holds shards; the embedded store never loads it.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Duration, Effect, Layer, Option, PubSub, Redacted, Schedule, Stream } from "effect"
import {
  EntityId,
  MessageStorage,
  RunnerAddress,
  RunnerHealth,
  Runners,
  ShardId,
  Sharding,
  ShardingConfig,
  SqlRunnerStorage
} from "effect/cluster"
import { Migrator, SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import { hostname } from "node:os"
import { isObject } from "../core/Json.ts"
import { surviving } from "../runtime/Following.ts"
import {
  claimEpochs,
  closedFence,
  epochTable,
  fenceOf,
  Ownership,
  type OwnershipChange,
  type OwnershipShape
} from "../runtime/Ownership.ts"
import { Store } from "../store/Store.ts"

export interface ClusterSettings {
  /** The PostgreSQL database the store uses: the runners and their shard locks live there too. */
  readonly databaseUrl: string
  /**
   * How long a runner that stopped heartbeating keeps its shards (default 10 s; Effect Cluster's is 35 s). Takeover of
   * a killed runner's shards takes this plus about `refreshAssignmentsMs` and a second of the acquisition loop.
   */
  readonly shardLockExpirationMs?: number
  /** How often a runner reads the runners and recomputes the assignment (default 1 s). */
  readonly refreshAssignmentsMs?: number
  /** Shards the objects are spread over (default 64); the same in every process of a database. */
  readonly shardsPerGroup?: number
  /** How often the held shards are compared with the claimed epochs (default 200 ms). */
  readonly pollMs?: number
}

export const shardLockExpirationMsDefault = 10_000
const refreshAssignmentsMsDefault = 1_000
export const shardsPerGroupDefault = 64
const pollMsDefault = 200

/** The claimed epochs are read back every this many passes (one read of every shard's epoch: 2 s by default). */
const verifyEveryPasses = 10

/** Table prefix of the runners and locks tables (`nodus_cluster_runners`, `nodus_cluster_locks`). */
const tablePrefix = "nodus_cluster"
const group = "default"

/** The runner tables' migrations, serialised across processes starting at once like the store's (SqlStore.migrate). */
const migrate = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const run = Migrator.make({})({
    loader: SqlRunnerStorage.migrations({ prefix: tablePrefix }),
    table: `${tablePrefix}_runner_migrations`
  })
  // "nodus" + 1: the store's migrations hold 474315273587.
  yield* sql.withTransaction(Effect.andThen(sql`SELECT pg_advisory_xact_lock(474315273588)`, run))
}).pipe(Effect.orDie)

/** Effect Cluster's Sharding over the database: runner storage in SQL, no messaging between runners. */
const shardingLayer = (settings: ClusterSettings, address: RunnerAddress.RunnerAddress) => {
  const expiration = Duration.millis(settings.shardLockExpirationMs ?? shardLockExpirationMsDefault)
  const config = ShardingConfig.layer({
    runnerAddress: Option.some(address),
    shardsPerGroup: settings.shardsPerGroup ?? shardsPerGroupDefault,
    shardLockExpiration: expiration,
    // Locks are refreshed (and heartbeats written) three times per expiry, as Effect Cluster does by default.
    shardLockRefreshInterval: Duration.divideUnsafe(expiration, 3),
    refreshAssignmentsInterval: Duration.millis(settings.refreshAssignmentsMs ?? refreshAssignmentsMsDefault),
    // Nothing is delivered through message storage; its poll only reopens the acquisition loop.
    entityMessagePollInterval: Duration.seconds(2)
  })
  const pg = Layer.effectDiscard(migrate).pipe(
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(settings.databaseUrl), maxConnections: 4 }))
  )
  return Sharding.layer.pipe(
    Layer.provide(Runners.layerNoop),
    Layer.provide(MessageStorage.layerNoop),
    Layer.provide([SqlRunnerStorage.layerStorage({ prefix: tablePrefix }), RunnerHealth.layerNoop]),
    Layer.provide(config),
    Layer.provide(Layer.orDie(pg))
  )
}

/**
 * Ownership by Effect Cluster, announcing the shards it takes and loses on `changes` (needs the store, for the epochs).
 * Server.ts starts it in the background (Ownership.layerStarting): this module, with Effect Cluster's, is loaded then.
 */
export const layer = (settings: ClusterSettings, changes: PubSub.PubSub<OwnershipChange>) => {
  // Unique per process: a restarted process is a new runner, and the killed one's row lapses with its heartbeats.
  const address = RunnerAddress.make(`${hostname()}-${randomBytes(4).toString("hex")}`, process.pid)
  const runner = `${address.host}:${address.port}`
  return Layer.effect(Ownership, start(settings, runner, changes)).pipe(Layer.provide(shardingLayer(settings, address)))
}

/** Ownership over a started runner, announcing the shards it takes and loses on `changes`. */
const start = (settings: ClusterSettings, runner: string, changes: PubSub.PubSub<OwnershipChange>) =>
  Effect.gen(function*() {
    const sharding = yield* Sharding.Sharding
    const store = yield* Store
    const shardsPerGroup = settings.shardsPerGroup ?? shardsPerGroupDefault
    const shards = Array.from({ length: shardsPerGroup }, (_, index) => ShardId.make(group, index + 1))
    const shardOf = (entity: string) => sharding.getShardId(EntityId.make(entity), group).toString()
    const byName = new Map(shards.map((shard) => [shard.toString(), shard]))
    /** The epoch claimed for each shard this process holds. */
    const claimed = new Map<string, number>()

    const held = (shard: string) => {
      const id = byName.get(shard)
      return id !== undefined && sharding.hasShardId(id)
    }
    const owns = (entity: string) => {
      const shard = shardOf(entity)
      return claimed.has(shard) && held(shard)
    }

    /** Shards whose claimed epoch is no longer the stored one: another runner claimed them since. */
    const superseded = Effect.map(store.records(epochTable, "", shardsPerGroup * 2, 0), (records) => {
      const stored = new Map(
        records.map((record) => [record.id, isObject(record.value) ? record.value["epoch"] : undefined])
      )
      return [...claimed].filter(([shard, epoch]) => stored.get(shard) !== epoch).map(([shard]) => shard)
    })
    let passes = 0

    /** Lost shards are announced at once; held ones once their epochs are claimed. */
    const pass = Effect.gen(function*() {
      const stale = ++passes % verifyEveryPasses === 0 ? new Set(yield* superseded) : new Set<string>()
      const lost = [...claimed.keys()].filter((shard) => !held(shard) || stale.has(shard))
      for (const shard of lost) claimed.delete(shard)
      const taken = shards.map(String).filter((shard) => held(shard) && !claimed.has(shard))
      const at = yield* Clock.currentTimeMillis
      const epochs = taken.length === 0 ? new Map<string, number>() : yield* claimEpochs(store, taken, runner, at)
      // A shard given up while its claim was made is left to its next holder (whose claim fences this one).
      const acquired = [...epochs].filter(([shard]) => held(shard)).map((
        [shard, epoch]
      ) => (claimed.set(shard, epoch), shard))
      if (lost.length === 0 && acquired.length === 0) return
      const change = { acquired, lost, at }
      yield* PubSub.publish(changes, change)
      yield* Effect.logInfo(
        `cluster: runner ${runner} took ${acquired.length} shards, gave up ${lost.length}; holds ${claimed.size} of ${shardsPerGroup}`
      )
    })
    yield* Effect.forkScoped(
      Effect.repeat(
        surviving("cluster", "claiming shards")(pass),
        Schedule.spaced(Duration.millis(settings.pollMs ?? pollMsDefault))
      )
    )

    const awaitOwned = (name: string) =>
      Effect.repeat(Effect.sync(() => owns(name)), {
        until: (owned) => owned,
        schedule: Schedule.spaced(Duration.millis(settings.pollMs ?? pollMsDefault))
      })

    const service: OwnershipShape = {
      whole: false,
      shardOf,
      owns,
      fence: (entity) => {
        const shard = shardOf(entity)
        const epoch = claimed.get(shard)
        return [epoch === undefined ? closedFence(shard) : fenceOf(shard, epoch)]
      },
      changes: Stream.fromPubSub(changes),
      singleton: (name, run) => sharding.registerSingleton(name, Effect.andThen(awaitOwned(name), run))
    }
    return service
  })
