/**
 * Metering and the pricebook (src/core/billing/Metering.ts, src/core/billing/Pricebook.ts). The table tests cover the
 * one rounding rule, the billing rules per provider, and how the cost segments (Boot, Restore, Running, Teardown) are
 * metered from one run's facts: what is covered, where the round-up and the minimum go, and what is charged before the
 * host is released. The properties check that the charges only grow over time and that the final total is the
 * pricebook's rule applied to the charged time, with that time worked out here separately from the meter.
 */
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { Segment } from "../../../src/core/billing/Ledger.ts"
import { type AttemptMeter, meterAttempt, segmentSeconds, unionMs } from "../../../src/core/billing/Metering.ts"
import {
  type BillingRule,
  chargeFor,
  minimumChargeOf,
  msFor,
  type Pricebook,
  pricebookV1,
  roundDownTo,
  roundUpTo,
  ruleOf
} from "../../../src/core/billing/Pricebook.ts"
import type { AttemptFacts, Outcome } from "../../../src/core/capacity/Capacity.ts"
import type { Offering, Variant } from "../../../src/core/capacity/Offering.ts"
import { attempt, byId, catalog, ended, minute, T0, variant } from "../Fixtures.ts"

const second = 1_000
const msPerHour = 3_600_000n
/** One micro-USD per millisecond: a charge in micro-USD is the billed milliseconds. */
const perMs = 3_600_000n

const perSecond: BillingRule = { incrementMs: second, minimumMs: minute }
const perMinute: BillingRule = { incrementMs: minute, minimumMs: minute }

const withProvider = (provider: string, id: string): Variant => {
  const offering: Offering = { ...byId("a10-1x-us"), id, provider }
  return { offering, interruptible: false, rateMicroUsdPerHour: offering.onDemandMicroUsdPerHour! }
}

const priced = (rate: bigint): Variant => ({ ...variant("a10-1x-us"), rateMicroUsdPerHour: rate })

/** A run at one micro-USD per millisecond. */
const run = (fields: Partial<AttemptFacts> = {}): AttemptFacts => attempt({ variant: priced(perMs), ...fields })

const charges = (meter: AttemptMeter) => ({ ...meter.charges })
const segmentsOf = (Boot: bigint, Restore: bigint, Running: bigint, Teardown: bigint) => ({
  Boot,
  Restore,
  Running,
  Teardown
})

describe("chargeFor", () => {
  it.each([
    [perMs, 1, 1n],
    [perMs, 60_000, 60_000n],
    [750_000n, 1, 1n],
    [750_000n, 1_000, 209n],
    [750_000n, 3_600_000, 750_000n],
    [750_000n, 3_600_001, 750_001n],
    [24_000_000n, 150, 1_000n],
    [24_000_000n, 151, 1_007n],
    [1n, 3_600_000, 1n],
    [1n, 3_600_001, 2n],
    [1n, 1, 1n],
    [0n, 5_000, 0n],
    [750_000n, 0, 0n],
    [750_000n, -5, 0n],
    [perMs, 0.25, 1n],
    [perMs, 1.5, 2n]
  ])("%s micro-USD/h for %s ms is %s micro-USD", (rate, ms, expected) => {
    expect(chargeFor(rate, ms)).toBe(expected)
  })

  it("stays exact for amounts far beyond 2^53", () => {
    const rate = 10n ** 30n + 7n
    expect(chargeFor(rate, 3_600_000)).toBe(rate)
    // (10^30 + 7) × 3,600,001 / 3,600,000 = 10^30 + 7 + (10^30 + 7) / 3,600,000, rounded up.
    expect(chargeFor(rate, 3_600_001)).toBe(rate + (rate + msPerHour - 1n) / msPerHour)
    expect(chargeFor(rate, Number.MAX_SAFE_INTEGER)).toBe(
      (rate * BigInt(Number.MAX_SAFE_INTEGER) + msPerHour - 1n) / msPerHour
    )
    // 9,007,199,254,740,991 / 3,600,000 = 2,501,999,792.98...
    expect(chargeFor(1n, Number.MAX_SAFE_INTEGER)).toBe(2_501_999_793n)
  })

  it("is the least whole micro-USD at or above rate × time", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 10n ** 24n }),
        fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
        (rate, ms) => {
          const charge = chargeFor(rate, ms)
          const exact = rate * BigInt(ms)
          expect(charge * msPerHour >= exact).toBe(true)
          expect(charge === 0n || (charge - 1n) * msPerHour < exact).toBe(true)
        }
      ),
      { numRuns: 2_000 }
    )
  })

  it("a longer time never costs less, and a split never costs less than the whole", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 12n }), fc.nat(10 ** 10), fc.nat(10 ** 10), (rate, a, b) => {
        expect(chargeFor(rate, a + b) >= chargeFor(rate, a)).toBe(true)
        expect(chargeFor(rate, a) + chargeFor(rate, b) >= chargeFor(rate, a + b)).toBe(true)
      }),
      { numRuns: 2_000 }
    )
  })

  it("msFor answers the time money buys, rounded down", () => {
    expect(msFor(perMs, 1_500n)).toBe(1_500)
    expect(msFor(750_000n, 209n)).toBe(1_003)
    expect(msFor(0n, 5n)).toBe(Number.POSITIVE_INFINITY)
    expect(msFor(0n, 0n)).toBe(0)
    expect(msFor(750_000n, 0n)).toBe(0)
    expect(msFor(750_000n, -3n)).toBe(0)
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: 10n ** 9n }), fc.bigInt({ min: 1n, max: 10n ** 9n }), (rate, micro) => {
        const ms = msFor(rate, micro)
        // The time costs no more than the money, and one millisecond more costs more than it.
        expect(rate * BigInt(ms) <= micro * msPerHour).toBe(true)
        expect(rate * BigInt(ms + 1) > micro * msPerHour).toBe(true)
        expect(chargeFor(rate, ms) <= micro).toBe(true)
      }),
      { numRuns: 1_000 }
    )
  })
})

