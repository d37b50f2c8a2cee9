/**
 * The server's ledger (src/runtime/LedgerService.ts): starter credits are granted once per store, whatever the number
 * of server starts; a restarted server rebuilds the same ledger from the stored postings; every operation's postings
 * are in the store when it answers, and the store's own sums (balances()) agree with the ledger.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, Result } from "effect"
import { Ids } from "../../src/apiserver/Ids.ts"
import { availableAccount, externalAccount, type Ledger } from "../../src/core/billing/Ledger.ts"
import { EventOutbox } from "../../src/runtime/EventOutbox.ts"
import { LedgerService, starterCreditsMicro } from "../../src/runtime/LedgerService.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { CommitFailed, Store, StoreError } from "../../src/store/Store.ts"

const serverOver = (store: Store["Service"], starterMicro: bigint) =>
  LedgerService.layer({ starterMicro }).pipe(
    Layer.provideMerge(EventOutbox.layer),
    Layer.provide(Layer.merge(Layer.succeed(Store, store), Ids.layer))
  )

/** The types and first sentences of the outbox's records, in order. */
const recorded = (store: Store["Service"]) =>
  Effect.map(store.records("eventoutbox", "", 100, 0), (entries) =>
    entries.map((entry) => {
      const event = entry.value as { type: string; data: { object: { kind: string }; event: { message: string } } }
      return `${event.type} ${event.data.object.kind} ${event.data.event.message.split(";")[0]}`
    }))

/** A memory store whose commits with postings fail with `message` while `refuse()` holds (until `refuse(false)`). */
const refusingPosts = (message: string) =>
  Effect.map(MemoryStore.make, (inner) => {
    let refusing = false
    const store: Store["Service"] = {
      ...inner,
      commit: (ops) => (refusing && ops.some((op) => op._tag === "Post")
        ? Effect.fail(new StoreError({ message }))
        : inner.commit(ops))
    }
    return { inner, store, refuse: (on = true) => void (refusing = on) }
  })

