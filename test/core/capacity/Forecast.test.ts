/**
 * The Pool's demand forecast (core/capacity/Forecast.ts; docs/simulator.md, "Forecast") on hand-made histories whose
 * answers can be worked out by hand: a flat demand, a daily peak at a known hour, quantiles of known samples, a window
 * that forgets, and the backtest's coverage recounted here from the forecast itself.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  backtest,
  busyFromMs,
  type DemandInterval,
  forecastDemand,
  hourlyPeakDemand,
  hourMs,
  poolStatusForecast,
  quantile
} from "../../../src/core/capacity/Forecast.ts"

const days = (count: number, demandAt: (hour: number) => number): ReadonlyArray<number> =>
  Array.from({ length: count * 24 }, (_, hour) => demandAt(hour))

describe("hourly demand from intervals", () => {
  it("is the most GPUs requested at once in each hour, with what ran before it and thousandths summed exactly", () => {
    const minute = 60_000
    const intervals: ReadonlyArray<DemandInterval> = [
      { startMs: 0, endMs: 30 * minute, milliGpus: 1000 },
      { startMs: 15 * minute, endMs: 2 * hourMs, milliGpus: 500 },
      { startMs: -hourMs, endMs: 3 * hourMs, milliGpus: 100 }, // began before the history: counts from its first hour
      { startMs: 90 * minute, endMs: 90 * minute, milliGpus: 8000 } // ends where it starts: requests nothing
    ]
    assert.deepStrictEqual(hourlyPeakDemand(intervals, 0, 4 * hourMs), [1.6, 0.6, 0.1, 0])
    // The order the intervals come in changes nothing.
    assert.deepStrictEqual(hourlyPeakDemand([...intervals].reverse(), 0, 4 * hourMs), [1.6, 0.6, 0.1, 0])
  })

  it("does not count work that hands its GPUs over at an instant twice", () => {
    const intervals = [{ startMs: 0, endMs: hourMs + 5, milliGpus: 1000 }, {
      startMs: hourMs + 5,
      endMs: 2 * hourMs,
      milliGpus: 1000
    }]
    assert.deepStrictEqual(hourlyPeakDemand(intervals, 0, 2 * hourMs), [1, 1])
  })

  it("starts the busy part at the hour of the first percentile of starts", () => {
    const intervals = Array.from(
      { length: 200 },
      (_, index) => ({ startMs: index < 2 ? index : 50 * hourMs + index * 1000, endMs: 60 * hourMs, milliGpus: 1000 })
    )
    // 200 starts: the 1% quantile is the third (index 2), at 50 h + 2 s.
    assert.strictEqual(busyFromMs(intervals), 50 * hourMs)
    assert.strictEqual(busyFromMs([]), 0)
  })
})

describe("the forecast", () => {
  it("of a flat demand is the level, p50 and p90 alike, and falls short only of less capacity", () => {
    const flat = days(14, () => 12)
    const atLevel = forecastDemand(flat, { horizonHours: 168, capacityGpus: 12 })
    assert.deepStrictEqual(atLevel.peakDemandGPUs, { p50: 12, p90: 12 })
    assert.strictEqual(atLevel.hours.length, 168)
    assert.isTrue(atLevel.hours.every((hour) => hour.p50 === 12 && hour.p90 === 12))
    assert.isUndefined(atLevel.shortfallHour, "demand equal to capacity is no shortfall")
    assert.strictEqual(forecastDemand(flat, { horizonHours: 24, capacityGpus: 11 }).shortfallHour, 0)
    assert.isUndefined(forecastDemand(flat, { horizonHours: 24 }).shortfallHour, "no capacity, no shortfall")
  })

  it("finds a daily peak at its hour of day, counted on the hour numbers given", () => {
    // Absolute hour a has 100 GPUs when a mod 24 is 18, else 10; the history starts at absolute hour 5.
    const firstHour = 5
    const history = days(14, (index) => ((firstHour + index) % 24 === 18 ? 100 : 10))
    const forecast = forecastDemand(history, { horizonHours: 48, capacityGpus: 50, firstHour })
    assert.deepStrictEqual(forecast.peakDemandGPUs, { p50: 100, p90: 100 })
    // The first forecast hour is absolute 5 + 336 = 341 (hour of day 5): 18 comes 13 hours later, and again a day on.
    assert.strictEqual(forecast.shortfallHour, 13)
    const peaks = forecast.hours.flatMap((hour, ahead) => (hour.p90 === 100 ? [ahead] : []))
    assert.deepStrictEqual(peaks, [13, 37])
    assert.isTrue(forecast.hours.every((hour, ahead) => peaks.includes(ahead) || hour.p90 === 10))
  })

  it("takes nearest-rank quantiles of the same hour of day over the window", () => {
    // Day d (0..9) has d + 1 GPUs at every hour: each hour of day sees 1..10, so p50 = 5 and p90 = 9.
    const history = Array.from({ length: 240 }, (_, index) => Math.floor(index / 24) + 1)
    const forecast = forecastDemand(history, { horizonHours: 24 })
    assert.isTrue(forecast.hours.every((hour) => hour.p50 === 5 && hour.p90 === 9))
    assert.strictEqual(quantile([1, 2, 3, 4], 0.5), 2)
    assert.strictEqual(quantile([7], 0.9), 7)
  })

  it("reads only the window: an older level is forgotten", () => {
    const history = [...days(14, () => 100), ...days(14, () => 10)]
    assert.deepStrictEqual(forecastDemand(history, { horizonHours: 24 }).peakDemandGPUs, { p50: 10, p90: 10 })
    assert.deepStrictEqual(forecastDemand(history, { horizonHours: 24, windowHours: 28 * 24 }).peakDemandGPUs, {
      p50: 10,
      p90: 100
    })
  })

  it("falls back on the whole window for an hour of day it has not seen", () => {
    const forecast = forecastDemand([3, 7], { horizonHours: 24 })
    assert.deepStrictEqual(forecast.hours[0], { p50: 3, p90: 7 }, "hour 2: never seen; samples 3 and 7")
    assert.throws(() => forecastDemand([], { horizonHours: 24 }))
  })

  it("is the same for the same history", () => {
    const history = days(21, (hour) => ((hour * 7919) % 97) / 3)
    const options = { horizonHours: 168, capacityGpus: 30, firstHour: 11 }
    assert.deepStrictEqual(forecastDemand(history, options), forecastDemand([...history], options))
    assert.deepStrictEqual(backtest(history, options), backtest([...history], options))
  })

  it("shows as status.forecast in whole GPUs, with the shortfall as an instant", () => {
    const forecast = forecastDemand(days(1, () => 2.3), { horizonHours: 24, capacityGpus: 2 })
    const end = Date.UTC(2026, 0, 1)
    assert.deepStrictEqual(poolStatusForecast(forecast, { generatedMs: end, historyEndMs: end }), {
      generatedTime: "2026-01-01T00:00:00.000Z",
      horizon: "24h",
      peakDemandGPUs: { p50: 3, p90: 3 },
      shortfallTime: "2026-01-01T00:00:00.000Z"
    })
  })
})

describe("the backtest", () => {
  it("recounts to the hours of the second half at or under the first half's forecast", () => {
    // A daily pattern with a level that climbs: the coverage is whatever the data give, in [0, 1], counted again here.
    const history = days(
      28,
      (hour) => 10 + (hour % 24 < 12 ? 5 : 0) + Math.floor(hour / 24) / 4 + ((hour * 37) % 11) / 5
    )
    const options = { horizonHours: 168, firstHour: 0 }
    const result = backtest(history, options)
    assert.strictEqual(result.fitHours, 14 * 24)
    assert.strictEqual(result.testHours, 14 * 24)
    const fitted = forecastDemand(history.slice(0, result.fitHours), { horizonHours: result.testHours })
    const test = history.slice(result.fitHours)
    const underP90 = test.filter((demand, hour) => demand <= fitted.hours[hour]!.p90).length
    const underP50 = test.filter((demand, hour) => demand <= fitted.hours[hour]!.p50).length
    assert.deepStrictEqual(result.fixed, {
      hours: test.length,
      underP50,
      underP90,
      p50: underP50 / test.length,
      p90: underP90 / test.length
    })
    for (const coverage of [result.fixed, result.rolling]) {
      assert.isTrue(coverage.p90 >= 0 && coverage.p90 <= 1 && coverage.p50 <= coverage.p90)
      assert.strictEqual(coverage.hours, result.testHours)
    }
    // Refitting every 168 h: the first week from the first half, the second from everything before it.
    const secondOrigin = result.fitHours + 168
    const refitted = forecastDemand(history.slice(0, secondOrigin), { horizonHours: history.length - secondOrigin })
    const rollingUnderP90 = test.slice(0, 168).filter((demand, hour) => demand <= fitted.hours[hour]!.p90).length +
      history.slice(secondOrigin).filter((demand, hour) => demand <= refitted.hours[hour]!.p90).length
    assert.strictEqual(result.rolling.underP90, rollingUnderP90)
  })

  it("covers every hour of a flat demand", () => {
    const result = backtest(days(4, () => 5), { horizonHours: 24 })
    assert.strictEqual(result.fixed.p90, 1)
    assert.strictEqual(result.rolling.p50, 1)
    assert.throws(() => backtest([1], { horizonHours: 24 }))
  })
})
