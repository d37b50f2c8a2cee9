/**
 * The store contract on a real PostgreSQL server, plus what only a shared server can show: a second process sees
 * the first one's commits through LISTEN/NOTIFY. Runs when DATABASE_URL is set (.ci/run sets it).
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as SqlStore from "../../src/store/SqlStore.ts"
import { Store } from "../../src/store/Store.ts"
import { databaseUrl, freshDatabase } from "../support/Postgres.ts"
import { makeObject, suite } from "./StoreContract.ts"

const onFreshDatabase = (url: string) => Layer.unwrap(Effect.map(freshDatabase(url), SqlStore.layerPostgres))

/** A store of its own on the database of `url`, as another server process would open it (closed with the scope). */
const storeOn = (url: string) =>
  Effect.map(Layer.build(Layer.fresh(SqlStore.layerPostgres(url))), (context) => Context.get(context, Store))

describe.skipIf(databaseUrl === undefined)("SqlStore on PostgreSQL", () => {
  suite("contract", onFreshDatabase(databaseUrl ?? ""))

  it.live("a second store on the same database hears the first one's commits; the first does not hear its own twice", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase(databaseUrl ?? "")
      const writer = yield* storeOn(url)
      const reader = yield* storeOn(url)
      let heard = 0
      yield* reader.onCommit(() => void (heard += 1))
      // The writer hears its own commits with their changes; its own NOTIFY, which comes back to it too, is skipped.
      let writerBare = 0
      yield* writer.onCommit((committed) => void (committed === undefined && (writerBare += 1)))
      // LISTEN is confirmed asynchronously after start-up; commit until the other process has heard one.
      let attempt = 0
      const commitOne = Effect.suspend(() => {
        const key = { resource: "jobs", namespace: "p", name: `x-${++attempt}` }
        return writer.commit([{ _tag: "Create", key, object: makeObject(key) }])
      })
      const fiber = yield* Effect.forkChild(
        Effect.repeat(Effect.andThen(commitOne, Effect.sleep("50 millis")), { until: () => heard >= 3 })
      )
      yield* Fiber.join(fiber).pipe(Effect.timeout("10 seconds"))
      // Both listen by now: one more commit, and time for its NOTIFY to reach both processes.
      yield* commitOne
      yield* Effect.sleep("300 millis")
      const page = yield* reader.changes(0, 100)
      assert.isTrue(page.changes.length > 0)
      assert.isTrue(heard >= 4)
      assert.strictEqual(writerBare, 0)
    }).pipe(Effect.scoped))
})

describe.skipIf(databaseUrl === undefined)("SqlStore on PostgreSQL, the plan of a batch's read", () => {
  it.live("a batch's keys are index probes, not a read of the whole objects table, while the table is small", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase(databaseUrl ?? "")
      const store = yield* storeOn(url)
      // 3,000 objects: few enough that a plain join with a batch's keys (planned as 100 of them) reads the whole table.
      const keys = Array.from(
        { length: 3_000 },
        (_, index) => ({ resource: "jobs", namespace: "p", name: `o-${index}` })
      )
      yield* store.commit(keys.map((key) => ({ _tag: "Create" as const, key, object: makeObject(key) })))
      const plan = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe("ANALYZE nodus_objects")
        const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${SqlStore.readStateStatement}`, [
          JSON.stringify(keys.slice(0, 2)),
          "[]",
          0,
          "[]"
        ])
        return rows.map((row) => row["QUERY PLAN"]).join("\n")
      }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })))
      assert.include(plan, "Index Scan using nodus_objects_pkey")
      assert.notInclude(plan, "Seq Scan on nodus_objects")
    }).pipe(Effect.scoped))
})

describe.skipIf(databaseUrl === undefined)("SqlStore on PostgreSQL, two processes writing at once", () => {
  it.live("compare-and-swap holds across processes and pipelined batches: one winner per version", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase(databaseUrl ?? "")
      const first = yield* storeOn(url)
      const second = yield* storeOn(url)
      const key = { resource: "jobs", namespace: "p", name: "contended" }
      const [created] = (yield* first.commit([{ _tag: "Create", key, object: makeObject(key) }])).objects
      let current = created!
      // Rounds of 16 concurrent updates, all from the same version, split over both processes: exactly one wins each
      // round, whichever batch and whichever process it landed in.
      for (let round = 0; round < 10; round++) {
        const base = current
        const attempts = yield* Effect.forEach(
          Array.from({ length: 16 }, (_, i) => i),
          (i) =>
            Effect.exit(
              (i % 2 === 0 ? first : second).commit([{
                _tag: "Update",
                key,
                object: { ...base, spec: { round: String(round), writer: String(i) } },
                previous: base,
                expectedRv: base.metadata.resourceVersion
              }])
            ),
          { concurrency: "unbounded" }
        )
        const winners = attempts.filter(Exit.isSuccess)
        assert.strictEqual(winners.length, 1, `round ${round}`)
        current = winners[0]!.value.objects[0]!
      }
      // Unrelated creates from both processes interleave without losing any, and versions stay unique.
      const created2 = yield* Effect.forEach(Array.from({ length: 40 }, (_, i) => i), (i) => {
        const other = { resource: "jobs", namespace: "p", name: `n-${i}` }
        return (i % 2 === 0 ? first : second).commit([{ _tag: "Create", key: other, object: makeObject(other) }])
      }, { concurrency: "unbounded" })
      assert.strictEqual(new Set(created2.map((c) => c.objects[0]!.metadata.resourceVersion)).size, 40)
      const page = yield* first.list({ resource: "jobs", namespace: "p" })
      assert.strictEqual(page.items.length, 41)
      const log = yield* second.changes(0, 1_000)
      const versions = log.changes.map((change) => change.resourceVersion)
      assert.deepStrictEqual(versions, [...versions].sort((a, b) => a - b), JSON.stringify(versions))
      assert.strictEqual(new Set(versions).size, versions.length)
    }).pipe(Effect.scoped))
})