describe("LedgerService", () => {
  it.effect("a commit the store refuses (another process posted first) is taken back without reading every posting again", () =>
    Effect.gen(function*() {
      const inner = yield* MemoryStore.make
      let refuseNext = false
      let reads = 0
      const store: Store["Service"] = {
        ...inner,
        postings: (after, limit) => Effect.andThen(Effect.sync(() => void reads++), inner.postings(after, limit)),
        commit: (ops) => {
          if (!refuseNext || !ops.some((op) => op._tag === "Post")) return inner.commit(ops)
          refuseNext = false
          return Effect.fail(new CommitFailed({ index: 0, reason: "Conflict" }))
        }
      }
      const outcome = yield* Effect.provide(
        Effect.gen(function*() {
          const ledger = yield* LedgerService
          const readsAtStart = reads
          refuseNext = true
          const refused = yield* Effect.result(
            ledger.update((current) => current.grant("grant/a", 0, 5_000_000n, "test"))
          )
          const afterRefusal = yield* ledger.read((current) => ({
            available: current.available,
            has: current.has("grant/a"),
            seq: current.lastSeq
          }))
          // The same operation made again is posted: its key was taken back with its postings.
          yield* ledger.update((current) => current.grant("grant/a", 0, 5_000_000n, "test"))
          return { refused: Result.isFailure(refused), afterRefusal, replays: reads - readsAtStart }
        }),
        serverOver(store, 10_000_000n)
      )
      assert.deepStrictEqual(outcome, {
        refused: true,
        afterRefusal: { available: 10_000_000n, has: false, seq: 1 },
        replays: 0
      })
      assert.deepStrictEqual((yield* inner.postings(0, 10)).map((posting) => posting.key), [
        "grant/starter#0",
        "grant/a#0"
      ])
    }))

  it.effect("grants the starter credits once, and a restart rebuilds the same ledger from the store", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const first = yield* Effect.provide(
        Effect.gen(function*() {
          const ledger = yield* LedgerService
          yield* ledger.update((current) =>
            current.hold("hold/a", 0, { hold: "a", owner: "job", amount: 1_000_000n, expiresAt: 10 })
          )
          return yield* ledger.read((current) => ({
            available: current.available,
            held: current.held,
            credits: current.credits
          }))
        }),
        serverOver(store, starterCreditsMicro)
      )
      assert.deepStrictEqual(first, {
        available: starterCreditsMicro - 1_000_000n,
        held: 1_000_000n,
        credits: starterCreditsMicro
      })
      // The second start finds the grant's key in the stored postings: no second grant.
      const second = yield* Effect.provide(
        Effect.flatMap(
          LedgerService,
          (ledger) =>
            ledger.read((current) => ({ available: current.available, held: current.held, credits: current.credits }))
        ),
        serverOver(store, starterCreditsMicro)
      )
      assert.deepStrictEqual(second, first)
      const postings = yield* store.postings(0, 100)
      assert.deepStrictEqual(postings.map((posting) => posting.kind), ["Grant", "Hold"])
      const balances = yield* store.balances()
      assert.strictEqual(balances.get(availableAccount), starterCreditsMicro - 1_000_000n)
      assert.strictEqual(balances.get(externalAccount), -starterCreditsMicro)
    }))

  it.effect("a production database starts at zero", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const available = yield* Effect.provide(
        Effect.flatMap(LedgerService, (ledger) => ledger.read((current) => current.available)),
        serverOver(store, 0n)
      )
      assert.strictEqual(available, 0n)
      assert.deepStrictEqual(yield* store.postings(0, 10), [])
    }))

  it.effect("records billing.low_balance when the balance falls below 10 USD and billing.arrears_posted for a charge past it", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      yield* Effect.provide(
        Effect.gen(function*() {
          const ledger = yield* LedgerService
          // 15 USD held: 5 USD left, below the warning level.
          yield* ledger.update((current) =>
            current.hold("hold/a", 0, { hold: "a", owner: "job", amount: 15_000_000n, expiresAt: 10 })
          )
          // A charge of 22 USD: the hold's 15, the 5 left, and 2 USD no money covers.
          yield* ledger.update((current) =>
            current.capture("capture/a", 1, { hold: "a", owner: "job", segment: "Running", amount: 22_000_000n })
          )
        }),
        serverOver(store, 20_000_000n)
      )
      assert.deepStrictEqual(yield* recorded(store), [
        "billing.low_balance Account The available balance is 5 USD, below the warning level of 10 USD (15 USD held by running work). Add credits with a TopUp.",
        "billing.arrears_posted Account 2 USD of charges exceeded the balance"
      ])
    }))

  it.effect("an account event and the postings that caused it are one commit: a failed commit stores neither", () =>
    Effect.gen(function*() {
      // The store dies in the middle of the write that posts the hold (and would record billing.low_balance).
      const { inner, store, refuse } = yield* refusingPosts("killed mid-write")
      yield* Effect.provide(
        Effect.gen(function*() {
          const ledger = yield* LedgerService
          refuse()
          const failed = yield* Effect.result(
            ledger.update((current) =>
              current.hold("hold/a", 0, { hold: "a", owner: "job", amount: 15_000_000n, expiresAt: 10 })
            )
          )
          assert.isTrue(Result.isFailure(failed))
          // No change without its event, no event without its change.
          assert.deepStrictEqual(
            (yield* inner.postings(0, 10)).map((posting) => posting.kind),
            ["Grant"]
          )
          assert.deepStrictEqual(yield* recorded(inner), [])
          refuse(false)
          yield* ledger.update((current) =>
            current.hold("hold/a", 0, { hold: "a", owner: "job", amount: 15_000_000n, expiresAt: 10 })
          )
        }),
        serverOver(store, 20_000_000n)
      )
      assert.deepStrictEqual((yield* inner.postings(0, 10)).map((posting) => posting.kind), ["Grant", "Hold"])
      assert.lengthOf(yield* recorded(inner), 1)
    }))

  it.effect("a store outage fails operations with Unavailable, and the ledger is rebuilt from the store once it answers", () =>
    Effect.gen(function*() {
      const inner = yield* MemoryStore.make
      let down = false
      const outage = Effect.fail(new StoreError({ message: "the database is unreachable" }))
      const store: Store["Service"] = {
        ...inner,
        commit: (ops) => (down ? outage : inner.commit(ops)),
        postings: (after, limit) => (down ? outage : inner.postings(after, limit))
      }
      yield* Effect.provide(
        Effect.gen(function*() {
          const ledger = yield* LedgerService
          down = true
          const failed = yield* Effect.result(ledger.update((current) => current.grant("grant/a", 0, 5_000_000n, "a")))
          assert.isTrue(Result.isFailure(failed) && failed.failure.code === "Unavailable")
          // Still down: the next operation cannot know what the store holds, and says so instead of guessing.
          const again = yield* Effect.result(ledger.update((current) => current.grant("grant/b", 0, 1n, "b")))
          assert.isTrue(Result.isFailure(again) && again.failure.message.includes("unreachable"))
          down = false
          // Back: the lost grant is not in the rebuilt ledger, so retrying its key posts it (once).
          yield* ledger.update((current) => current.grant("grant/a", 0, 5_000_000n, "a"))
          yield* ledger.update((current) => current.grant("grant/a", 0, 5_000_000n, "a"))
          assert.strictEqual(yield* ledger.read((current) => current.available), starterCreditsMicro + 5_000_000n)
        }),
        serverOver(store, starterCreditsMicro)
      )
      assert.deepStrictEqual((yield* inner.postings(0, 10)).map((posting) => posting.key), [
        "grant/starter#0",
        "grant/a#0"
      ])
    }))

  it.effect("each failed commit rebuilds a new ledger: operations lost twice are posted when tried again, and only then", () =>
    Effect.gen(function*() {
      const inner = yield* MemoryStore.make
      let refuse = 0
      const store: Store["Service"] = {
        ...inner,
        commit: (
          ops
        ) => (refuse > 0 && ops.some((op) => op._tag === "Post")
          ? (refuse--, Effect.fail(new StoreError({ message: "refused" })))
          : inner.commit(ops))
      }
      yield* Effect.provide(
        Effect.gen(function*() {
          const ledger = yield* LedgerService
          refuse = 2
          for (const key of ["grant/a", "grant/b"]) {
            assert.isTrue(
              Result.isFailure(yield* Effect.result(ledger.update((current) => current.grant(key, 0, 1_000_000n, key))))
            )
          }
          // Neither lost grant stays in memory (the second rebuild must not reuse the first one's ledger): both post
          // now.
          assert.strictEqual(yield* ledger.read((current) => current.available), starterCreditsMicro)
          for (const key of ["grant/a", "grant/b"]) {
            yield* ledger.update((current) => current.grant(key, 0, 1_000_000n, key))
          }
        }),
        serverOver(store, starterCreditsMicro)
      )
      assert.deepStrictEqual((yield* inner.postings(0, 10)).map((posting) => posting.key), [
        "grant/starter#0",
        "grant/a#0",
        "grant/b#0"
      ])
    }))

  it.effect("on a shared store, reads waiting together share one read of the store, and each sees what was posted before it asked", () =>
    Effect.scoped(Effect.gen(function*() {
      const inner = yield* MemoryStore.make
      // Process A's reads of other processes' postings are counted, and held while `gate` is set.
      let reads = 0
      let gate: Deferred.Deferred<void> | undefined
      const storeA: Store["Service"] = {
        ...inner,
        postings: (after, limit) =>
          Effect.gen(function*() {
            reads++
            if (gate !== undefined) yield* Deferred.await(gate)
            return yield* inner.postings(after, limit)
          })
      }
      const sharedOver = (store: Store["Service"]) =>
        Effect.map(
          Layer.build(
            LedgerService.layer({ starterMicro: 0n, shared: true }).pipe(
              Layer.provideMerge(EventOutbox.layer),
              Layer.provide(Layer.merge(Layer.succeed(Store, store), Ids.layer))
            )
          ),
          (context) => Context.get(context, LedgerService)
        )
      const a = yield* sharedOver(storeA)
      const b = yield* sharedOver(inner)
      yield* b.update((current) => current.grant("grant/b", 0, 5_000_000n, "test"))
      // A sees at its next read what B posted before it.
      assert.strictEqual(yield* a.read((current) => current.available), 5_000_000n)
      gate = yield* Deferred.make<void>()
      const readsBefore = reads
      const first = yield* Effect.forkChild(a.read((current) => current.available))
      for (let turn = 0; turn < 10; turn++) yield* Effect.yieldNow
      // Posted while A's first catch-up is under way: the reads asked after it need the next one, and share it.
      yield* b.update((current) => current.grant("grant/c", 0, 1_000_000n, "test"))
      const rest = yield* Effect.forkChild(
        Effect.all(Array.from({ length: 9 }, () => a.read((current) => current.available)), {
          concurrency: "unbounded"
        })
      )
      for (let turn = 0; turn < 10; turn++) yield* Effect.yieldNow
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(first)
      assert.deepStrictEqual(yield* Fiber.join(rest), Array.from({ length: 9 }, () => 6_000_000n))
      assert.strictEqual(reads - readsBefore, 2)
    })))

  it.effect("an operation whose caller is interrupted during the commit still stores its postings", () =>
    Effect.gen(function*() {
      const inner = yield* MemoryStore.make
      const committing = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      let slow = false
      const store: Store["Service"] = {
        ...inner,
        commit: (
          ops
        ) => (slow
          ? Effect.andThen(
            Effect.andThen(Deferred.succeed(committing, undefined), Deferred.await(release)),
            inner.commit(ops)
          )
          : inner.commit(ops))
      }
      yield* Effect.provide(
        Effect.gen(function*() {
          const ledger = yield* LedgerService
          slow = true
          const fiber = yield* Effect.forkChild(
            ledger.update((current) => current.grant("grant/paid", 0, 7_000_000n, "topup"))
          )
          yield* Deferred.await(committing)
          const interrupting = yield* Effect.forkChild(Fiber.interrupt(fiber))
          // Let the interruption reach the operation while its commit waits, then let the commit go on.
          for (let turn = 0; turn < 10; turn++) yield* Effect.yieldNow
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.join(interrupting)
        }),
        serverOver(store, 0n)
      )
      assert.deepStrictEqual((yield* inner.postings(0, 10)).map((posting) => posting.key), ["grant/paid#0"])
    }))

  it.effect("updateAfter records first and posts after; a record that fails posts nothing and leaves the ledger as stored", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const result = yield* Effect.provide(
        Effect.gen(function*() {
          const ledger = yield* LedgerService
          const capture = (key: string) => (current: Ledger) =>
            current.capture(key, 1, { hold: undefined, owner: "job", segment: "Running", amount: 2_000_000n })
          // The record sees the operation applied, and the store without its postings yet.
          const seen: Array<number> = []
          const first = yield* ledger.updateAfter(
            capture("capture/first"),
            [],
            () => Effect.map(store.postings(0, 10), (stored) => void seen.push(stored.length))
          )
          assert.isTrue(first.posted)
          const afterFirst = (yield* store.postings(0, 10)).map((posting) => posting.key)
          // A record that fails: nothing is posted, and the ledger in memory is the stored one again.
          const failed = yield* Effect.result(
            ledger.updateAfter(capture("capture/second"), [], () => Effect.fail("the record was refused"))
          )
          const available = yield* ledger.read((current) => current.available)
          return { seen, afterFirst, failed: Result.isFailure(failed) ? failed.failure : "succeeded", available }
        }),
        serverOver(store, 10_000_000n)
      )
      assert.deepStrictEqual(result, {
        seen: [1],
        afterFirst: ["grant/starter#0", "capture/first#0"],
        failed: "the record was refused",
        available: 8_000_000n
      })
      assert.deepStrictEqual((yield* store.postings(0, 10)).map((posting) => posting.key), [
        "grant/starter#0",
        "capture/first#0"
      ])
    }))

  it.effect("updateAfter: postings the store refuses after the record are not posted, the record stands, the ledger is the stored one", () =>
    Effect.gen(function*() {
      const { inner, store, refuse } = yield* refusingPosts("another process posted first")
      const outcome = yield* Effect.provide(
        Effect.gen(function*() {
          const ledger = yield* LedgerService
          refuse()
          let records = 0
          const done = yield* ledger.updateAfter(
            (current) =>
              current.capture("capture/a", 1, {
                hold: undefined,
                owner: "job",
                segment: "Running",
                amount: 3_000_000n
              }),
            [],
            () => Effect.sync(() => void records++)
          )
          return { posted: done.posted, records, available: yield* ledger.read((current) => current.available) }
        }),
        serverOver(store, 10_000_000n)
      )
      assert.deepStrictEqual(outcome, { posted: false, records: 1, available: 10_000_000n })
      assert.deepStrictEqual((yield* inner.postings(0, 10)).map((posting) => posting.key), ["grant/starter#0"])
    }))
})