describe("rounding helpers", () => {
  it.each([
    [0, 1_000, 0, 0],
    [1, 1_000, 1_000, 0],
    [999, 1_000, 1_000, 0],
    [1_000, 1_000, 1_000, 1_000],
    [1_001, 1_000, 2_000, 1_000],
    [59_999, 60_000, 60_000, 0],
    [150_500, 60_000, 180_000, 120_000]
  ])("%s ms in increments of %s: up %s, down %s", (ms, increment, up, down) => {
    expect(roundUpTo(ms, increment)).toBe(up)
    expect(roundDownTo(ms, increment)).toBe(down)
  })
})

describe("pricebook rules", () => {
  it("bills AWS per second and Lambda per minute, both with a one-minute minimum", () => {
    expect(ruleOf(pricebookV1, withProvider("aws", "a10-aws"))).toEqual({ incrementMs: second, minimumMs: minute })
    expect(ruleOf(pricebookV1, withProvider("lambda", "a10-lambda"))).toEqual({
      incrementMs: minute,
      minimumMs: minute
    })
  })

  it("the synthetic catalog's provider is not named, so its offerings take the per-minute fallback", () => {
    expect(new Set(catalog.map((offering) => offering.provider))).toEqual(new Set(["test"]))
    for (const offering of catalog) expect(ruleOf(pricebookV1, variant(offering.id))).toBe(pricebookV1.fallback)
    expect(pricebookV1.fallback).toEqual({ incrementMs: minute, minimumMs: minute })
  })

  it("an offering's own rule wins over its provider's", () => {
    const own: BillingRule = { incrementMs: 10 * second, minimumMs: 5 * minute }
    const book: Pricebook = { ...pricebookV1, byOffering: { "a10-aws": own } }
    expect(ruleOf(book, withProvider("aws", "a10-aws"))).toBe(own)
    expect(ruleOf(book, withProvider("aws", "other-aws"))).toEqual({ incrementMs: second, minimumMs: minute })
  })

  it("the minimum charge is a minimum's time at the variant's rate", () => {
    // a10-1x-us: 0.75 USD an hour for one minute is 0.0125 USD.
    expect(minimumChargeOf(pricebookV1, variant("a10-1x-us"))).toBe(12_500n)
    expect(minimumChargeOf(pricebookV1, variant("h100-sxm-8x-us", true))).toBe(166_667n)
  })
})

