// The sim backend's clock (src/server/VirtualClock.ts): it follows the wall clock at its speed, moves forward on
// request, never back, and is the Effect Clock of what runs under its layer while sleeps stay real.
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { layer, VirtualClock } from "../../src/server/VirtualClock.ts"

describe("VirtualClock", () => {
  it("follows the wall clock at its speed from its anchor", () => {
    let wall = 1_000
    const clock = new VirtualClock(60, 5_000_000, () => wall)
    assert.strictEqual(clock.now(), 5_000_000)
    wall += 1_000
    assert.strictEqual(clock.now(), 5_060_000)
  })

  it("moves forward, never back", () => {
    let wall = 0
    const clock = new VirtualClock(1, 10_000, () => wall)
    clock.advanceTo(70_000)
    assert.strictEqual(clock.now(), 70_000)
    clock.advanceTo(20_000)
    assert.strictEqual(clock.now(), 70_000)
    wall += 500
    assert.strictEqual(clock.now(), 70_500)
  })

  it.live("is the Clock of effects under its layer; sleeping takes real time", () =>
    Effect.gen(function*() {
      const clock = new VirtualClock(1, Date.UTC(2030, 0, 1), Date.now)
      const read = Effect.gen(function*() {
        const before = yield* Clock.currentTimeMillis
        const started = Date.now()
        yield* Effect.sleep("20 millis")
        return { before, slept: Date.now() - started }
      })
      const { before, slept } = yield* read.pipe(Effect.provide(layer(clock)))
      assert.isAtLeast(before, Date.UTC(2030, 0, 1))
      assert.isBelow(before, Date.UTC(2030, 0, 1) + 60_000)
      assert.isAtLeast(slept, 15)
    }))
})
