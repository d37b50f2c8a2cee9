/**
 * Billing rules, one per test (docs/billing.md): the first hold, what blocks a launch (balance, Budget, the object's
 * cap, arrears), captures per billing increment, hold top-ups and the funded edge, stops for money, the final charge
 * and release, and the display copy; then the Job controller's side: Funded, stopByTime, checkpoint then stop, and
 * the funding events.
 */
import { describe, expect, it } from "vitest"
import {
  type BillingSubject,
  costStatusOf,
  type Funding,
  holdIdOf,
  holdLaunch,
  holdWindowMs,
  initialHoldOf,
  settle,
  stopLeadMs
} from "../../../src/core/billing/Billing.ts"
import { Ledger } from "../../../src/core/billing/Ledger.ts"
import { chargeFor, type Pricebook } from "../../../src/core/billing/Pricebook.ts"
import type { AttemptFacts } from "../../../src/core/capacity/Capacity.ts"
import { step } from "../../../src/kinds/job/JobMachine.ts"
import { type JobStatusType } from "../../../src/kinds/job/JobSchema.ts"
import { attempt, ended, hour, jobSpec, market, minute, observation, rankingOf, T0, variant } from "../Fixtures.ts"

/** Per-minute billing with a two-minute minimum, for the synthetic catalog's provider "test". */
const pricebook: Pricebook = {
  version: "test-1",
  catalogVersion: "test",
  effectiveFrom: "2026-01-01T00:00:00Z",
  byProvider: { test: { incrementMs: minute, minimumMs: 2 * minute } },
  byOffering: {},
  fallback: { incrementMs: 1000, minimumMs: 0 }
}

const a10 = variant("a10-1x-us") // 0.75 USD/h
const usd = (micro: bigint) => micro
const owner = "uid-1"

const funded = (amount: bigint): Ledger => {
  const ledger = new Ledger()
  ledger.grant("grant/starter", T0 - hour, amount, "starter")
  return ledger
}

const subject = (attempts: ReadonlyArray<AttemptFacts>, fields: Partial<BillingSubject> = {}): BillingSubject => ({
  owner,
  capMicro: undefined,
  attempts,
  nextVariant: a10,
  hasRun: attempts.length > 0,
  rooms: [],
  ...fields
})

/** A run launched at T0 (hold placed then), booted at T0 + 2m. */
const launched = (ledger: Ledger, fields: Partial<AttemptFacts> = {}): AttemptFacts => {
  const facts = attempt({ variant: a10, ...fields })
  expect(holdLaunch(ledger, pricebook, owner, facts.name, a10, facts.requestedAt)).toBe(true)
  return facts
}

const credits = (ledger: Ledger) => ledger.available + ledger.held + ledger.charged - ledger.arrears