describe("meterAttempt", () => {
  const booted = T0 + 2 * minute

  it("while running, charges whole increments only (per second)", () => {
    const meter = meterAttempt(run(), perSecond, booted + 30_500)
    expect(meter.final).toBe(false)
    expect(charges(meter)).toEqual(segmentsOf(120_000n, 0n, 30_000n, 0n))
    expect(meter.total).toBe(150_000n)
    // Exposure counts every millisecond, the partial increment included.
    expect(meter.exposure).toBe(150_500n)
    expect(meter.rateMicroUsdPerHour).toBe(perMs)
    expect(meter.intervals).toEqual([
      { segment: "Boot", from: T0, to: booted, covered: false },
      { segment: "Running", from: booted, to: booted + 30_500, covered: false }
    ])
  })

  it("while running, charges whole increments only (per minute)", () => {
    const meter = meterAttempt(run(), perMinute, booted + 30_500)
    expect(charges(meter)).toEqual(segmentsOf(120_000n, 0n, 0n, 0n))
    expect(meterAttempt(run(), perMinute, booted + 60_000).charges.Running).toBe(60_000n)
    expect(meterAttempt(run(), perMinute, booted + 119_999).charges.Running).toBe(60_000n)
  })

  it("a boot in progress is exposure, not a charge, until it is known not to be covered", () => {
    const meter = meterAttempt(run({ bootedAt: undefined, phase: "Provisioning" }), perSecond, T0 + 90_000)
    expect(meter.total).toBe(0n)
    expect(meter.exposure).toBe(90_000n)
    expect(meter.intervals).toEqual([{ segment: "Boot", from: T0, to: T0 + 90_000, covered: false }])
  })

  it("the final charge rounds the last increment up and puts the round-up in Teardown's USD, not its seconds", () => {
    const stop = booted + 30_500
    const facts = run({
      phase: "Ended",
      outcome: { type: "Succeeded" },
      endedAt: stop,
      stoppingAt: stop,
      releasedAt: stop + 9_700
    })
    const bySecond = meterAttempt(facts, perSecond, stop + 9_700)
    expect(bySecond.final).toBe(true)
    // 120 s boot + 30.5 s running + 9.7 s teardown = 160.2 s, billed 161 s.
    expect(charges(bySecond)).toEqual(segmentsOf(120_000n, 0n, 30_500n, 10_500n))
    expect(bySecond.total).toBe(161_000n)
    const byMinute = meterAttempt(facts, perMinute, stop + 9_700)
    expect(charges(byMinute)).toEqual(segmentsOf(120_000n, 0n, 30_500n, 29_500n))
    expect(byMinute.total).toBe(180_000n)
    expect(segmentSeconds([bySecond])).toEqual({
      charged: { Boot: 120, Running: 30, Restore: 0, Teardown: 9 },
      covered: { Boot: 0, Running: 0, Restore: 0, Teardown: 0 }
    })
    // A meter taken long after the release is the same.
    expect(charges(meterAttempt(facts, perSecond, stop + 5 * minute))).toEqual(charges(bySecond))
  })

  it("becomes final only once the host is released; before that, teardown time is whole increments", () => {
    const stop = booted + 8 * minute
    const facts = run({
      phase: "Ended",
      outcome: { type: "Succeeded" },
      endedAt: stop,
      stoppingAt: stop,
      releasedAt: stop + 45_000
    })
    const during = meterAttempt(facts, perMinute, stop + 30_500)
    expect(during.final).toBe(false)
    expect(charges(during)).toEqual(segmentsOf(120_000n, 0n, 480_000n, 0n))
    expect(charges(meterAttempt(facts, perSecond, stop + 30_500))).toEqual(segmentsOf(120_000n, 0n, 480_000n, 30_000n))
    const after = meterAttempt(facts, perMinute, stop + 45_000)
    expect(after.final).toBe(true)
    expect(charges(after)).toEqual(segmentsOf(120_000n, 0n, 480_000n, 60_000n))
    expect(after.intervals.at(-1)).toEqual({ segment: "Teardown", from: stop, to: stop + 45_000, covered: false })
  })

  it("the minimum applies only to the final charge", () => {
    const facts = run({
      bootedAt: T0 + 10_000,
      phase: "Ended",
      outcome: { type: "Succeeded" },
      endedAt: T0 + 15_000,
      stoppingAt: T0 + 15_000,
      releasedAt: T0 + 15_000
    })
    const before = meterAttempt(
      {
        ...facts,
        phase: "Running",
        outcome: undefined,
        endedAt: undefined,
        stoppingAt: undefined,
        releasedAt: undefined
      },
      perSecond,
      T0 + 14_500
    )
    expect(charges(before)).toEqual(segmentsOf(10_000n, 0n, 4_000n, 0n))
    const final = meterAttempt(facts, perSecond, T0 + 15_000)
    // 15 s charged, a minute billed: the rest of the minute is Teardown's USD, with no teardown time.
    expect(charges(final)).toEqual(segmentsOf(10_000n, 0n, 5_000n, 45_000n))
    expect(final.intervals.map((interval) => interval.segment)).toEqual(["Boot", "Running"])
    // Above the minimum, only the round-up is added.
    const longer = meterAttempt(
      { ...facts, endedAt: T0 + 75_200, stoppingAt: T0 + 75_200, releasedAt: T0 + 75_200 },
      perSecond,
      T0 + 80_000
    )
    expect(charges(longer)).toEqual(segmentsOf(10_000n, 0n, 65_200n, 800n))
  })

  it("pricebookV1 bills an AWS run per second and a Lambda run per minute", () => {
    const facts = (on: Variant) =>
      attempt({
        variant: { ...on, rateMicroUsdPerHour: perMs },
        bootedAt: T0 + 30_000,
        phase: "Ended",
        outcome: { type: "Succeeded" },
        endedAt: T0 + 90_500,
        stoppingAt: T0 + 90_500,
        releasedAt: T0 + 90_500
      })
    const aws = withProvider("aws", "a10-aws")
    const lambda = withProvider("lambda", "a10-lambda")
    expect(meterAttempt(facts(aws), ruleOf(pricebookV1, aws), T0 + 90_500).total).toBe(91_000n)
    expect(meterAttempt(facts(lambda), ruleOf(pricebookV1, lambda), T0 + 90_500).total).toBe(120_000n)
    // While it runs: 75.5 s is 75 whole seconds, or one whole minute.
    const running = (on: Variant) => ({
      ...facts(on),
      phase: "Running" as const,
      outcome: undefined,
      endedAt: undefined,
      stoppingAt: undefined,
      releasedAt: undefined
    })
    expect(meterAttempt(running(aws), ruleOf(pricebookV1, aws), T0 + 75_500).total).toBe(75_000n)
    expect(meterAttempt(running(lambda), ruleOf(pricebookV1, lambda), T0 + 75_500).total).toBe(60_000n)
  })

  it("a run charged nothing pays no minimum", () => {
    const stopped = run({
      bootedAt: undefined,
      phase: "Ended",
      outcome: { type: "Stopped" },
      endedAt: T0,
      stoppingAt: T0,
      releasedAt: T0
    })
    const meter = meterAttempt(stopped, perSecond, T0 + minute)
    expect(meter.final).toBe(true)
    expect(meter.total).toBe(0n)
    expect(meter.intervals).toEqual([])
  })

  it.each<[string, Outcome]>([
    ["BootFailed", { type: "BootFailed" }],
    ["NodeLost", { type: "NodeLost" }],
    ["Unavailable", { type: "Unavailable" }]
  ])("a boot the provider failed (%s) is covered: no charge and no minimum", (_name, outcome) => {
    const at = T0 + 3 * minute
    const meter = meterAttempt(
      ended(outcome, at, { variant: priced(perMs), bootedAt: undefined }),
      perSecond,
      at + minute
    )
    expect(meter.final).toBe(true)
    expect(meter.total).toBe(0n)
    expect(charges(meter)).toEqual(segmentsOf(0n, 0n, 0n, 0n))
    expect(meter.intervals).toEqual([{ segment: "Boot", from: T0, to: at, covered: true }])
    expect(meter.exposure).toBe(180_000n)
    expect(segmentSeconds([meter]).covered.Boot).toBe(180)
    expect(segmentSeconds([meter]).charged.Boot).toBe(0)
  })

  it("a boot the customer stopped is charged, its teardown too", () => {
    const stop = T0 + 90_000
    const facts = run({
      bootedAt: undefined,
      phase: "Ended",
      outcome: { type: "Stopped" },
      endedAt: stop + 10_000,
      stoppingAt: stop,
      releasedAt: stop + 10_000
    })
    const meter = meterAttempt(facts, perSecond, stop + 10_000)
    expect(charges(meter)).toEqual(segmentsOf(90_000n, 0n, 0n, 10_000n))
    expect(meter.intervals).toEqual([
      { segment: "Boot", from: T0, to: stop, covered: false },
      { segment: "Teardown", from: stop, to: stop + 10_000, covered: false }
    ])
    // A short one pays the minimum, in Teardown.
    const short = run({
      bootedAt: undefined,
      phase: "Ended",
      outcome: { type: "Stopped" },
      endedAt: T0 + 5_000,
      stoppingAt: T0 + 4_000,
      releasedAt: T0 + 5_000
    })
    expect(charges(meterAttempt(short, perSecond, T0 + 5_000))).toEqual(segmentsOf(4_000n, 0n, 0n, 56_000n))
  })

  it("a recovery run's boot is the Restore segment", () => {
    const meter = meterAttempt(run({ recovery: true }), perSecond, T0 + 3 * minute)
    expect(charges(meter)).toEqual(segmentsOf(0n, 120_000n, 60_000n, 0n))
    expect(meter.intervals[0]).toEqual({ segment: "Restore", from: T0, to: T0 + 2 * minute, covered: false })
    const failed = meterAttempt(
      ended({ type: "BootFailed" }, T0 + minute, { variant: priced(perMs), recovery: true, bootedAt: undefined }),
      perSecond,
      T0 + minute
    )
    expect(failed.total).toBe(0n)
    expect(failed.intervals).toEqual([{ segment: "Restore", from: T0, to: T0 + minute, covered: true }])
  })

  it("a boot stopped before it resolved charges nothing until its outcome, so its Teardown never shrinks", () => {
    // AWS rules and the A10's rate: a 60.999 s boot the customer stopped, torn down for 1.001 s.
    const rate = 750_000n
    const stop = T0 + 60_999
    const release = stop + 1_001
    const stopping = attempt({ bootedAt: undefined, phase: "Terminating", stoppingAt: stop })
    const during = meterAttempt(stopping, perSecond, stop + 1_000)
    expect(during.total).toBe(0n)
    expect(during.exposure).toBe(chargeFor(rate, 61_999))
    expect(during.intervals.map((interval) => [interval.segment, interval.covered])).toEqual([["Boot", false], [
      "Teardown",
      false
    ]])
    const final = meterAttempt(
      { ...stopping, phase: "Ended", outcome: { type: "Stopped" }, endedAt: release, releasedAt: release },
      perSecond,
      release
    )
    // 62 s billed: 12,917 micro-USD, 12,709 of them for the boot. Had the teardown's first second been charged
    // during the teardown (209), the final Teardown (208) would be below what was already captured.
    expect(charges(final)).toEqual(segmentsOf(12_709n, 0n, 0n, 208n))
    expect(final.total).toBe(chargeFor(rate, 62_000))
  })

  it.each<[string, Outcome]>([
    ["Preempted", { type: "Preempted" }],
    ["NodeLost", { type: "NodeLost" }]
  ])("the teardown of an interrupted run (%s) is covered; the round-up is still charged", (_name, outcome) => {
    const stop = booted + 8 * minute + 30_500
    const facts = run({ phase: "Ended", outcome, endedAt: stop, stoppingAt: stop, releasedAt: stop + minute })
    const meter = meterAttempt(facts, perSecond, stop + minute)
    // 120 s + 510.5 s charged, billed 631 s; the minute of teardown is covered.
    expect(charges(meter)).toEqual(segmentsOf(120_000n, 0n, 510_500n, 500n))
    expect(meter.intervals.at(-1)).toEqual({ segment: "Teardown", from: stop, to: stop + minute, covered: true })
    expect(meter.exposure).toBe(690_500n)
    const seconds = segmentSeconds([meter])
    expect(seconds.covered.Teardown).toBe(60)
    expect(seconds.charged.Teardown).toBe(0)
  })

  it("a customer's failure does not cover the teardown", () => {
    const stop = booted + minute
    const facts = run({
      phase: "Ended",
      outcome: { type: "OOMKilled" },
      endedAt: stop,
      stoppingAt: stop,
      releasedAt: stop + 20_000
    })
    expect(charges(meterAttempt(facts, perSecond, stop + 20_000))).toEqual(segmentsOf(120_000n, 0n, 60_000n, 20_000n))
  })

  it("a meter before the request charges nothing", () => {
    const meter = meterAttempt(run(), perSecond, T0 - minute)
    expect(meter.total).toBe(0n)
    expect(meter.exposure).toBe(0n)
    expect(meter.intervals).toEqual([])
  })

  it("uses the variant's frozen rate, rounded up per the one rule", () => {
    // 0.75 USD/h for 150 s: 31,250 micro-USD; for 150.5 s billed at 151 s: 31,458.33 → 31,459.
    const facts = attempt({
      bootedAt: T0 + 50_000,
      phase: "Ended",
      outcome: { type: "Succeeded" },
      endedAt: T0 + 150_500,
      stoppingAt: T0 + 150_500,
      releasedAt: T0 + 150_500
    })
    const meter = meterAttempt(facts, perSecond, T0 + 150_500)
    expect(meter.total).toBe(31_459n)
    expect(meter.charges.Boot).toBe(chargeFor(750_000n, 50_000))
    expect(meter.charges.Running).toBe(chargeFor(750_000n, 150_500) - chargeFor(750_000n, 50_000))
    expect(meter.charges.Teardown).toBe(31_459n - chargeFor(750_000n, 150_500))
  })
})

