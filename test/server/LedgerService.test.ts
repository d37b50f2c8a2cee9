/**
 * The server's ledger (src/server/LedgerService.ts): starter credits are granted once per store, whatever the number
 * of server starts; a restarted server rebuilds the same ledger from the stored postings; every operation's postings
 * are in the store when it answers, and the store's own sums (balances()) agree with the ledger.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { availableAccount, externalAccount } from "../../src/core/Ledger.ts"
import { LedgerService, starterCreditsMicro } from "../../src/server/LedgerService.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { Store } from "../../src/store/Store.ts"

const serverOver = (store: Store["Service"], starterMicro: bigint) =>
  LedgerService.layer({ starterMicro }).pipe(Layer.provide(Layer.succeed(Store, store)))

describe("LedgerService", () => {
  it.effect("grants the starter credits once, and a restart rebuilds the same ledger from the store", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.make
      const first = yield* Effect.provide(Effect.gen(function*() {
        const ledger = yield* LedgerService
        yield* ledger.update((current) => current.hold("hold/a", 0, { hold: "a", owner: "job", amount: 1_000_000n, expiresAt: 10 }))
        return yield* ledger.read((current) => ({ available: current.available, held: current.held, credits: current.credits }))
      }), serverOver(store, starterCreditsMicro))
      assert.deepStrictEqual(first, { available: starterCreditsMicro - 1_000_000n, held: 1_000_000n, credits: starterCreditsMicro })
      // The second start finds the grant's key in the stored postings: no second grant.
      const second = yield* Effect.provide(Effect.flatMap(LedgerService, (ledger) => ledger.read((current) => ({ available: current.available, held: current.held, credits: current.credits }))), serverOver(store, starterCreditsMicro))
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
      const available = yield* Effect.provide(Effect.flatMap(LedgerService, (ledger) => ledger.read((current) => current.available)), serverOver(store, 0n))
      assert.strictEqual(available, 0n)
      assert.deepStrictEqual(yield* store.postings(0, 10), [])
    }))
})
