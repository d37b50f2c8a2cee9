/**
 * Account events (src/core/billing/Account.ts; spec: Events — billing.low_balance, billing.arrears_posted): derived
 * from two readings of the balances, so whatever moved the money (a hold, a charge, a refund) reports them the same
 * way.
 */
import { assert, describe, it } from "@effect/vitest"
import { accountEventsOf, lowBalanceWarningMicro } from "../../../src/core/billing/Account.ts"

const reading = (available: bigint, arrears = 0n, held = 0n) => ({ available, arrears, held })
const usd = (amount: number) => BigInt(amount) * 1_000_000n

describe("account events", () => {
  const rows: ReadonlyArray<
    readonly [string, ReturnType<typeof reading>, ReturnType<typeof reading>, ReadonlyArray<string>]
  > = [
    ["a fall from above the level to below it", reading(usd(50)), reading(usd(9)), ["billing.low_balance"]],
    ["a fall from exactly the level", reading(lowBalanceWarningMicro), reading(lowBalanceWarningMicro - 1n), [
      "billing.low_balance"
    ]],
    ["down to exactly the level is not below it", reading(usd(50)), reading(lowBalanceWarningMicro), []],
    ["already below: no second event", reading(usd(9)), reading(usd(5)), []],
    ["a rise is no event", reading(usd(5)), reading(usd(50)), []],
    ["a balance that starts low and gets credits below the level", reading(0n), reading(usd(5)), []],
    ["a charge beyond the balance", reading(0n), reading(0n, usd(2)), ["billing.arrears_posted"]],
    ["a fall and arrears at once", reading(usd(11)), reading(0n, 1n), [
      "billing.low_balance",
      "billing.arrears_posted"
    ]],
    ["arrears paid down is no event", reading(0n, usd(2)), reading(0n, usd(1)), []]
  ]
  for (const [name, before, after, expected] of rows) {
    it(name, () => assert.deepStrictEqual(accountEventsOf(before, after).map((event) => event.type), expected))
  }

  it("messages carry the amounts and the fix", () => {
    const [low, arrears] = accountEventsOf(reading(usd(20)), reading(usd(3), 2_500_000n, usd(7)))
    assert.strictEqual(
      low!.message,
      "The available balance is 3 USD, below the warning level of 10 USD (7 USD held by running work). Add credits with a TopUp."
    )
    assert.match(arrears!.message, /^2\.5 USD of charges exceeded the balance; 2\.5 USD is owed/u)
  })
})