describe("unionMs and segmentSeconds", () => {
  it.each([
    [[], 0],
    [[{ from: 0, to: 10 }], 10],
    [[{ from: 0, to: 10 }, { from: 5, to: 15 }], 15],
    [[{ from: 5, to: 15 }, { from: 0, to: 10 }], 15],
    [[{ from: 0, to: 10 }, { from: 10, to: 20 }], 20],
    [[{ from: 0, to: 10 }, { from: 20, to: 30 }], 20],
    [[{ from: 0, to: 100 }, { from: 10, to: 20 }, { from: 30, to: 40 }], 100],
    [[{ from: 20, to: 30 }, { from: 0, to: 5 }, { from: 3, to: 8 }, { from: 25, to: 40 }], 28]
  ])("%j covers %s ms", (intervals, expected) => {
    expect(unionMs(intervals)).toBe(expected)
  })

  it("equals the number of covered milliseconds", () => {
    const interval = fc.tuple(fc.nat(200), fc.nat(50)).map(([from, length]) => ({ from, to: from + length }))
    fc.assert(
      fc.property(fc.array(interval, { maxLength: 12 }), (intervals) => {
        const covered = new Set<number>()
        for (const { from, to } of intervals) for (let ms = from; ms < to; ms++) covered.add(ms)
        expect(unionMs(intervals)).toBe(covered.size)
      }),
      { numRuns: 1_000 }
    )
  })

  it("counts parallel runs once, per segment, charged apart from covered", () => {
    // Two runs of one Job booting over the same minutes, then running side by side; a third lost its boot.
    const a = meterAttempt(run({ requestedAt: T0, bootedAt: T0 + 2 * minute }), perSecond, T0 + 10 * minute)
    const b = meterAttempt(
      run({ requestedAt: T0 + minute, bootedAt: T0 + 3 * minute, index: 1 }),
      perSecond,
      T0 + 10 * minute
    )
    const lost = meterAttempt(
      ended({ type: "BootFailed" }, T0 + 4 * minute, {
        variant: priced(perMs),
        requestedAt: T0 + 30_000,
        bootedAt: undefined,
        index: 2
      }),
      perSecond,
      T0 + 10 * minute
    )
    const seconds = segmentSeconds([a, b, lost])
    expect(seconds.charged).toEqual({ Boot: 180, Running: 480, Restore: 0, Teardown: 0 })
    expect(seconds.covered).toEqual({ Boot: 210, Running: 0, Restore: 0, Teardown: 0 })
    // Each alone, summed, would count the overlap twice.
    expect(segmentSeconds([a]).charged.Running + segmentSeconds([b]).charged.Running).toBe(480 + 420)
  })

  it("floors each union to whole seconds", () => {
    const meter = meterAttempt(run({ bootedAt: T0 + 1_999 }), perSecond, T0 + 3_998)
    expect(segmentSeconds([meter]).charged).toEqual({ Boot: 1, Running: 1, Restore: 0, Teardown: 0 })
  })
})