describe("holds", () => {
  it("a first hold is one window at the run's rate, at least the minimum charge", () => {
    expect(initialHoldOf(pricebook, a10)).toBe(chargeFor(a10.rateMicroUsdPerHour, holdWindowMs))
    const tiny = { ...a10, rateMicroUsdPerHour: 1n }
    expect(initialHoldOf({ ...pricebook, byProvider: { test: { incrementMs: minute, minimumMs: 2 * hour } } }, tiny))
      .toBe(2n)
  })

  it("the controller may launch what the available balance pays for; the rest waits with InsufficientCredits", () => {
    const ledger = funded(usd(1_000_000n))
    const settled = settle(ledger, pricebook, subject([]), T0)
    expect(settled.funding.launchBudget).toBe(1_000_000n)
    expect(settled.funding.blocked).toBeUndefined()
    const poor = settle(funded(usd(500_000n)), pricebook, subject([]), T0)
    expect(poor.funding.blocked).toMatchObject({ code: "InsufficientCredits" })
    expect(poor.funding.blocked?.message).toContain("0.75 USD")
    expect(poor.funding.blocked?.message).toContain("0.5 USD")
    expect(poor.funding.stop).toBeUndefined()
  })

  it("a Budget's room and the object's own cap bound new holds (BudgetExceeded with amounts)", () => {
    const ledger = funded(usd(100_000_000n))
    const budget = settle(
      ledger,
      pricebook,
      subject([], { rooms: [{ code: "BudgetExceeded", name: "team", room: 300_000n }] }),
      T0
    )
    expect(budget.funding.launchBudget).toBe(300_000n)
    expect(budget.funding.blocked).toMatchObject({ code: "BudgetExceeded" })
    expect(budget.funding.blocked?.message).toContain("Budget team has 0.3 USD")
    const capped = settle(ledger, pricebook, subject([], { capMicro: 400_000n }), T0)
    expect(capped.funding.launchBudget).toBe(400_000n)
    expect(capped.funding.blocked?.code).toBe("BudgetExceeded")
    expect(capped.funding.blocked?.fix).toContain("maxCostUSD")
  })

  it("arrears stop every new launch (ArrearsOutstanding) until credits pay them", () => {
    const ledger = funded(usd(100_000n))
    ledger.capture("c", T0, { hold: undefined, owner: "other", segment: "Running", amount: 300_000n })
    expect(ledger.arrears).toBe(200_000n)
    const settled = settle(ledger, pricebook, subject([]), T0)
    expect(settled.funding.launchBudget).toBe(0n)
    expect(settled.funding.blocked).toMatchObject({ code: "ArrearsOutstanding" })
    ledger.grant("grant/topup", T0, 5_000_000n, "topup")
    expect(ledger.arrears).toBe(0n)
    expect(settle(ledger, pricebook, subject([]), T0).funding.blocked).toBeUndefined()
  })
})

