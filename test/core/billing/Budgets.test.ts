/**
 * Budgets as billing reads them (src/core/billing/Budgets.ts; docs/billing.md, "Budgets"): UTC periods (month ends,
 * leap years, ISO weeks across a year end), matching by project and labels, usage from the ledger (charges within the
 * period, holds now), rooms, thresholds and the status with its once-per-period thresholds.
 */
import { describe, expect, it } from "vitest"
import {
  type BudgetRule,
  isExceeded,
  matches,
  periodOf,
  roomOf,
  ruleOf,
  thresholdsReached,
  usageOf
} from "../../../src/core/billing/Budgets.ts"
import { Ledger } from "../../../src/core/billing/Ledger.ts"
import { budgetStatusOf } from "../../../src/kinds/budget/BudgetStatus.ts"

const at = (text: string): number => Date.parse(text)

const rule = (fields: Partial<BudgetRule> = {}): BudgetRule => ({
  name: "team",
  amountMicro: 100_000_000n,
  period: "Monthly",
  createdAt: at("2026-03-10T08:00:00Z"),
  projects: [],
  labels: {},
  thresholds: [],
  action: "Refuse",
  ...fields
})

describe("periods (UTC)", () => {
  const cases: ReadonlyArray<readonly [BudgetRule["period"], string, string, string | undefined]> = [
    ["Monthly", "2026-01-31T23:59:59.999Z", "2026-01-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z"],
    ["Monthly", "2026-02-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z"],
    ["Monthly", "2028-02-29T12:00:00Z", "2028-02-01T00:00:00.000Z", "2028-03-01T00:00:00.000Z"],
    ["Monthly", "2026-12-31T23:00:00Z", "2026-12-01T00:00:00.000Z", "2027-01-01T00:00:00.000Z"],
    ["Monthly", "2026-04-30T10:00:00Z", "2026-04-01T00:00:00.000Z", "2026-05-01T00:00:00.000Z"],
    ["Daily", "2028-02-29T23:59:59.999Z", "2028-02-29T00:00:00.000Z", "2028-03-01T00:00:00.000Z"],
    ["Daily", "2026-12-31T00:00:00.000Z", "2026-12-31T00:00:00.000Z", "2027-01-01T00:00:00.000Z"],
    // ISO weeks start on Monday: 2026-12-28 is a Monday; week 53 of 2026 runs into 2027.
    ["Weekly", "2026-12-31T15:00:00Z", "2026-12-28T00:00:00.000Z", "2027-01-04T00:00:00.000Z"],
    ["Weekly", "2027-01-03T23:59:59.999Z", "2026-12-28T00:00:00.000Z", "2027-01-04T00:00:00.000Z"],
    ["Weekly", "2027-01-04T00:00:00.000Z", "2027-01-04T00:00:00.000Z", "2027-01-11T00:00:00.000Z"],
    // 2025-12-29 (Monday) begins ISO week 1 of 2026.
    ["Weekly", "2026-01-01T00:00:00.000Z", "2025-12-29T00:00:00.000Z", "2026-01-05T00:00:00.000Z"],
    ["Weekly", "2028-03-01T00:00:00.000Z", "2028-02-28T00:00:00.000Z", "2028-03-06T00:00:00.000Z"],
    ["Total", "2030-06-01T00:00:00.000Z", "2026-03-10T08:00:00Z", undefined]
  ]
  for (const [period, now, start, end] of cases) {
    it(`${period} at ${now}: [${start}, ${end ?? "never"})`, () => {
      const bounds = periodOf(rule({ period }), at(now))
      expect(bounds).toEqual({ start: at(start), end: end === undefined ? undefined : at(end) })
      expect(bounds.start).toBeLessThanOrEqual(at(now))
      if (bounds.end !== undefined) expect(bounds.end).toBeGreaterThan(at(now))
    })
  }
})

describe("matching", () => {
  const owner = { namespace: "ml", labels: { team: "vision", tier: "gpu" } }
  const cases: ReadonlyArray<readonly [string, Partial<BudgetRule>, boolean]> = [
    ["an empty selector matches everything", {}, true],
    ["its project listed", { projects: ["ml", "web"] }, true],
    ["its project not listed", { projects: ["web"] }, false],
    ["every selector label carried", { labels: { team: "vision" } }, true],
    ["all selector labels carried", { labels: { team: "vision", tier: "gpu" } }, true],
    ["a label with another value", { labels: { team: "audio" } }, false],
    ["a label it lacks", { labels: { team: "vision", cost: "center" } }, false],
    ["project and labels both", { projects: ["ml"], labels: { tier: "gpu" } }, true],
    ["project right, labels wrong", { projects: ["ml"], labels: { tier: "cpu" } }, false]
  ]
  for (const [label, fields, expected] of cases) {
    it(label, () => expect(matches(rule(fields), owner)).toBe(expected))
  }

  it("an owner with no labels matches only label-free selectors", () => {
    expect(matches(rule(), { namespace: "x", labels: {} })).toBe(true)
    expect(matches(rule({ labels: { team: "vision" } }), { namespace: "x", labels: {} })).toBe(false)
  })
})

