/**
 * Spot trace replay on the repository's copies of the "Can't Be Late" traces (scenarios/data/spot-traces): the
 * loader's view of each file against facts computed here from the raw JSON, and the replay's wrap-around on small
 * synthetic traces, where every answer can be worked out by hand.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { readFileSync } from "node:fs"
import { join, relative } from "node:path"
import {
  availabilityAt,
  listTraces,
  loadTrace,
  meanTimeBetweenPreemptionsMs,
  nextPreemptionAfter,
  parseTrace,
  preemptionTimesMs,
  spanMs,
  type SpotTrace
} from "../../../src/backends/sim/SpotTraces.ts"

const dir = join(import.meta.dirname, "../../../scenarios/data/spot-traces")

const synthetic = (samples: ReadonlyArray<number>, gapMs: number): SpotTrace => ({
  name: "synthetic",
  gapMs,
  samples: Uint8Array.from(samples)
})

/** The next drop by walking tick by tick through the replay: the slow, obvious reading of the definition. */
const nextPreemptionByWalking = (trace: SpotTrace, tMs: number): number | undefined => {
  const n = trace.samples.length
  const sampleAt = (tick: number): number => trace.samples[tick % n]!
  for (
    let tick = Math.max(1, Math.ceil(Math.max(0, tMs) / trace.gapMs));
    tick <= Math.ceil(Math.max(0, tMs) / trace.gapMs) + 2 * n + 1;
    tick++
  ) {
    if (sampleAt(tick) === 0 && sampleAt(tick - 1) > 0) return tick * trace.gapMs
  }
  return undefined
}

describe("the repository's spot traces", () => {
  const paths = listTraces(dir)

  it("lists the 23 copied files: the preemption tree and availability/1-node/aws-02-15-2023", () => {
    const relativePaths = paths.map((path) => relative(dir, path))
    assert.strictEqual(relativePaths.length, 23)
    assert.strictEqual(relativePaths.filter((path) => path.startsWith("preemption/")).length, 14)
    assert.strictEqual(relativePaths.filter((path) => path.startsWith("availability/1-node/aws-02-15-2023/")).length, 9)
    assert.deepStrictEqual(relativePaths, [...relativePaths].sort())
  })

  for (const path of paths) {
    const label = relative(dir, path)
    it(`reads ${label} as its JSON says`, () => {
      const raw = JSON.parse(readFileSync(path, "utf8")) as {
        metadata: { gap_seconds: number }
        data: Array<number>
        prices?: Array<number>
      }
      const trace = loadTrace(path)
      assert.strictEqual(trace.gapMs, raw.metadata.gap_seconds * 1000)
      assert.deepStrictEqual(Array.from(trace.samples), raw.data)
      assert.deepStrictEqual(trace.pricesPerHour, raw.prices)

      let drops = 0
      let firstDrop: number | undefined
      for (let index = 1; index < raw.data.length; index++) {
        if (raw.data[index - 1]! > 0 && raw.data[index] === 0) {
          drops++
          firstDrop ??= index * raw.metadata.gap_seconds * 1000
        }
      }
      const times = preemptionTimesMs(trace)
      assert.strictEqual(times.length, drops)
      assert.strictEqual(times[0], firstDrop)
      for (const time of times) {
        assert.strictEqual(availabilityAt(trace, time), 0)
        assert.isAbove(availabilityAt(trace, time - 1), 0)
      }
      const span = raw.data.length * raw.metadata.gap_seconds * 1000
      assert.strictEqual(meanTimeBetweenPreemptionsMs(trace), drops === 0 ? Number.POSITIVE_INFINITY : span / drops)
      for (const t of [0, 1, span / 3, span - 1, span, span + 12_345, 5 * span + 999]) {
        assert.strictEqual(
          nextPreemptionAfter(trace, t),
          nextPreemptionByWalking(trace, t),
          `next preemption after ${t}`
        )
      }
    })
  }

  it("knows the facts of a few files by heart", () => {
    const v100 = loadTrace(join(dir, "preemption/1-node/aws-04-22-2023/us-east-1c_v100_1.json"))
    assert.strictEqual(v100.name, "aws-04-22-2023/us-east-1c_v100_1")
    assert.strictEqual(v100.gapMs, 32_000)
    assert.strictEqual(v100.samples.length, 19_961)
    assert.strictEqual(preemptionTimesMs(v100).length, 41)
    assert.isTrue(v100.pricesPerHour!.every((price) => price === 0.918))

    const gcp = loadTrace(join(dir, "preemption/1-node/gcp-04-30-2023/us-central1-a_c3-88.json"))
    assert.strictEqual(preemptionTimesMs(gcp).length, 0)
    assert.strictEqual(meanTimeBetweenPreemptionsMs(gcp), Number.POSITIVE_INFINITY)
    // 0 at the first tick and 1 ever after: its only drop in replay is the seam.
    assert.strictEqual(nextPreemptionAfter(gcp, 1), spanMs(gcp))

    const fourNode = loadTrace(join(dir, "preemption/4-node/aws-08-03-2023/us-west-2c_v100_1.json"))
    assert.strictEqual(Math.max(...fourNode.samples), 4)
    assert.strictEqual(preemptionTimesMs(fourNode).length, 77)

    const availability = listTraces(join(dir, "availability")).map(loadTrace)
    assert.deepStrictEqual(
      availability.map((trace) => preemptionTimesMs(trace).length),
      [253, 343, 293, 285, 145, 174, 158, 94, 142]
    )
  })
})

