/**
 * The store contract on a real PostgreSQL server, plus what only a shared server can show: a second process sees
 * the first one's commits through LISTEN/NOTIFY. Runs when DATABASE_URL is set (.ci/run sets it).
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer } from "effect"
import * as SqlStore from "../../src/store/SqlStore.ts"
import { Store } from "../../src/store/Store.ts"
import { databaseUrl, freshDatabase } from "../support/Postgres.ts"
import { makeObject, suite } from "./StoreContract.ts"

const onFreshDatabase = (url: string) => Layer.unwrap(Effect.map(freshDatabase(url), SqlStore.layerPostgres))

describe.skipIf(databaseUrl === undefined)("SqlStore on PostgreSQL", () => {
  suite("contract", onFreshDatabase(databaseUrl ?? ""))

  it.live("a second store on the same database hears the first one's commits", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase(databaseUrl ?? "")
      const first = yield* Layer.build(Layer.fresh(SqlStore.layerPostgres(url)))
      const second = yield* Layer.build(Layer.fresh(SqlStore.layerPostgres(url)))
      const writer = Context.get(first, Store)
      const reader = Context.get(second, Store)
      let heard = 0
      yield* reader.onCommit(() => void (heard += 1))
      // LISTEN is confirmed asynchronously after start-up; commit until the other process has heard one.
      let attempt = 0
      const commitOne = Effect.suspend(() => {
        const key = { resource: "jobs", namespace: "p", name: `x-${++attempt}` }
        return writer.commit([{ _tag: "Create", key, object: makeObject(key) }])
      })
      const fiber = yield* Effect.forkChild(Effect.repeat(Effect.andThen(commitOne, Effect.sleep("50 millis")), { until: () => heard > 0 }))
      yield* Fiber.join(fiber).pipe(Effect.timeout("10 seconds"))
      const page = yield* reader.changes(0, 100)
      assert.isTrue(page.changes.length > 0)
      assert.isTrue(heard > 0)
    }).pipe(Effect.scoped))
})
