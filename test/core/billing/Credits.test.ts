/**
 * Which grant the unspent credits belong to (src/core/billing/Credits.ts; docs/billing.md, "Credits"). The table runs
 * operations on a real Ledger and feeds its postings to CreditLots: spending takes the grant that expires first, then
 * the oldest; a refund takes its own grant first; holds and releases spend nothing; credits paying arrears are spent.
 * The property checks, after random operations, that the lots sum to available + held and each stays within its grant.
 */
import * as fc from "fast-check"
import { assert, describe, it } from "vitest"
import { CreditLots, phaseOf } from "../../../src/core/billing/Credits.ts"
import { Ledger } from "../../../src/core/billing/Ledger.ts"

const usd = (amount: number): bigint => BigInt(amount) * 1_000_000n

type Step =
  | { readonly grant: string; readonly usd: number; readonly expiresAt?: number }
  | { readonly spend: number }
  | { readonly hold: number }
  | { readonly capture: number }
  | { readonly release: true }
  | { readonly refund: string; readonly usd: number }

/** One step on a ledger with one hold, "h"; grants note their expiry. */
const take = (ledger: Ledger, expiries: Map<string, number>, step: Step, index: number) => {
  const key = `step/${index}`
  if ("grant" in step) {
    if (step.expiresAt !== undefined) expiries.set(step.grant, step.expiresAt)
    ledger.grant(key, index, usd(step.usd), step.grant)
  } else if ("spend" in step) {
    ledger.capture(key, index, { hold: undefined, owner: "job", segment: "Running", amount: usd(step.spend) })
  } else if ("hold" in step) {
    ledger.hold(key, index, { hold: "h", owner: "job", amount: usd(step.hold), expiresAt: 1_000 })
  } else if ("capture" in step) {
    ledger.capture(key, index, { hold: "h", owner: "job", segment: "Running", amount: usd(step.capture) })
  } else if ("release" in step) ledger.release(key, index, "h")
  else ledger.refund(key, index, usd(step.usd), step.refund)
}

/** The ledger's postings attributed to grants; the lots always sum to available + held. */
const attribute = (ledger: Ledger, expiries: ReadonlyMap<string, number>): CreditLots => {
  const lots = new CreditLots()
  for (const posting of ledger.postings) {
    lots.apply(posting, posting.kind === "Grant" ? expiries.get(posting.source!) : undefined)
  }
  assert.strictEqual(lots.remaining, ledger.available + ledger.held, "the lots sum to available + held")
  return lots
}

/** Runs the steps, then answers the remaining USD per grant. */
const run = (steps: ReadonlyArray<Step>) => {
  const ledger = new Ledger()
  const expiries = new Map<string, number>()
  steps.forEach((step, index) => take(ledger, expiries, step, index))
  const lots = attribute(ledger, expiries)
  return Object.fromEntries([...lots.lots.values()].map((lot) => [lot.source, Number(lot.remaining / 1_000_000n)]))
}

const cases: ReadonlyArray<
  { readonly name: string; readonly steps: ReadonlyArray<Step>; readonly remaining: Record<string, number> }