describe("captures and top-ups", () => {
  it("captures whole increments while the run lasts, and tops the hold up to a window ahead", () => {
    const ledger = funded(usd(10_000_000n))
    const run = launched(ledger)
    const hold = holdIdOf(owner, run.name)
    // 2m boot + 30.5m running: 32 whole minutes are charged, the half minute waits for the next increment.
    const at = T0 + 32 * minute + 30_000
    const settled = settle(ledger, pricebook, subject([run]), at)
    expect(ledger.chargesOn(hold).total).toBe(chargeFor(a10.rateMicroUsdPerHour, 32 * minute))
    expect(ledger.chargesOn(hold).bySegment).toMatchObject({
      Boot: chargeFor(a10.rateMicroUsdPerHour, 2 * minute),
      Restore: 0n
    })
    // The hold pays a window ahead of what the run accrued.
    expect(settled.fundedUntil).toBe(at + holdWindowMs)
    expect(settled.funding.stop).toBeUndefined()
    expect(credits(ledger)).toBe(ledger.credits)
  })

  it("a live run whose launch hold was lost (the ledger rebuilt without it) is held again and billed in full", () => {
    const ledger = funded(usd(10_000_000n))
    // The launch hold was never stored: the run lives on with no hold at all.
    const run = attempt({ variant: a10 })
    const hold = holdIdOf(owner, run.name)
    const at = T0 + 32 * minute + 30_000
    settle(ledger, pricebook, subject([run]), at)
    expect(ledger.holds.get(hold)?.state).toBe("Open")
    expect(ledger.chargesOn(hold).total).toBe(chargeFor(a10.rateMicroUsdPerHour, 32 * minute))
    // A run released before anything billed it is history (a restart replays such facts): nothing is held for it.
    const old = attempt({ variant: a10, name: "old-run", releasedAt: T0 })
    settle(ledger, pricebook, subject([old]), at)
    expect(ledger.holds.has(holdIdOf(owner, "old-run"))).toBe(false)
  })

  it("repeating a settle at the same instant posts nothing", () => {
    const ledger = funded(usd(10_000_000n))
    const run = launched(ledger)
    settle(ledger, pricebook, subject([run]), T0 + 40 * minute)
    const postings = ledger.postings.length
    settle(ledger, pricebook, subject([run]), T0 + 40 * minute)
    expect(ledger.postings.length).toBe(postings)
  })

  it("a hold that cannot be topped up and pays for less than the lead stops the Job by its edge (FundingLost)", () => {
    const ledger = funded(initialHoldOf(pricebook, a10))
    const run = launched(ledger)
    const at = T0 + 55 * minute
    const settled = settle(ledger, pricebook, subject([run]), at)
    expect(settled.funding.stop?.reason).toBe("FundingLost")
    expect(settled.funding.stop!.at - at).toBeLessThanOrEqual(stopLeadMs)
    expect(settled.funding.stop!.at).toBe(T0 + hour)
    expect(settled.funding.stop?.message).toContain("available balance is 0 USD")
  })

  it("the object's cap binding the top-up stops it as MaxCostReached", () => {
    const hold = initialHoldOf(pricebook, a10)
    const ledger = funded(100n * hold)
    const run = launched(ledger)
    const settled = settle(ledger, pricebook, subject([run], { capMicro: hold }), T0 + 55 * minute)
    expect(settled.funding.stop?.reason).toBe("MaxCostReached")
  })

  it("nothing running and the cap spent: MaxCostReached at once; raising the cap lifts it", () => {
    const hold = initialHoldOf(pricebook, a10)
    const ledger = funded(100n * hold)
    ledger.capture("c", T0, { hold: undefined, owner, segment: "Running", amount: hold })
    expect(settle(ledger, pricebook, subject([], { capMicro: hold, hasRun: true }), T0).funding.stop).toMatchObject({
      reason: "MaxCostReached",
      at: T0
    })
    expect(settle(ledger, pricebook, subject([], { capMicro: 3n * hold, hasRun: true }), T0).funding.stop)
      .toBeUndefined()
  })

  it("a Budget's room shrinks as one settle tops up several runs of the Job (table)", () => {
    // Two runs of one Job, each needing the same top-up at T0 + 55m; the room is what the caller read before settle.
    const at = T0 + 55 * minute
    const twoRuns = (ledger: Ledger) => [launched(ledger, { index: 0 }), launched(ledger, { index: 1 })]
    const heldNewly = (ledger: Ledger, rooms: BillingSubject["rooms"]) => {
      const runs = twoRuns(ledger)
      const before = ledger.postings.length
      const settled = settle(ledger, pricebook, subject(runs, { rooms }), at)
      const held = ledger.postings.slice(before).filter((posting) => posting.kind === "Hold").reduce(
        (sum, posting) => sum + posting.amount,
        0n
      )
      return { held, launchBudget: settled.funding.launchBudget }
    }
    const each = heldNewly(funded(usd(100_000_000n)), []).held / 2n
    expect(each).toBeGreaterThan(500_000n)
    const cases: ReadonlyArray<{ readonly room: bigint; readonly held: bigint; readonly launchBudget: bigint }> = [
      { room: 10_000_000n, held: 2n * each, launchBudget: 10_000_000n - 2n * each },
      { room: each + 100_000n, held: each + 100_000n, launchBudget: 0n },
      { room: each, held: each, launchBudget: 0n },
      { room: 300_000n, held: 300_000n, launchBudget: 0n },
      { room: 0n, held: 0n, launchBudget: 0n }
    ]
    for (const row of cases) {
      const outcome = heldNewly(funded(usd(100_000_000n)), [{ code: "BudgetExceeded", name: "team", room: row.room }])
      expect({ room: row.room, ...outcome }).toEqual({ room: row.room, held: row.held, launchBudget: row.launchBudget })
    }
  })

  it("a Job that ran stays stopped for money (FundingLost); one that never ran only waits", () => {
    const ledger = funded(1n)
    expect(settle(ledger, pricebook, subject([], { hasRun: true }), T0).funding.stop?.reason).toBe("FundingLost")
    expect(settle(ledger, pricebook, subject([], { hasRun: false }), T0).funding.stop).toBeUndefined()
  })
})