// ---------------------------------------------------------------------------------------------------------------------
// Properties

const segmentNames: ReadonlyArray<Segment> = ["Boot", "Restore", "Running", "Teardown"]
const interruptions = new Set(["Preempted", "NodeLost", "BootFailed"])
const outcomes: ReadonlyArray<Outcome> = [
  { type: "Succeeded" },
  { type: "Failed", exitCode: 1 },
  { type: "OOMKilled" },
  { type: "Preempted" },
  { type: "NodeLost" },
  { type: "BootFailed" },
  { type: "Unavailable" },
  { type: "Stopped" }
]

const ruleArb: fc.Arbitrary<BillingRule> = fc.record({
  incrementMs: fc.oneof(fc.constantFrom(1, second, minute, 15 * minute), fc.integer({ min: 1, max: 5 * minute })),
  minimumMs: fc.oneof(fc.constantFrom(0, second, minute, 10 * minute), fc.nat(20 * minute))
})

const rateArb = fc.oneof(
  fc.constantFrom(perMs, 750_000n, 24_000_000n, 1n, 0n),
  fc.bigInt({ min: 0n, max: 100_000_000n }),
  fc.bigInt({ min: 0n, max: 10n ** 24n })
)

const gapArb = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 1, max: 1_000 }),
  fc.integer({ min: 1, max: 4 * 60 * minute })
)