> = [
  { name: "nothing spent", steps: [{ grant: "starter", usd: 100 }], remaining: { starter: 100 } },
  {
    name: "the oldest grant is spent first",
    steps: [{ grant: "starter", usd: 100 }, { grant: "topup-a", usd: 50 }, { spend: 120 }],
    remaining: { starter: 0, "topup-a": 30 }
  },
  {
    name: "a grant that expires goes before one that never does",
    steps: [{ grant: "starter", usd: 100 }, { grant: "promo", usd: 50, expiresAt: 5_000 }, { spend: 60 }],
    remaining: { starter: 90, promo: 0 }
  },
  {
    name: "the grant expiring first goes first, whatever their age",
    steps: [{ grant: "a", usd: 10, expiresAt: 9_000 }, { grant: "b", usd: 10, expiresAt: 3_000 }, {
      grant: "c",
      usd: 10
    }, { spend: 15 }],
    remaining: { a: 5, b: 0, c: 10 }
  },
  {
    name: "a hold spends nothing; its capture does",
    steps: [{ grant: "starter", usd: 100 }, { grant: "topup-a", usd: 50 }, { hold: 110 }],
    remaining: { starter: 100, "topup-a": 50 }
  },
  {
    name: "a capture from a hold spends the oldest",
    steps: [{ grant: "starter", usd: 100 }, { grant: "topup-a", usd: 50 }, { hold: 110 }, { capture: 105 }, {
      release: true
    }],
    remaining: { starter: 0, "topup-a": 45 }
  },
  {
    name: "a refund takes its own grant first",
    steps: [{ grant: "starter", usd: 100 }, { grant: "topup-a", usd: 50 }, { spend: 30 }, {
      refund: "topup-a",
      usd: 50
    }],
    remaining: { starter: 70, "topup-a": 0 }
  },
  {
    name: "a refund of credits partly spent takes what is left of all grants; the rest is owed",
    steps: [{ grant: "starter", usd: 10 }, { grant: "topup-a", usd: 50 }, { spend: 30 }, {
      refund: "topup-a",
      usd: 50
    }],
    remaining: { starter: 0, "topup-a": 0 }
  },
  {
    name: "credits that arrive pay arrears first",
    steps: [{ grant: "starter", usd: 10 }, { spend: 30 }, { grant: "topup-a", usd: 50 }],
    remaining: { starter: 0, "topup-a": 30 }
  },
  {
    name: "a spend past every grant leaves all at zero",
    steps: [{ grant: "starter", usd: 10 }, { grant: "topup-a", usd: 5 }, { spend: 40 }],
    remaining: { starter: 0, "topup-a": 0 }
  }
]

describe("CreditLots", () => {
  for (const testCase of cases) {
    it(testCase.name, () => {
      assert.deepStrictEqual(run(testCase.steps), testCase.remaining)
    })
  }

  it("phases: Active while credits remain, Exhausted at zero", () => {
    const lots = new CreditLots()
    const ledger = new Ledger()
    ledger.grant("g", 0, usd(1), "one")
    ledger.capture("c", 1, { hold: undefined, owner: "job", segment: "Running", amount: usd(1) })
    lots.apply(ledger.postings[0]!)
    assert.strictEqual(phaseOf(lots.lots.get("one")!), "Active")
    lots.apply(ledger.postings[1]!)
    assert.strictEqual(phaseOf(lots.lots.get("one")!), "Exhausted")
    assert.deepStrictEqual([lots.lastSeq, lots.lastKey], [2, ledger.postings[1]!.key])
  })

  it("after any operations, the lots sum to available + held and each stays within its grant", () => {
    const step: fc.Arbitrary<Step> = fc.oneof(
      fc.record({
        grant: fc.constantFrom("a", "b", "c", "d"),
        usd: fc.integer({ min: 1, max: 100 }),
        expiresAt: fc.option(fc.integer({ min: 0, max: 10 }), { nil: undefined })
      })
        .map((
          step
        ): Step => (step.expiresAt === undefined
          ? { grant: step.grant, usd: step.usd }
          : { grant: step.grant, usd: step.usd, expiresAt: step.expiresAt })
        ),
      fc.record({ spend: fc.integer({ min: 1, max: 80 }) }),
      fc.record({ hold: fc.integer({ min: 1, max: 80 }) }),
      fc.record({ capture: fc.integer({ min: 1, max: 80 }) }),
      fc.constant({ release: true as const }),
      fc.record({ refund: fc.constantFrom("a", "b", "c", "d"), usd: fc.integer({ min: 1, max: 100 }) })
    )
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const ledger = new Ledger()
        const expiries = new Map<string, number>()
        steps.forEach((candidate, index) => {
          // A hold on the closed hold "h" is refused by the ledger (it throws and posts nothing): skipped.
          if (
            "hold" in candidate && ledger.holds.get("h")?.state !== undefined && ledger.holds.get("h")?.state !== "Open"
          ) return
          take(ledger, expiries, candidate, index)
        })
        const lots = attribute(ledger, expiries)
        for (const lot of lots.lots.values()) {
          assert.isTrue(
            lot.remaining >= 0n && lot.remaining <= lot.granted,
            `${lot.source}: ${lot.remaining} of ${lot.granted}`
          )
        }
      }),
      { numRuns: 200 }
    )
  })
})