describe("the final charge", () => {
  it("adds the partial increment and the minimum to Teardown, releases the hold, and cost is final", () => {
    const ledger = funded(usd(10_000_000n))
    const run = launched(ledger)
    // Booted T0+2m, stopped T0+2m30s, released T0+2m40s: 160 s charged, rounded up to 3 whole minutes.
    const stopped = {
      ...run,
      phase: "Ended" as const,
      outcome: { type: "Stopped" as const },
      stoppingAt: T0 + 150_000,
      endedAt: T0 + 160_000,
      releasedAt: T0 + 160_000
    }
    const settled = settle(ledger, pricebook, subject([stopped]), T0 + 200_000)
    const hold = holdIdOf(owner, run.name)
    const rate = a10.rateMicroUsdPerHour
    expect(ledger.chargesOn(hold).total).toBe(chargeFor(rate, 3 * minute))
    expect(ledger.chargesOn(hold).bySegment.Teardown).toBe(chargeFor(rate, 3 * minute) - chargeFor(rate, 150_000))
    expect(ledger.holds.get(hold)?.state).toBe("Released")
    expect(ledger.held).toBe(0n)
    const cost = costStatusOf(ledger, owner, settled, { capMicro: undefined, final: true })
    expect(cost).toMatchObject({
      final: true,
      heldUSD: "0",
      rateUSDPerHour: "0",
      bySegment: { bootSeconds: 120, runningSeconds: 30, teardownSeconds: 10 }
    })
    // The display copy is the ledger's: segment USD sum to totalUSD.
    const segments = ["bootUSD", "runningUSD", "teardownUSD"].map((field) =>
      BigInt(Math.round(Number(cost.bySegment[field]) * 1e6))
    )
    expect(segments.reduce((a, b) => a + b, 0n)).toBe(BigInt(Math.round(Number(cost.totalUSD) * 1e6)))
  })

  it("a boot the provider failed is covered: nothing charged, coveredByNodus Boot", () => {
    const ledger = funded(usd(10_000_000n))
    const run = launched(ledger, { bootedAt: undefined, phase: "Provisioning" })
    const failed = ended({ type: "BootFailed" }, T0 + 4 * minute, { name: run.name, variant: a10, bootedAt: undefined })
    const settled = settle(ledger, pricebook, subject([failed]), T0 + 5 * minute)
    expect(ledger.chargesFor(owner).total).toBe(0n)
    expect(ledger.holds.get(holdIdOf(owner, run.name))?.state).toBe("Released")
    const cost = costStatusOf(ledger, owner, settled, { capMicro: undefined, final: false })
    expect(cost.bySegment).toEqual({ bootCoveredSeconds: 240, coveredByNodus: ["Boot"] })
  })

  it("a charge beyond the hold and the balance is posted as arrears", () => {
    const hold = initialHoldOf(pricebook, a10)
    const ledger = funded(hold)
    const run = launched(ledger)
    const done = ended({ type: "Succeeded" }, T0 + 3 * hour, { ...run, releasedAt: T0 + 3 * hour })
    const settled = settle(ledger, pricebook, subject([done]), T0 + 3 * hour)
    expect(ledger.chargesFor(owner).total).toBe(chargeFor(a10.rateMicroUsdPerHour, 3 * hour))
    expect(settled.arrearsPosted).toBe(chargeFor(a10.rateMicroUsdPerHour, 3 * hour) - hold)
    expect(ledger.arrears).toBe(settled.arrearsPosted)
    expect(credits(ledger)).toBe(ledger.credits)
  })
})