/** Facts with any subset of bootedAt, stoppingAt and releasedAt known, in lifecycle order, and any outcome. */
const factsArb: fc.Arbitrary<AttemptFacts> = fc.record({
  rate: rateArb,
  recovery: fc.boolean(),
  requestedAt: fc.integer({ min: T0, max: T0 + 60 * minute }),
  gaps: fc.tuple(gapArb, gapArb, gapArb),
  known: fc.tuple(fc.boolean(), fc.boolean(), fc.boolean()),
  outcome: fc.option(fc.constantFrom(...outcomes), { nil: undefined })
}).map(({ rate, recovery, requestedAt, gaps, known, outcome }) => {
  const bootedAt = requestedAt + gaps[0]
  const stoppingAt = bootedAt + gaps[1]
  const releasedAt = stoppingAt + gaps[2]
  return attempt({
    variant: priced(rate),
    recovery,
    requestedAt,
    bootedAt: known[0] ? bootedAt : undefined,
    stoppingAt: known[1] ? stoppingAt : undefined,
    releasedAt: known[2] ? releasedAt : undefined,
    endedAt: outcome === undefined ? undefined : releasedAt,
    outcome,
    phase: outcome === undefined ? "Running" : "Ended"
  })
})

/** Milliseconds of [from, to) within [start, now]. */
const overlap = (from: number, to: number, start: number, now: number) =>
  Math.max(0, Math.min(to, now) - Math.max(from, start))

/** The segments' times and the billed time, from the facts and the rule alone. */
const expected = (facts: AttemptFacts, rule: BillingRule, now: number) => {
  const { requestedAt: start, bootedAt, stoppingAt, releasedAt, outcome } = facts
  const after = (...times: Array<number | undefined>) =>
    times.find((time) => time !== undefined) ?? Number.POSITIVE_INFINITY
  const bootMs = overlap(start, after(bootedAt, stoppingAt, releasedAt), start, now)
  const runMs = bootedAt === undefined ? 0 : overlap(bootedAt, after(stoppingAt, releasedAt), start, now)
  const tearMs = stoppingAt === undefined ? 0 : overlap(stoppingAt, after(releasedAt), start, now)
  const bootCovered = bootedAt === undefined && outcome !== undefined &&
    (interruptions.has(outcome.type) || outcome.type === "Unavailable")
  // Until the boot is resolved (booted, or an outcome), nothing is charged: its teardown waits with it.
  const bootResolved = bootedAt !== undefined || outcome !== undefined
  const bootCharged = bootResolved && !bootCovered
  // Covered only when the loss ended the run itself, not when it struck a teardown the customer's stop began.
  const { endedAt } = facts
  const lostBeforeStop = stoppingAt === undefined || endedAt === undefined || stoppingAt >= endedAt
  const tearCovered = outcome !== undefined && interruptions.has(outcome.type) && lostBeforeStop
  const chargedMs = (bootCharged ? bootMs : 0) + runMs + (tearCovered || !bootResolved ? 0 : tearMs)
  const final = releasedAt !== undefined && now >= releasedAt
  const billedMs = !final
    ? Math.floor(chargedMs / rule.incrementMs) * rule.incrementMs
    : chargedMs === 0
    ? 0
    : Math.max(Math.ceil(chargedMs / rule.incrementMs) * rule.incrementMs, rule.minimumMs)
  return {
    bootMs,
    runMs,
    tearMs,
    bootCovered,
    bootCharged,
    tearCovered,
    final,
    billedMs,
    allMs: bootMs + runMs + tearMs
  }
}

/** rate × ms / 1h, rounded up, without chargeFor. */
const ceilCharge = (rate: bigint, ms: number): bigint => {
  if (ms <= 0) return 0n
  const exact = rate * BigInt(ms)
  const whole = exact / msPerHour
  return whole * msPerHour === exact ? whole : whole + 1n
}

type Path = "bootLost" | "stopBooting" | "exit" | "interrupted" | "stopRunning" | "live"

/**
 * A run's life as a driver reports it (the simulator's order of facts): the facts known at each time, and when the
 * last one arrives. A provider's failure sets the outcome, stoppingAt and releasedAt at once; a stop asked sets
 * stoppingAt, and the outcome (Stopped) comes with the release; a program that exits has its release ahead.
 */
