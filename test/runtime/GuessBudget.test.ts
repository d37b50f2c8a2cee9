// The bound on guesses of secret values (src/runtime/GuessBudget.ts): distinct values per principal per window, all
// or none per charge, repeats free, a new window after the old one ends, and the seconds until then when refused.
import { assert, describe, it } from "@effect/vitest"
import { makeGuessBudget } from "../../src/runtime/GuessBudget.ts"

const hour = 3_600_000

describe("GuessBudget", () => {
  it("charges distinct values, all or none, and frees repeats", () => {
    const budget = makeGuessBudget(3, hour)
    assert.isUndefined(budget.charge("a", ["x", "y", "x"], 0))
    assert.isUndefined(budget.charge("a", ["x", "y"], 1_000), "repeats cost nothing")
    assert.strictEqual(budget.charge("a", ["z", "w"], 1_000), 3_599, "two new values do not fit: nothing is charged")
    assert.isUndefined(budget.charge("a", ["z"], 2_000), "the one that fits still does")
    assert.strictEqual(budget.charge("a", ["v"], hour - 500), 1, "at least a second")
  })

  it("keeps a window per principal and opens a new one when it ends", () => {
    const budget = makeGuessBudget(1, hour)
    assert.isUndefined(budget.charge("a", ["x"], 0))
    assert.isUndefined(budget.charge("b", ["y"], 0))
    assert.isDefined(budget.charge("a", ["y"], 10))
    assert.isUndefined(budget.charge("a", ["y"], hour))
  })
})