describe("the Job controller under funding", () => {
  const spec = jobSpec({ resources: { gpu: { type: ["A10"] } }, completions: 3, parallelism: 3 })
  const hold = initialHoldOf(pricebook, a10)
  const funding = (fields: Partial<Funding> = {}): Funding => ({
    launchBudget: 100n * hold,
    initialHold: () => hold,
    blocked: undefined,
    stop: undefined,
    ...fields
  })
  const run = (status: JobStatusType, attempts: ReadonlyArray<AttemptFacts>, money: Funding, now = T0) =>
    step(observation(spec, status, attempts), { now, market: market(), ranking: rankingOf(spec), funding: money })

  it("launches only what the launch budget pays for, and shows Funded False with the blocking code", () => {
    const result = run(
      {},
      [],
      funding({ launchBudget: 2n * hold, blocked: { code: "InsufficientCredits", message: "short", fix: "top up" } })
    )
    expect(result.actions.filter((action) => action._tag === "Launch")).toHaveLength(2)
    expect(result.waitingForFunds).toBe(true)
    expect(result.status.conditions?.find((condition) => condition.type === "Funded")).toMatchObject({
      status: "False",
      reason: "InsufficientCredits"
    })
    const none = run(
      {},
      [],
      funding({ launchBudget: 0n, blocked: { code: "InsufficientCredits", message: "short", fix: "top up" } })
    )
    expect(none.status.phase).toBe("Pending")
    expect(none.status.conditions?.find((condition) => condition.type === "Scheduled")).toMatchObject({
      status: "False",
      reason: "Unfunded"
    })
  })

  it("funding lost: Funded False, stopByTime, checkpoint first, job.funding_lost once", () => {
    const running = attempt({ variant: a10 })
    const stop = { reason: "FundingLost" as const, at: T0 + 8 * minute, message: "Funds held pay until then." }
    const first = run({ phase: "Running" }, [running], funding({ stop }))
    expect(first.status).toMatchObject({
      phase: "Suspending",
      reason: "FundingLost",
      stopByTime: "2026-03-01T00:08:00.000Z"
    })
    expect(first.actions.map((action) => action._tag)).toEqual(["Checkpoint"])
    expect(first.events.map((event) => event.type)).toContain("job.funding_lost")
    expect(first.wakeAt).toBe(stop.at)
    const again = run(first.status, [running], funding({ stop }), T0 + minute)
    expect(again.events.map((event) => event.type)).not.toContain("job.funding_lost")
  })

  it("at stopByTime a run still saving stops without its checkpoint; then Suspended", () => {
    const stop = { reason: "FundingLost" as const, at: T0 + 8 * minute, message: "Funds held pay until then." }
    const saving = attempt({ variant: a10, suspend: { episode: T0, state: "Pending", failures: 0 } })
    const first = run({ phase: "Running" }, [saving], funding({ stop }))
    const late = run(first.status, [saving], funding({ stop }), stop.at)
    expect(late.actions.map((action) => action._tag)).toEqual(["Stop"])
    const gone = ended({ type: "Stopped" }, stop.at + minute, { variant: a10 })
    const suspended = run(late.status, [gone], funding({ stop: { ...stop, at: stop.at + minute } }), stop.at + minute)
    expect(suspended.status).toMatchObject({ phase: "Suspended", reason: "FundingLost" })
    expect(suspended.status.conditions?.find((condition) => condition.type === "Suspended")).toMatchObject({
      status: "True",
      reason: "FundingLost"
    })
  })

  it("funds back: job.funding_restored, Funded True, suspended time counted, and it launches again", () => {
    const stop = { reason: "FundingLost" as const, at: T0, message: "out" }
    const gone = ended({ type: "Stopped" }, T0, { variant: a10 })
    const suspended = run({ phase: "Running" }, [gone], funding({ stop }))
    expect(suspended.status.phase).toBe("Suspended")
    const resumed = run(suspended.status, [gone], funding(), T0 + 2 * hour)
    expect(resumed.events.map((event) => event.type)).toContain("job.funding_restored")
    expect(resumed.status.conditions?.find((condition) => condition.type === "Funded")).toMatchObject({
      status: "True"
    })
    expect(resumed.status.stopByTime).toBeUndefined()
    expect(resumed.status.suspendedDuration).toBe("2h")
    expect(resumed.actions.some((action) => action._tag === "Launch")).toBe(true)
  })

  it("maxCostUSD reached suspends with reason MaxCostReached and job.max_cost_reached", () => {
    const running = attempt({ variant: a10 })
    const result = run(
      { phase: "Running" },
      [running],
      funding({ stop: { reason: "MaxCostReached", at: T0 + 5 * minute, message: "cap" } })
    )
    expect(result.status.reason).toBe("MaxCostReached")
    expect(result.events.map((event) => event.type)).toContain("job.max_cost_reached")
    expect(result.status.conditions?.find((condition) => condition.type === "Funded")).toMatchObject({
      status: "False",
      reason: "MaxCostReached"
    })
  })
})