interface Life {
  readonly path: Path
  readonly requestedAt: number
  readonly end: number
  readonly at: (now: number) => AttemptFacts
}

const lifeArb = fc.record({
  path: fc.constantFrom<Path>("bootLost", "stopBooting", "exit", "interrupted", "stopRunning", "live"),
  rate: rateArb,
  recovery: fc.boolean(),
  gaps: fc.tuple(gapArb, gapArb, gapArb),
  lost: fc.constantFrom<Outcome>({ type: "BootFailed" }, { type: "NodeLost" }, { type: "Unavailable" }),
  exited: fc.constantFrom<Outcome>({ type: "Succeeded" }, { type: "Failed", exitCode: 2 }, { type: "OOMKilled" }),
  interrupted: fc.constantFrom<Outcome>({ type: "Preempted" }, { type: "NodeLost" })
})

type LifeFields = typeof lifeArb extends fc.Arbitrary<infer A> ? A : never

const lifeOf = ({ path, rate, recovery, gaps, lost, exited, interrupted }: LifeFields): Life => {
  const requestedAt = T0
  const base = attempt({ variant: priced(rate), recovery, requestedAt, bootedAt: undefined, phase: "Provisioning" })
  const [first, second, third] = gaps
  const booted = (now: number): AttemptFacts =>
    now >= requestedAt + first ? { ...base, bootedAt: requestedAt + first, phase: "Running" } : base
  switch (path) {
    case "bootLost": {
      const at = requestedAt + first
      return {
        path,
        requestedAt,
        end: at,
        at: (now) =>
          now >= at ? { ...base, phase: "Ended", outcome: lost, endedAt: at, stoppingAt: at, releasedAt: at } : base
      }
    }
    case "stopBooting": {
      const stop = requestedAt + first
      const release = stop + second
      return {
        path,
        requestedAt,
        end: release,
        at: (now) =>
          now >= release ?
            {
              ...base,
              phase: "Ended",
              outcome: { type: "Stopped" },
              endedAt: release,
              stoppingAt: stop,
              releasedAt: release
            }
            : now >= stop
            ? { ...base, phase: "Terminating", stoppingAt: stop }
            : base
      }
    }
    case "exit": {
      const exit = requestedAt + first + second
      const release = exit + third
      return {
        path,
        requestedAt,
        end: release,
        at: (now) =>
          now >= exit
            ? { ...booted(now), phase: "Ended", outcome: exited, endedAt: exit, stoppingAt: exit, releasedAt: release }
            : booted(now)
      }
    }
    case "interrupted": {
      const at = requestedAt + first + second
      return {
        path,
        requestedAt,
        end: at,
        at: (now) =>
          now >= at
            ? { ...booted(now), phase: "Ended", outcome: interrupted, endedAt: at, stoppingAt: at, releasedAt: at }
            : booted(now)
      }
    }
    case "stopRunning": {
      const stop = requestedAt + first + second
      const release = stop + third
      return {
        path,
        requestedAt,
        end: release,
        at: (now) =>
          now >= release ?
            {
              ...booted(now),
              phase: "Ended",
              outcome: { type: "Stopped" },
              endedAt: release,
              stoppingAt: stop,
              releasedAt: release
            }
            : now >= stop
            ? { ...booted(now), phase: "Terminating", stoppingAt: stop }
            : booted(now)
      }
    }
    case "live":
      return { path, requestedAt, end: requestedAt + first + second, at: booted }
  }
}

const nowArb = (facts: AttemptFacts) =>
  fc.integer({
    min: facts.requestedAt - minute,
    max: (facts.releasedAt ?? facts.stoppingAt ?? facts.bootedAt ?? facts.requestedAt) + 30 * minute
  })

