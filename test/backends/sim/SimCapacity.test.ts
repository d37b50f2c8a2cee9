/**
 * SimCapacity's bookkeeping of an owner's attempts: a few are found by a look through them, many by name in a map
 * (past eight); either way an acquire or launch of a known name answers the same attempt, `facts` finds every one,
 * `attemptsOf` lists them in the order they were acquired, and `forget` drops them all — for an owner of any size.
 */
import { assert, describe, it } from "@effect/vitest"
import { Engine } from "../../../src/backends/sim/Engine.ts"
import { Prng } from "../../../src/backends/sim/Prng.ts"
import { SimCapacity } from "../../../src/backends/sim/SimCapacity.ts"
import { defaultWorkload } from "../../../src/backends/sim/Workloads.ts"
import { variant } from "../../core/Fixtures.ts"
import { deterministicModel } from "./DeterministicModel.ts"

const capacityOf = (hosts: number) =>
  new SimCapacity(new Engine(Date.parse("2026-03-01T00:00:00Z")), new Prng("owners"), () => deterministicModel(hosts))

const host = (owner: string, attempt: string, index: number) =>
  ({ owner, namespace: "demo", attempt, index, number: 1, variant: variant("a10-1x-us"), recovery: false }) as const

describe("SimCapacity's attempts by owner", () => {
  for (const count of [1, 8, 9, 40]) {
    it(`${count} attempts of one owner: found by name, acquired once, listed in order, forgotten together`, () => {
      const capacity = capacityOf(count + 5)
      const names = Array.from({ length: count }, (_, index) => `train-${index}-1`)
      const acquired = names.map((name, index) =>
        index % 2 === 0
          ? capacity.acquire(host("demo/train", name, index))
          : capacity.launch({
            ...host("demo/train", name, index),
            keepWarmMs: 0,
            workload: defaultWorkload,
            restoreFromSeq: undefined,
            resumeFromUnits: undefined,
            checkpointIntervalMs: undefined
          })
      )
      // Another owner's attempt of the same name is its own.
      const other = capacity.acquire(host("other/train", names[0]!, 0))
      assert.notStrictEqual(other, acquired[0])
      names.forEach((name, index) => {
        assert.strictEqual(capacity.facts("demo/train", name), acquired[index])
        assert.strictEqual(capacity.acquire(host("demo/train", name, index)), acquired[index], `acquire ${name} again`)
      })
      assert.isUndefined(capacity.facts("demo/train", "train-99-1"))
      assert.deepStrictEqual(capacity.attemptsOf("demo/train"), acquired)
      assert.strictEqual(capacity.inUse(variant("a10-1x-us")), count + 1)
      capacity.forget("demo/train")
      assert.deepStrictEqual(capacity.attemptsOf("demo/train"), [])
      assert.isUndefined(capacity.facts("demo/train", names[count - 1]!))
      assert.strictEqual(capacity.facts("other/train", names[0]!), other)
    })
  }

  for (const count of [1, 9]) {
    it(`${count} running programs of an owner: stopped by name after the owner was forgotten, their hosts released`, () => {
      const engine = new Engine(Date.parse("2026-03-01T00:00:00Z"))
      const capacity = new SimCapacity(engine, new Prng("owners"), () => deterministicModel(count))
      const names = Array.from({ length: count }, (_, index) => `train-${index}-1`)
      const launched = names.map((name, index) =>
        capacity.launch({
          ...host("demo/train", name, index),
          keepWarmMs: 0,
          workload: { ...defaultWorkload, durationMs: 3_600_000 },
          restoreFromSeq: undefined,
          resumeFromUnits: undefined,
          checkpointIntervalMs: undefined
        })
      )
      engine.run(engine.now + 600_000)
      assert.deepStrictEqual(launched.map((attempt) => attempt.phase), names.map(() => "Running"))
      capacity.forget("demo/train")
      // A new owner of the same name has none of them.
      assert.isUndefined(capacity.facts("demo/train", names[0]!))
      for (const name of names) capacity.stop("demo/train", name, 0)
      assert.deepStrictEqual(launched.map((attempt) => attempt.phase), names.map(() => "Terminating"))
      engine.run(engine.now + 600_000)
      assert.deepStrictEqual(launched.map((attempt) => attempt.outcome?.type), names.map(() => "Stopped" as const))
      assert.strictEqual(capacity.inUse(variant("a10-1x-us")), 0)
      // Ended, they are not found by name any more: another stop changes nothing.
      capacity.stop("demo/train", names[0]!, 0)
      assert.strictEqual(launched[0]!.phase, "Ended")
    })
  }
})