describe("usage", () => {
  const march = periodOf(rule(), at("2026-03-15T00:00:00.000Z"))
  const ledger = () => {
    const ledger = new Ledger()
    ledger.grant("g", at("2026-02-01T00:00:00.000Z"), 1_000_000_000n, "starter")
    // Charged in February (before the period), in March, and at the first instant of April (after it).
    ledger.capture("feb", at("2026-02-28T23:59:59Z"), {
      hold: undefined,
      owner: "a",
      segment: "Running",
      amount: 1_000n
    })
    ledger.capture("mar-1", at("2026-03-01T00:00:00.000Z"), {
      hold: undefined,
      owner: "a",
      segment: "Boot",
      amount: 20_000n
    })
    ledger.capture("mar-2", at("2026-03-20T00:00:00.000Z"), {
      hold: undefined,
      owner: "b",
      segment: "Running",
      amount: 300_000n
    })
    ledger.capture("apr", at("2026-04-01T00:00:00.000Z"), {
      hold: undefined,
      owner: "b",
      segment: "Running",
      amount: 4_000_000n
    })
    ledger.hold("h", at("2026-03-20T00:00:00.000Z"), {
      hold: "h1",
      owner: "a",
      amount: 50_000_000n,
      expiresAt: at("2026-05-01T00:00:00.000Z")
    })
    ledger.capture("from-hold", at("2026-03-21T00:00:00.000Z"), {
      hold: "h1",
      owner: "a",
      segment: "Running",
      amount: 5_000_000n
    })
    ledger.capture("other", at("2026-03-21T00:00:00.000Z"), {
      hold: undefined,
      owner: "c",
      segment: "Running",
      amount: 7n
    })
    return ledger
  }
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, bigint, bigint]> = [
    ["no owners", [], 0n, 0n],
    ["owner a: March charges and its open hold", ["a"], 5_020_000n, 45_000_000n],
    ["owner b: the April charge is outside the period", ["b"], 300_000n, 0n],
    ["a and b", ["a", "b"], 5_320_000n, 45_000_000n],
    ["an owner never seen", ["z"], 0n, 0n]
  ]
  for (const [label, owners, spent, held] of cases) {
    it(label, () => expect(usageOf(ledger(), owners, march)).toEqual({ spent, held }))
  }

  it("a Total period counts from the Budget's creation", () => {
    const total = periodOf(
      rule({ period: "Total", createdAt: at("2026-03-01T00:00:00.000Z") }),
      at("2030-01-01T00:00:00.000Z")
    )
    expect(usageOf(ledger(), ["a", "b"], total).spent).toBe(20_000n + 300_000n + 4_000_000n + 5_000_000n)
  })
})

describe("rooms, exceeding and thresholds", () => {
  const cases: ReadonlyArray<
    {
      readonly label: string
      readonly fields: Partial<BudgetRule>
      readonly spent: bigint
      readonly held: bigint
      readonly room: bigint | undefined
      readonly exceeded: boolean
      readonly reached: ReadonlyArray<number>
    }
  > = [
    {
      label: "nothing used",
      fields: { thresholds: [50, 80, 100] },
      spent: 0n,
      held: 0n,
      room: 100_000_000n,
      exceeded: false,
      reached: []
    },
    {
      label: "held counts for the room, not for thresholds",
      fields: { thresholds: [50] },
      spent: 10_000_000n,
      held: 60_000_000n,
      room: 30_000_000n,
      exceeded: false,
      reached: []
    },
    {
      label: "exactly at 50 %",
      fields: { thresholds: [50, 80] },
      spent: 50_000_000n,
      held: 0n,
      room: 50_000_000n,
      exceeded: false,
      reached: [50]
    },
    {
      label: "one micro-USD short of 80 %",
      fields: { thresholds: [50, 80] },
      spent: 79_999_999n,
      held: 0n,
      room: 20_000_001n,
      exceeded: false,
      reached: [50]
    },
    {
      label: "spent plus held reaches the amount",
      fields: { thresholds: [100] },
      spent: 90_000_000n,
      held: 10_000_000n,
      room: 0n,
      exceeded: true,
      reached: []
    },
    {
      label: "past the amount: a negative room",
      fields: { thresholds: [80, 100] },
      spent: 120_000_000n,
      held: 0n,
      room: -20_000_000n,
      exceeded: true,
      reached: [80, 100]
    },
    {
      label: "Notify limits nothing",
      fields: { action: "Notify", thresholds: [100] },
      spent: 120_000_000n,
      held: 0n,
      room: undefined,
      exceeded: true,
      reached: [100]
    },
    {
      label: "an amount of 0 freezes spending; nothing spent crosses nothing",
      fields: { amountMicro: 0n, thresholds: [1] },
      spent: 0n,
      held: 0n,
      room: 0n,
      exceeded: true,
      reached: []
    }
  ]
  for (const row of cases) {
    it(row.label, () => {
      const budget = rule(row.fields)
      const usage = { spent: row.spent, held: row.held }
      expect(roomOf(budget, usage)?.room).toBe(row.room)
      expect(isExceeded(budget, usage)).toBe(row.exceeded)
      expect(thresholdsReached(budget, usage)).toEqual(row.reached)
    })
  }
})

