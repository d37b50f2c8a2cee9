/**
 * Ownership over Effect Cluster (server/Cluster.ts) with runners in one process on one PostgreSQL database: the shards
 * are split between the runners, each held shard has its epoch claimed, a commit fenced with a superseded epoch fails,
 * a singleton runs in one runner at a time, and a runner that stops hands its shards (and its singletons) to the
 * others. Runs when DATABASE_URL is set.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, ManagedRuntime } from "effect"
import { claimEpochs, fenceTable, layerStarting, Ownership } from "../../src/runtime/Ownership.ts"
import * as Cluster from "../../src/server/Cluster.ts"
import * as SqlStore from "../../src/store/SqlStore.ts"
import { Store } from "../../src/store/Store.ts"
import { eventually } from "../support/Eventually.ts"
import { createDatabase, databaseUrl } from "../support/Postgres.ts"

const shardsPerGroup = 16
const entities = Array.from({ length: 200 }, (_, index) => `jobs/chaos/job-${index}`)

/** A runner with a singleton registered for its lifetime: `loop` runs while this runner holds it. */
const runner = (url: string, loop: Effect.Effect<void>) => {
  const store = Layer.fresh(SqlStore.layerPostgres(url))
  const ownership = layerStarting((changes) =>
    Cluster.layer({ databaseUrl: url, shardsPerGroup, shardLockExpirationMs: 6_000 }, changes)
  ).pipe(Layer.provideMerge(store))
  const singleton = Layer.effectDiscard(Effect.flatMap(Ownership, (one) => one.singleton("test/singleton", loop)))
  return ManagedRuntime.make(Layer.provideMerge(singleton, ownership))
}

describe.skipIf(databaseUrl === undefined)("ownership over Effect Cluster", () => {
  let url: string
  let dropDatabase: () => Promise<void>
  const runtimes: Array<
    {
      readonly runtime: ManagedRuntime.ManagedRuntime<Ownership | Store, unknown>
      readonly ownership: Ownership["Service"]
      readonly store: Store["Service"]
      readonly running: () => boolean
    }
  > = []
  beforeAll(async () => {
    const database = await createDatabase(databaseUrl!)
    url = database.url
    dropDatabase = database.drop
  })
  afterAll(async () => {
    for (const { runtime } of runtimes) await runtime.dispose()
    await dropDatabase?.()
  })

  const owners = (entity: string) => runtimes.filter(({ ownership }) => ownership.owns(entity))
  /** A runner, with a singleton registered that says whether it runs there now. */
  const start = async () => {
    let running = false
    const runtime = runner(
      url,
      Effect.ensuring(
        Effect.andThen(Effect.sync(() => (running = true)), Effect.never),
        Effect.sync(() => (running = false))
      )
    )
    runtimes.push({
      runtime,
      ownership: await runtime.runPromise(Ownership),
      store: await runtime.runPromise(Store),
      running: () => running
    })
  }

  it(
    "two runners split the shards, every object owned by exactly one of them, and a stopped runner's shards move",
    async () => {
      await Promise.all([start(), start()])
      const [first, second] = runtimes
      const split = () =>
        entities.every((entity) => owners(entity).length === 1) &&
        runtimes.every((one) => entities.some((entity) => owners(entity)[0] === one))
      await eventually("every object owned once, by both runners", split, { timeoutMs: 30_000 })
      const firstShare = entities.filter((entity) => owners(entity)[0] === first).length
      assert.isAbove(firstShare, 0, "the first runner owns some objects")
      assert.isBelow(firstShare, entities.length, "the second runner owns some objects")
      // A fence of the current epoch holds; the shard's next claim (another owner) makes it fail.
      const entity = entities.find((one) => owners(one)[0] === second)!
      const { store, ownership } = second!
      const fence = { ops: ownership.fence(entity), shard: ownership.shardOf(entity) }
      assert.strictEqual(fence.ops[0]!._tag, "RequireRecord")
      assert.isTrue(Exit.isSuccess(await Effect.runPromiseExit(store.commit(fence.ops))))
      const stolen = await Effect.runPromise(claimEpochs(store, [fence.shard], "thief", 0))
      assert.strictEqual(stolen.size, 1)
      assert.isTrue(
        Exit.isFailure(await Effect.runPromiseExit(store.commit(fence.ops))),
        "a superseded epoch's commit fails"
      )
      assert.isTrue(
        Exit.isFailure(
          await Effect.runPromiseExit(
            store.commit([{ _tag: "RequireRecord", table: fenceTable, id: `${fence.shard}@0`, present: true }])
          )
        )
      )
      // The singleton runs where its name's shard is held, and nowhere else.
      await eventually("the singleton runs once", () => runtimes.filter((one) => one.running()).length === 1, {
        timeoutMs: 30_000
      })
      const holder = runtimes.find((one) => one.ownership.owns("test/singleton"))!
      assert.isTrue(holder.running())
      await runtimes.shift()!.runtime.dispose()
      await eventually(
        "the second runner owns everything",
        () => entities.every((one) => owners(one).length === 1 && owners(one)[0] === second),
        { timeoutMs: 30_000 }
      )
      await eventually("the singleton runs on the second runner", () => second!.running(), { timeoutMs: 30_000 })
    },
    90_000
  )
})
