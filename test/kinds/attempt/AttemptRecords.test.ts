// Attempt objects from a driver's facts (src/kinds/attempt/AttemptRecords.ts): the phase of every outcome, the status
// fields, and the facts a restarted server reads back.
import { assert, describe, it } from "@effect/vitest"
import type { AttemptFacts, Outcome } from "../../../src/core/capacity/Capacity.ts"
import type { Offering, Variant } from "../../../src/core/capacity/Offering.ts"
import { attemptStatusOf, factsFromAttempt } from "../../../src/kinds/attempt/AttemptRecords.ts"

const offering = {
  id: "cpu-4x-16gb-us-x",
  regionClass: "us",
  onDemandMicroUsdPerHour: 200_000n,
  interruptibleMicroUsdPerHour: undefined
} as unknown as Offering
const variant: Variant = { offering, interruptible: false, rateMicroUsdPerHour: 200_000n }
const t0 = Date.UTC(2026, 0, 1)

const facts = (overrides: Partial<AttemptFacts> = {}): AttemptFacts => ({
  name: "train-0-2",
  index: 0,
  number: 2,
  variant,
  warmReuse: false,
  recovery: false,
  restoreFromSeq: undefined,
  requestedAt: t0,
  bootedAt: undefined,
  endedAt: undefined,
  phase: "Provisioning",
  outcome: undefined,
  checkpoint: undefined,
  checkpointFailures: 0,
  suspend: undefined,
  progressUnits: undefined,
  stoppingAt: undefined,
  releasedAt: undefined,
  ...overrides
})

const ended = (outcome: Outcome) => facts({ phase: "Ended", outcome, bootedAt: t0 + 60_000, endedAt: t0 + 600_000 })

describe("AttemptRecords", () => {
  it("maps every outcome onto the Attempt kind's phases", () => {
    const rows: ReadonlyArray<readonly [AttemptFacts, string, string | undefined, number | undefined]> = [
      [facts(), "Provisioning", undefined, undefined],
      [facts({ phase: "Running", bootedAt: t0 }), "Running", undefined, undefined],
      [facts({ phase: "Terminating", bootedAt: t0 }), "Terminating", undefined, undefined],
      [ended({ type: "Succeeded" }), "Succeeded", "Completed", 0],
      [ended({ type: "Failed", exitCode: 3 }), "Failed", "Error", 3],
      [ended({ type: "OOMKilled" }), "Failed", "OOMKilled", 137],
      [ended({ type: "BootFailed" }), "Failed", "BootFailed", undefined],
      [ended({ type: "Preempted" }), "Interrupted", "Preempted", undefined],
      [ended({ type: "NodeLost" }), "Interrupted", "NodeLost", undefined],
      [ended({ type: "Stopped" }), "Interrupted", "Stopped", undefined]
    ]
    for (const [input, phase, reason, exitCode] of rows) {
      const status = attemptStatusOf(input, undefined)
      assert.deepStrictEqual(
        [status["phase"], status["reason"], status["exitCode"]],
        [phase, reason, exitCode],
        JSON.stringify(input.outcome)
      )
    }
  })

  it("carries where it ran, when, and the placement explanation", () => {
    const status = attemptStatusOf(ended({ type: "Succeeded" }), { why: "cheapest" } as never)
    assert.strictEqual(status["offering"], "cpu-4x-16gb-us-x")
    assert.strictEqual(status["regionClass"], "us")
    assert.strictEqual(status["interruptible"], false)
    assert.strictEqual(status["rateUSDPerHour"], "0.2")
    assert.strictEqual(status["startTime"], new Date(t0).toISOString())
    assert.strictEqual(status["endTime"], new Date(t0 + 600_000).toISOString())
    assert.deepStrictEqual(status["placement"], { why: "cheapest" })
    assert.strictEqual((status["conditions"] as any)[0].lastTransitionTime, new Date(t0 + 60_000).toISOString())
  })

  it("reads back the latest checkpoint a run saved, ended or live: a restarted server's replacement restores it", () => {
    const object = (input: AttemptFacts) => ({
      metadata: { name: input.name },
      spec: { index: input.index, epoch: input.number },
      status: attemptStatusOf(input, undefined)
    })
    const variantOf = () => variant
    const checkpoint = { seq: 3, sizeBytes: 159, at: t0 + 120_000 }
    const stopped = factsFromAttempt(object({ ...ended({ type: "Stopped" }), checkpoint }), variantOf, t0 + 3_600_000)
    assert.deepStrictEqual(stopped?.checkpoint, checkpoint)
    const live = factsFromAttempt(
      object(facts({ phase: "Running", bootedAt: t0, checkpoint })),
      variantOf,
      t0 + 3_600_000
    )
    assert.deepStrictEqual(live?.checkpoint, checkpoint)
    assert.isUndefined(factsFromAttempt(object(facts()), variantOf, t0)?.checkpoint)
  })

  it("reads back what it wrote; a run that was live ends as NodeLost when it was lost, one being stopped as Stopped", () => {
    const object = (input: AttemptFacts) => ({
      metadata: { name: input.name },
      spec: { index: input.index, epoch: input.number },
      status: attemptStatusOf(input, undefined)
    })
    const variantOf = (
      id: string,
      interruptible: boolean
    ) => (id === offering.id && !interruptible ? variant : undefined)
    const now = t0 + 3_600_000
    const failed = factsFromAttempt(object(ended({ type: "Failed", exitCode: 3 })), variantOf, now)
    assert.deepStrictEqual([failed?.number, failed?.outcome, failed?.bootedAt, failed?.endedAt], [
      2,
      { type: "Failed", exitCode: 3 },
      t0 + 60_000,
      t0 + 600_000
    ])
    const running = factsFromAttempt(object(facts({ phase: "Running", bootedAt: t0 })), variantOf, now)
    assert.deepStrictEqual([running?.phase, running?.outcome, running?.endedAt], ["Ended", { type: "NodeLost" }, now])
    const stopping = factsFromAttempt(object(facts({ phase: "Terminating", bootedAt: t0 })), variantOf, now)
    assert.deepStrictEqual(stopping?.outcome, { type: "Stopped" })
    // A replacement after a lost run stays one: its boot is billed as Restore by whoever reads it back, as it was
    // before.
    assert.isFalse(running?.recovery)
    assert.isTrue(
      factsFromAttempt(object(facts({ phase: "Running", bootedAt: t0, recovery: true })), variantOf, now)?.recovery
    )
    assert.isUndefined(
      factsFromAttempt(object(facts({ variant: { ...variant, interruptible: true } })), variantOf, now)
    )
    assert.isUndefined(factsFromAttempt({ metadata: { name: "x" } }, variantOf, now))
  })

  it("a live run is lost when the previous process stopped, but never before its recorded start or boot", () => {
    const object = (input: AttemptFacts) => ({
      metadata: { name: input.name },
      spec: { index: input.index, epoch: input.number },
      status: attemptStatusOf(input, undefined)
    })
    const variantOf = () => variant
    const booted = facts({ phase: "Running", bootedAt: t0 + 60_000 })
    // The clock was saved 5 s before the boot was written: the run ends at its boot, not before it.
    const early = factsFromAttempt(object(booted), variantOf, t0 + 55_000)
    assert.deepStrictEqual([early?.endedAt, early?.stoppingAt, early?.releasedAt], [
      t0 + 60_000,
      t0 + 60_000,
      t0 + 60_000
    ])
    const later = factsFromAttempt(object(booted), variantOf, t0 + 900_000)
    assert.strictEqual(later?.releasedAt, t0 + 900_000)
  })
})