describe("metering properties", () => {
  it("every segment's charge only grows with time, and the meter turns final once and stays final", () => {
    fc.assert(
      fc.property(
        factsArb,
        ruleArb,
        fc.integer({ min: -minute, max: 6 * 60 * minute }),
        fc.integer({ min: 1, max: 6 * 60 * minute }),
        (facts, rule, offset, step) => {
          const t1 = facts.requestedAt + offset
          const t2 = t1 + step
          const early = meterAttempt(facts, rule, t1)
          const late = meterAttempt(facts, rule, t2)
          for (const segment of segmentNames) {
            expect(early.charges[segment] >= 0n).toBe(true)
            expect(late.charges[segment] >= early.charges[segment]).toBe(true)
          }
          expect(late.total >= early.total).toBe(true)
          expect(late.exposure >= early.exposure).toBe(true)
          if (early.final) {
            expect(late.final).toBe(true)
            expect(late.charges).toEqual(early.charges)
          }
        }
      ),
      { numRuns: 5_000 }
    )
  })

  it("the charge is the rule applied to the charged time: increments, minimum, covered time, rounded up once", () => {
    fc.assert(
      fc.property(
        factsArb.chain((facts) => fc.tuple(fc.constant(facts), ruleArb, nowArb(facts))),
        ([facts, rule, now]) => {
          const meter = meterAttempt(facts, rule, now)
          const want = expected(facts, rule, now)
          const rate = facts.variant.rateMicroUsdPerHour
          const sum = segmentNames.reduce((total, segment) => total + meter.charges[segment], 0n)
          expect(meter.final).toBe(want.final)
          expect(sum).toBe(meter.total)
          expect(meter.total).toBe(ceilCharge(rate, want.billedMs))
          expect(meter.exposure).toBe(ceilCharge(rate, want.allMs))
          expect(meter.total <= meter.exposure || (want.final && want.billedMs > want.allMs)).toBe(true)
          // The boot is charged to one segment only, Restore for a recovery run; the boot segment never holds more than
          // the boot's time.
          const bootSegment = facts.recovery ? "Restore" : "Boot"
          expect(meter.charges[facts.recovery ? "Boot" : "Restore"]).toBe(0n)
          expect(meter.charges[bootSegment]).toBe(
            ceilCharge(rate, Math.min(want.bootCharged ? want.bootMs : 0, want.billedMs))
          )
          // Running never holds more than the running time; Teardown holds the rest, round-up and minimum included.
          expect(meter.charges.Running <= ceilCharge(rate, want.runMs)).toBe(true)
          const beforeTeardown = (want.bootCharged ? want.bootMs : 0) + want.runMs
          expect(meter.charges[bootSegment] + meter.charges.Running).toBe(
            ceilCharge(rate, Math.min(beforeTeardown, want.billedMs))
          )
          if (want.billedMs <= beforeTeardown) expect(meter.charges.Teardown).toBe(0n)
          // Intervals: one per segment with time, covered as the facts say.
          const lengths = { boot: 0, run: 0, tear: 0 }
          for (const interval of meter.intervals) {
            expect(interval.to > interval.from).toBe(true)
            if (interval.segment === bootSegment) {
              lengths.boot += interval.to - interval.from
              expect(interval.covered).toBe(want.bootCovered)
            } else if (interval.segment === "Running") {
              lengths.run += interval.to - interval.from
              expect(interval.covered).toBe(false)
            } else {
              expect(interval.segment).toBe("Teardown")
              lengths.tear += interval.to - interval.from
              expect(interval.covered).toBe(want.tearCovered)
            }
          }
          expect(lengths).toEqual({ boot: want.bootMs, run: want.runMs, tear: want.tearMs })
        }
      ),
      { numRuns: 10_000 }
    )
  })

  it("while a run lasts, the charge is whole increments and at most the time so far", () => {
    fc.assert(
      fc.property(factsArb, ruleArb, fc.nat(8 * 60 * minute), (facts, rule, offset) => {
        const now = facts.requestedAt + offset
        fc.pre(facts.releasedAt === undefined || now < facts.releasedAt)
        const meter = meterAttempt(facts, rule, now)
        const rate = facts.variant.rateMicroUsdPerHour
        const want = expected(facts, rule, now)
        expect(meter.final).toBe(false)
        expect(want.billedMs % rule.incrementMs).toBe(0)
        expect(meter.total).toBe(chargeFor(rate, want.billedMs))
        expect(meter.total <= meter.exposure).toBe(true)
      }),
      { numRuns: 3_000 }
    )
  })

  it("over a run's life, as its facts arrive, no segment's charge ever shrinks (every capture is ≥ 0)", () => {
    fc.assert(
      fc.property(
        lifeArb,
        ruleArb,
        fc.array(fc.nat(6 * 60 * minute), { minLength: 2, maxLength: 12 }),
        (fields, rule, offsets) => {
          const life = lifeOf(fields)
          const times = [...offsets.map((offset) => life.requestedAt - minute + offset), life.end, life.end + minute]
            .sort((a, b) => a - b)
          let before: AttemptMeter | undefined
          for (const now of times) {
            const facts = life.at(now)
            const meter = meterAttempt(facts, rule, now)
            if (before !== undefined) {
              for (const segment of segmentNames) {
                if (meter.charges[segment] < before.charges[segment]) {
                  throw new Error(
                    `${segment} went from ${before.charges[segment]} to ${meter.charges[segment]} at ${
                      now - life.requestedAt
                    } ms (${life.path})`
                  )
                }
              }
            }
            expect(meter.total).toBe(ceilCharge(facts.variant.rateMicroUsdPerHour, expected(facts, rule, now).billedMs))
            before = meter
          }
          if (life.path !== "live") expect(before?.final).toBe(true)
        }
      ),
      { numRuns: 20_000 }
    )
  })
})

describe("a host lost while the customer's stop tears it down", () => {
  it("keeps the teardown charged: the charge never shrinks once captured", () => {
    const rule = { incrementMs: 1000, minimumMs: 0 }
    const stopping = attempt({ variant: variant("a10-1x-us"), phase: "Terminating", stoppingAt: T0 + 10 * minute })
    const during = meterAttempt(stopping, rule, T0 + 11 * minute)
    const lost = meterAttempt(
      {
        ...stopping,
        phase: "Ended",
        outcome: { type: "NodeLost" },
        endedAt: T0 + 12 * minute,
        releasedAt: T0 + 12 * minute
      },
      rule,
      T0 + 12 * minute
    )
    expect(during.charges.Teardown).toBeGreaterThan(0n)
    expect(lost.charges.Teardown).toBeGreaterThanOrEqual(during.charges.Teardown)
    expect(lost.intervals.find((interval) => interval.segment === "Teardown")?.covered).toBe(false)
  })
})
