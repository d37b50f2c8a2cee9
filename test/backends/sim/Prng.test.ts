/**
 * The simulator's seeded randomness: a seed fixes the sequence, every derived component stream is independent of
 * what its parent and its siblings draw, and the distributions have the moments they claim.
 */
import { assert, describe, it } from "@effect/vitest"
import { Prng } from "../../../src/backends/sim/Prng.ts"

const draw = (prng: Prng, count: number): Array<number> => Array.from({ length: count }, () => prng.uniform())

describe("Prng", () => {
  it("gives the same sequence for the same seed and another for another seed", () => {
    const first = draw(new Prng("seed"), 1000)
    assert.deepStrictEqual(draw(new Prng("seed"), 1000), first)
    assert.notDeepEqual(draw(new Prng("seed2"), 1000), first)
    for (const value of first) assert.isTrue(value >= 0 && value < 1)
  })

  it("derives a component's stream from the name alone, untouched by draws on the parent or on siblings", () => {
    const untouched = draw(new Prng("scenario").derive("a"), 100)

    const parent = new Prng("scenario")
    draw(parent, 517)
    const sibling = parent.derive("b")
    draw(sibling, 33)
    const a = parent.derive("a")
    draw(parent, 5)
    draw(sibling, 5)
    assert.deepStrictEqual(draw(a, 100), untouched)

    assert.notDeepEqual(draw(new Prng("scenario").derive("b"), 100), untouched)
    assert.notDeepEqual(draw(new Prng("scenario"), 100), untouched)
    assert.notDeepEqual(draw(new Prng("other").derive("a"), 100), untouched)
    assert.strictEqual(a.seed, "scenario/a")
  })

  it("draws exponentials with the requested mean", () => {
    const prng = new Prng("exponential")
    const count = 200_000
    let sum = 0
    let sumSquares = 0
    for (let index = 0; index < count; index++) {
      const value = prng.exponential(2.5)
      assert.isTrue(value >= 0)
      sum += value
      sumSquares += value * value
    }
    const mean = sum / count
    const variance = sumSquares / count - mean * mean
    assert.approximately(mean, 2.5, 2.5 * 0.02)
    assert.approximately(variance, 2.5 * 2.5, 2.5 * 2.5 * 0.05)
  })

  it("draws integers in the closed range and chances with the requested probability", () => {
    const prng = new Prng("int")
    const seen = new Set<number>()
    let hits = 0
    for (let index = 0; index < 20_000; index++) {
      const value = prng.int(3, 7)
      assert.isTrue(Number.isInteger(value) && value >= 3 && value <= 7)
      seen.add(value)
      if (prng.chance(0.25)) hits++
    }
    assert.strictEqual(seen.size, 5)
    assert.approximately(hits / 20_000, 0.25, 0.02)
    assert.isFalse(prng.chance(0))
  })
})
