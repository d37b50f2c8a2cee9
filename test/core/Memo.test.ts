/** core/Memo.ts: a key's value is made once while it is kept; past the capacity the oldest key is made again. */
import { assert, describe, it } from "@effect/vitest"
import { lastValues } from "../../src/core/Memo.ts"

describe("lastValues", () => {
  it("makes each kept key's value once, undefined included, and drops the oldest key past its capacity", () => {
    const made: Array<string> = []
    const memo = lastValues<number | undefined>(2)
    const ask = (key: string) => memo(key, () => (made.push(key), key === "none" ? undefined : key.length))
    assert.deepStrictEqual([ask("a"), ask("none"), ask("a"), ask("none")], [1, undefined, 1, undefined])
    assert.deepStrictEqual(made, ["a", "none"])
    ask("ccc") // the third key: "a", the oldest, is dropped
    ask("none")
    ask("a")
    assert.deepStrictEqual(made, ["a", "none", "ccc", "a"])
  })
})
