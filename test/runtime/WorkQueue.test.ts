/** The reconciler's keyed work queue: each key once, in the order it became due; the earliest timer wins; backoff. */
import { assert, describe, it } from "@effect/vitest"
import { backoffMsMax, backoffMsMin, WorkQueue } from "../../src/runtime/WorkQueue.ts"

const drain = (queue: WorkQueue, now: number): Array<string> => {
  const keys: Array<string> = []
  for (let key = queue.next(now); key !== undefined; key = queue.next(now)) keys.push(key)
  return keys
}

describe("WorkQueue", () => {
  it("gives each key once, in the order keys became due", () => {
    const queue = new WorkQueue()
    queue.add("b")
    queue.add("a")
    queue.add("b")
    assert.deepStrictEqual(drain(queue, 0), ["b", "a"])
    assert.deepStrictEqual(drain(queue, 0), [])
  })

  it("releases timers when their time comes, in time order, after the keys already due", () => {
    const queue = new WorkQueue()
    queue.at("late", 300)
    queue.at("early", 100)
    queue.add("now")
    assert.deepStrictEqual(drain(queue, 50), ["now"])
    assert.strictEqual(queue.nextAt(), 100)
    assert.deepStrictEqual(drain(queue, 300), ["early", "late"])
    assert.strictEqual(queue.nextAt(), undefined)
  })

  it("keeps the earliest time a key is due at; a later one does not delay it, an earlier one brings it forward", () => {
    const queue = new WorkQueue()
    queue.at("k", 200)
    queue.at("k", 500)
    assert.strictEqual(queue.nextAt(), 200)
    queue.at("k", 100)
    assert.strictEqual(queue.nextAt(), 100)
    assert.deepStrictEqual(drain(queue, 150), ["k"])
    // The stale timers of the key are dropped, not released again.
    assert.deepStrictEqual(drain(queue, 1_000), [])
    assert.strictEqual(queue.nextAt(), undefined)
  })

  it("backs a failing key off, doubling up to the maximum, and starts over once it succeeds", () => {
    const queue = new WorkQueue()
    const delays = Array.from({ length: 12 }, () => queue.failed("k", 0))
    assert.strictEqual(delays[0], backoffMsMin)
    assert.strictEqual(delays[1], 2 * backoffMsMin)
    assert.strictEqual(delays.at(-1), backoffMsMax)
    assert.isTrue(delays.every((delay, index) => index === 0 || delay >= delays[index - 1]!))
    queue.succeeded("k")
    assert.strictEqual(queue.failed("k", 10_000), 10_000 + backoffMsMin)
  })

  it("forgets a key: nothing of it is released later", () => {
    const queue = new WorkQueue()
    queue.add("k")
    queue.at("k", 100)
    queue.forget("k")
    assert.deepStrictEqual(drain(queue, 1_000), [])
  })
})
