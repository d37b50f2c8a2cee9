/**
 * The discrete-event engine: events run in (time, scheduling order), including events scheduled from a callback at
 * the current instant; `run(until)` stops at the horizon and moves the clock to it; and the M/M/1 benchmark model on
 * the engine reproduces queueing theory's mean wait and is a pure function of its seed.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { runMm1, theoreticalMeanWait } from "../../../bench/sim/mm1.ts"
import { Engine } from "../../../src/backends/sim/Engine.ts"

describe("Engine", () => {
  it("runs events in time order and sets the clock to each event's time", () => {
    const engine = new Engine()
    const seen: Array<readonly [string, number]> = []
    engine.at(5, () => seen.push(["c", engine.now]))
    engine.at(1, () => seen.push(["a", engine.now]))
    engine.after(3, () => seen.push(["b", engine.now]))
    assert.strictEqual(engine.pending, 3)
    assert.strictEqual(engine.peekTime(), 1)
    engine.run()
    assert.deepStrictEqual(seen, [["a", 1], ["b", 3], ["c", 5]])
    assert.strictEqual(engine.processed, 3)
    assert.strictEqual(engine.pending, 0)
    assert.strictEqual(engine.now, 5)
    assert.isUndefined(engine.peekTime())
  })

  it("runs events due at the same instant in the order they were scheduled", () => {
    const engine = new Engine()
    const seen: Array<string> = []
    for (const name of ["a", "b", "c", "d", "e", "f", "g", "h"]) engine.at(2, () => seen.push(name))
    engine.run()
    assert.deepStrictEqual(seen, ["a", "b", "c", "d", "e", "f", "g", "h"])
  })

  it("runs events a callback schedules at the current instant after those already due then, in their own order", () => {
    const engine = new Engine()
    const seen: Array<string> = []
    engine.at(1, () => {
      seen.push("first")
      engine.after(0, () => seen.push("first/after0"))
      engine.at(engine.now, () => {
        seen.push("first/atNow")
        engine.after(0, () => seen.push("first/atNow/after0"))
      })
      engine.at(0, () => seen.push("first/inThePast"))
    })
    engine.at(1, () => seen.push("second"))
    engine.at(2, () => seen.push("later"))
    engine.run()
    assert.deepStrictEqual(seen, [
      "first",
      "second",
      "first/after0",
      "first/atNow",
      "first/inThePast",
      "first/atNow/after0",
      "later"
    ])
  })

  it("runs a callback with its argument and the ticket its scheduling answered", () => {
    const engine = new Engine(10)
    const seen: Array<readonly [string, number, number]> = []
    const record = (name: string, ticket: number) => seen.push([name, ticket, engine.now])
    const tickets = [
      engine.at(12, record, "b"),
      engine.after(0, record, "a"),
      engine.after(2, record, "c"),
      engine.at(11, () => seen.push(["plain", -1, engine.now]))
    ]
    assert.strictEqual(new Set(tickets).size, 4)
    assert.deepStrictEqual(seen, [])
    engine.run()
    assert.deepStrictEqual(seen, [["a", tickets[1]!, 10], ["plain", -1, 11], ["b", tickets[0]!, 12], [
      "c",
      tickets[2]!,
      12
    ]])
  })

  it("counts the events of the current instant in pending and peekTime, before and after the clock moves", () => {
    const engine = new Engine(5)
    const seen: Array<string> = []
    engine.at(7, () => seen.push("later"))
    engine.after(0, () => {
      seen.push("now")
      engine.after(0, () => seen.push("now again"))
      assert.strictEqual(engine.pending, 2)
      assert.strictEqual(engine.peekTime(), 5)
    })
    assert.strictEqual(engine.pending, 2)
    assert.strictEqual(engine.peekTime(), 5)
    assert.isTrue(engine.step())
    assert.isTrue(engine.step())
    assert.deepStrictEqual(seen, ["now", "now again"])
    assert.strictEqual(engine.peekTime(), 7)
    engine.run(6)
    assert.strictEqual(engine.now, 6)
    engine.after(0, () => seen.push("at 6"))
    engine.run()
    assert.deepStrictEqual(seen, ["now", "now again", "at 6", "later"])
    assert.strictEqual(engine.pending, 0)
    assert.strictEqual(engine.processed, 4)
  })

  it("never schedules into the past: negative delays and past instants run at the current time", () => {
    const engine = new Engine(100)
    const times: Array<number> = []
    engine.after(-5, () => times.push(engine.now))
    engine.at(50, () => times.push(engine.now))
    engine.run()
    assert.deepStrictEqual(times, [100, 100])
    assert.strictEqual(engine.epochMs, 100)
  })

  it("run(until) runs the events due at or before the horizon, leaves the rest and moves the clock to it", () => {
    const engine = new Engine()
    const seen: Array<number> = []
    for (const time of [1, 5, 10, 10, 11, 20]) engine.at(time, () => seen.push(time))
    engine.run(10)
    assert.deepStrictEqual(seen, [1, 5, 10, 10])
    assert.strictEqual(engine.now, 10)
    assert.strictEqual(engine.pending, 2)
    engine.run(15)
    assert.deepStrictEqual(seen, [1, 5, 10, 10, 11])
    assert.strictEqual(engine.now, 15)
    engine.after(1, () => seen.push(engine.now))
    engine.run(12)
    assert.strictEqual(engine.now, 15, "a horizon in the past leaves the clock where it is")
    engine.run()
    assert.deepStrictEqual(seen, [1, 5, 10, 10, 11, 16, 20])
    assert.strictEqual(engine.now, 20)
    assert.strictEqual(engine.processed, 7)
  })

  it("step runs exactly one event", () => {
    const engine = new Engine()
    const seen: Array<number> = []
    engine.at(2, () => seen.push(2))
    engine.at(1, () => seen.push(1))
    assert.isTrue(engine.step())
    assert.deepStrictEqual(seen, [1])
    assert.isTrue(engine.step())
    assert.isFalse(engine.step())
    assert.deepStrictEqual(seen, [1, 2])
  })

  it("pops any schedule, including events scheduled from callbacks, in sorted (time, scheduling order)", () => {
    // Each event may schedule children at small delays (0 included), so ties and same-instant rescheduling are common.
    const event = fc.record({
      delay: fc.integer({ min: -2, max: 6 }),
      children: fc.array(fc.integer({ min: -1, max: 4 }), { maxLength: 3 })
    })
    fc.assert(
      fc.property(
        fc.array(event, { minLength: 1, maxLength: 200 }),
        fc.integer({ min: 0, max: 199 }),
        (plan, offset) => {
          const engine = new Engine()
          let scheduled = 0
          let planIndex = offset
          const popped: Array<readonly [number, number]> = []
          const schedule = (delay: number, depth: number): void => {
            const sequence = scheduled++
            const expectedTime = engine.now + Math.max(0, delay)
            engine.after(delay, () => {
              assert.strictEqual(engine.now, expectedTime)
              popped.push([engine.now, sequence])
              if (depth < 3) {
                const next = plan[planIndex++ % plan.length]!
                for (const child of next.children) schedule(child, depth + 1)
              }
            })
          }
          for (const { delay } of plan) schedule(delay, 0)
          engine.run()
          assert.strictEqual(popped.length, scheduled)
          for (let index = 1; index < popped.length; index++) {
            const [time, sequence] = popped[index]!
            const [previousTime, previousSequence] = popped[index - 1]!
            assert.isTrue(
              time > previousTime || (time === previousTime && sequence > previousSequence),
              `${index}: (${time}, ${sequence}) after (${previousTime}, ${previousSequence})`
            )
          }
        }
      ),
      { numRuns: 300 }
    )
  })

  it("pops random absolute times as a stable sort of them", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.integer({ min: 0, max: 20 }), fc.double({ min: 0, max: 1e6, noNaN: true })), {
          maxLength: 500
        }),
        (times) => {
          const engine = new Engine()
          const order: Array<number> = []
          times.forEach((time, index) => engine.at(time, () => order.push(index)))
          engine.run()
          const expected = times.map((time, index) => ({ time, index })).sort((a, b) =>
            a.time - b.time || a.index - b.index
          )
          assert.deepStrictEqual(order, expected.map(({ index }) => index))
        }
      )
    )
  })
})

describe("M/M/1 on the engine", () => {
  it("gives the theoretical mean wait in queue within 10 % over 200,000 customers", () => {
    const result = runMm1({ customers: 200_000, seed: "mm1-test" })
    assert.strictEqual(result.customers, 200_000)
    assert.approximately(theoreticalMeanWait, 1 / 1.1 / 0.1, 1e-12)
    assert.isBelow(
      Math.abs(result.meanWait - theoreticalMeanWait) / theoreticalMeanWait,
      0.1,
      `mean wait ${result.meanWait}`
    )
  })

  it("is a pure function of its seed", () => {
    const first = runMm1({ customers: 50_000, seed: "a" })
    const again = runMm1({ customers: 50_000, seed: "a" })
    const other = runMm1({ customers: 50_000, seed: "b" })
    assert.strictEqual(again.meanWait, first.meanWait)
    assert.notStrictEqual(other.meanWait, first.meanWait)
  })
})