describe("the status", () => {
  const budget = rule({ thresholds: [50, 80], amountMicro: 10_000_000n })
  const now = at("2026-03-15T12:00:00Z")
  const period = periodOf(budget, now)

  it("announces each threshold once per period, keeps Exceeded's transition time, and starts over in a new period", () => {
    const first = budgetStatusOf({
      rule: budget,
      usage: { spent: 6_000_000n, held: 0n },
      period,
      previous: undefined,
      generation: 1,
      now
    })
    expect(first.crossed).toEqual([50])
    expect(first.status).toMatchObject({
      spentUSD: "6",
      heldUSD: "0",
      periodStart: "2026-03-01T00:00:00.000Z",
      periodEnd: "2026-04-01T00:00:00.000Z",
      thresholdsCrossed: [50],
      observedGeneration: 1
    })
    const again = budgetStatusOf({
      rule: budget,
      usage: { spent: 6_500_000n, held: 0n },
      period,
      previous: first.status,
      generation: 1,
      now: now + 1_000
    })
    expect(again.crossed).toEqual([])
    const both = budgetStatusOf({
      rule: budget,
      usage: { spent: 8_000_000n, held: 2_000_000n },
      period,
      previous: again.status,
      generation: 2,
      now: now + 2_000
    })
    expect(both.crossed).toEqual([80])
    expect(both.status["thresholdsCrossed"]).toEqual([50, 80])
    expect(both.status["conditions"]).toEqual([{
      type: "Exceeded",
      status: "True",
      reason: "AmountReached",
      lastTransitionTime: "2026-03-15T12:00:02.000Z",
      observedGeneration: 2,
      message:
        "8 USD spent and 2 USD held of 10 USD this period; new runs of matching work are refused (BudgetExceeded)."
    }])
    const still = budgetStatusOf({
      rule: budget,
      usage: { spent: 9_000_000n, held: 2_000_000n },
      period,
      previous: both.status,
      generation: 2,
      now: now + 60_000
    })
    expect((still.status["conditions"] as any)[0].lastTransitionTime).toBe("2026-03-15T12:00:02.000Z")
    const april = at("2026-04-01T00:00:00.000Z")
    const rolled = budgetStatusOf({
      rule: budget,
      usage: { spent: 5_000_000n, held: 0n },
      period: periodOf(budget, april),
      previous: still.status,
      generation: 2,
      now: april
    })
    expect(rolled.crossed).toEqual([50])
    expect(rolled.status).toMatchObject({ periodStart: "2026-04-01T00:00:00.000Z", thresholdsCrossed: [50] })
  })

  it("reads a stored Budget's spec; one it cannot read is undefined", () => {
    const object = {
      metadata: { name: "team", creationTimestamp: "2026-03-10T08:00:00Z" },
      spec: {
        amountUSD: "12.5",
        period: "Weekly",
        selector: { projects: ["ml"], labels: { team: "vision" } },
        thresholds: [80, 50],
        action: "Notify"
      }
    }
    expect(ruleOf(object)).toEqual({
      name: "team",
      amountMicro: 12_500_000n,
      period: "Weekly",
      createdAt: at("2026-03-10T08:00:00Z"),
      projects: ["ml"],
      labels: { team: "vision" },
      thresholds: [50, 80],
      action: "Notify"
    })
    expect(ruleOf({ metadata: { name: "x" }, spec: { amountUSD: "1", period: "Daily" } })).toMatchObject({
      action: "Refuse",
      projects: [],
      labels: {},
      thresholds: []
    })
    expect(ruleOf({ metadata: { name: "x" }, spec: { amountUSD: "1e3", period: "Daily" } })).toBeUndefined()
    expect(ruleOf({ metadata: { name: "x" }, spec: { amountUSD: "1", period: "Yearly" } })).toBeUndefined()
  })
})