describe("replay of a synthetic trace", () => {
  // Ticks of 10 ms: 0 1 1 0 2 0 3, span 70. Drops at 30 and 50; the seam (3 then 0) drops at 70, 140, …
  const trace = synthetic([0, 1, 1, 0, 2, 0, 3], 10)

  it("reads availability per tick and wraps around the span", () => {
    const expected: ReadonlyArray<readonly [number, number]> = [
      [0, 0],
      [9.99, 0],
      [10, 1],
      [29, 1],
      [30, 0],
      [45, 2],
      [69, 3],
      [70, 0],
      [80, 1],
      [139, 3],
      [700 + 45, 2],
      [-5, 0]
    ]
    for (const [t, count] of expected) assert.strictEqual(availabilityAt(trace, t), count, `at ${t}`)
  })

  it("finds preemptions in one pass and the next one at or after any time, seams included", () => {
    assert.deepStrictEqual(preemptionTimesMs(trace), [30, 50])
    const expected: ReadonlyArray<readonly [number, number]> = [
      [-100, 30],
      [0, 30],
      [29.5, 30],
      [30, 30],
      [30.1, 50],
      [50, 50],
      [51, 70],
      [70, 70],
      [70.5, 100],
      [101, 120],
      [121, 140],
      [7000, 7000],
      [7001, 7030]
    ]
    for (const [t, next] of expected) assert.strictEqual(nextPreemptionAfter(trace, t), next, `after ${t}`)
    assert.strictEqual(meanTimeBetweenPreemptionsMs(trace), 35)
  })

  it("has no seam drop when the trace ends at 0 or starts above 0", () => {
    const noSeam = synthetic([1, 0, 1], 5)
    assert.deepStrictEqual(preemptionTimesMs(noSeam), [5])
    assert.strictEqual(nextPreemptionAfter(noSeam, 6), 20)
    assert.strictEqual(nextPreemptionAfter(noSeam, 15), 20)
    const endsAtZero = synthetic([0, 2, 0], 5)
    assert.strictEqual(nextPreemptionAfter(endsAtZero, 11), 25)
  })

  it("has no preemption at all when the count never falls to 0", () => {
    for (const samples of [[1, 1, 1], [0], [0, 0], [3, 1, 2]]) {
      const flat = synthetic(samples, 100)
      assert.deepStrictEqual(preemptionTimesMs(flat), [])
      assert.isUndefined(nextPreemptionAfter(flat, 0))
      assert.isUndefined(nextPreemptionAfter(flat, 12_345))
      assert.strictEqual(meanTimeBetweenPreemptionsMs(flat), Number.POSITIVE_INFINITY)
    }
  })

  it("agrees with a tick-by-tick walk for any trace and any time", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 1, max: 50 }),
        fc.double({ min: -10, max: 5000, noNaN: true }),
        (samples, gapMs, t) => {
          const random = synthetic(samples, gapMs)
          assert.strictEqual(nextPreemptionAfter(random, t), nextPreemptionByWalking(random, t))
          const tick = Math.floor(Math.max(0, t) / gapMs)
          assert.strictEqual(availabilityAt(random, t), samples[tick % samples.length])
        }
      ),
      { numRuns: 500 }
    )
  })

  it("refuses malformed files", () => {
    for (
      const text of [
        "[]",
        `{"data": [1]}`,
        `{"metadata": {"gap_seconds": 0}, "data": [1]}`,
        `{"metadata": {"gap_seconds": 30}, "data": []}`,
        `{"metadata": {"gap_seconds": 30}, "data": [1, -1]}`,
        `{"metadata": {"gap_seconds": 30}, "data": [1, 256]}`,
        `{"metadata": {"gap_seconds": 30}, "data": [1, 0.5]}`,
        `{"metadata": {"gap_seconds": 30}, "data": [1, 0], "prices": [1]}`
      ]
    ) {
      assert.throws(() => parseTrace("bad", text), /spot trace bad/u)
    }
    assert.deepStrictEqual(
      parseTrace("ok", `{"metadata": {"gap_seconds": 30}, "data": [1, 0], "prices": [1, 2]}`).pricesPerHour,
      [1, 2]
    )
  })
})
