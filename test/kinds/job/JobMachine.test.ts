/**
 * The Job controller, one rule per test: each row builds what is observed (spec, previous status, attempt facts,
 * market, now) and checks the step's status, actions and events. The rows follow the spec's "States and transitions"
 * table for Job and the documented phase graph (docs/jobs.md).
 */
import { describe, expect, it } from "vitest"
import type { AttemptFacts } from "../../../src/core/capacity/Capacity.ts"
import type { Market } from "../../../src/core/capacity/Placement.ts"
import { type Action } from "../../../src/core/controller/Controller.ts"
import { step } from "../../../src/kinds/job/JobMachine.ts"
import { type JobSpecType, type JobStatusType } from "../../../src/kinds/job/JobSchema.ts"
import { attempt, ended, hour, jobSpec, market, minute, observation, rankingOf, T0 } from "../../core/Fixtures.ts"

const a10 = { resources: { gpu: { type: ["A10"] } } }

const run = (
  spec: JobSpecType,
  options: { status?: JobStatusType; attempts?: ReadonlyArray<AttemptFacts>; now?: number; on?: Market } = {}
) => {
  const on = options.on ?? market()
  return step(observation(spec, options.status ?? {}, options.attempts ?? []), {
    now: options.now ?? T0,
    market: on,
    ranking: rankingOf(spec, on)
  })
}

const launches = (actions: ReadonlyArray<Action>) => actions.filter((action) => action._tag === "Launch")
const tags = (actions: ReadonlyArray<Action>) =>
  actions.map((action) => `${action._tag}${"attempt" in action ? ` ${action.attempt}` : ""}`)
const eventTypes = (result: ReturnType<typeof run>) => result.events.map((event) => event.type ?? event.reason)
const condition = (status: JobStatusType, type: string) => status.conditions?.find((entry) => entry.type === type)

describe("queueing and placement", () => {
  it("launches index 0 on the best variant with capacity and becomes Provisioning", () => {
    const result = run(jobSpec(a10))
    const [launch] = launches(result.actions)
    expect(launch).toMatchObject({
      attempt: "train-0-1",
      index: 0,
      number: 1,
      recovery: false,
      env: { PLATFORM_INDEX: "0", JOB_COMPLETION_INDEX: "0" }
    })
    expect(launch?._tag === "Launch" && launch.variant.offering.id).toBe("a10-1x-us")
    expect(result.status).toMatchObject({ phase: "Provisioning", active: 1, attempts: { current: 1, total: 1 } })
    expect(condition(result.status, "Scheduled")?.status).toBe("True")
    expect(eventTypes(result)).toEqual(["Provisioning"])
  })

  it("waits Pending without capacity, with Scheduled False and a wake-up at queueTimeout", () => {
    const result = run(jobSpec({ ...a10, placement: { queueTimeout: "2h" } }), { on: market({ hosts: 0 }) })
    expect(result.actions).toEqual([])
    expect(result.status.phase).toBe("Pending")
    expect(condition(result.status, "Scheduled")).toMatchObject({ status: "False", reason: "Unschedulable" })
    expect(result.wakeAt).toBe(T0 + 2 * hour)
    expect(result.waitingForCapacity).toBe(true)
  })

  it("fails with CapacityUnavailable once queueTimeout has passed without capacity (spec: queued row)", () => {
    const spec = jobSpec({ ...a10, placement: { queueTimeout: "2h" } })
    const first = run(spec, { on: market({ hosts: 0 }) })
    const early = run(spec, { status: first.status, now: T0 + 2 * hour - 1, on: market({ hosts: 0 }) })
    expect(early.status.phase).toBe("Pending")
    const late = run(spec, { status: first.status, now: T0 + 2 * hour, on: market({ hosts: 0 }) })
    expect(late.status).toMatchObject({ phase: "Failed", reason: "CapacityUnavailable" })
    expect(eventTypes(late)).toContain("job.failed")
  })

  it("waits forever with queueTimeout 0s", () => {
    const spec = jobSpec({ ...a10, placement: { queueTimeout: "0s" } })
    const first = run(spec, { on: market({ hosts: 0 }) })
    const later = run(spec, { status: first.status, now: T0 + 1000 * hour, on: market({ hosts: 0 }) })
    expect(later.status.phase).toBe("Pending")
    expect(later.wakeAt).toBeUndefined()
  })

  it("launches up to parallelism indexes, each with its own PLATFORM_INDEX", () => {
    const result = run(jobSpec({ ...a10, completions: 5, parallelism: 2 }))
    expect(launches(result.actions).map((launch) => launch._tag === "Launch" && launch.env["PLATFORM_INDEX"])).toEqual([
      "0",
      "1"
    ])
  })

  it("launches only as many as the market has hosts", () => {
    const result = run(jobSpec({ ...a10, completions: 5, parallelism: 5 }), { on: market({ hosts: 2 }) })
    expect(launches(result.actions)).toHaveLength(2)
    expect(result.waitingForCapacity).toBe(true)
  })

  it("passes scaledownWindow to the launch so the host is kept warm after the program ends", () => {
    const [launch] = launches(run(jobSpec({ ...a10, scaledownWindow: "5m" })).actions)
    expect(launch?._tag === "Launch" && launch.keepWarmMs).toBe(5 * minute)
  })

  it("freezes the chosen variant's rate in status.placement", () => {
    const result = run(jobSpec(a10))
    expect(result.status.placement).toEqual({
      offering: "a10-1x-us",
      regionClass: "us",
      interruptible: false,
      rateUSDPerHour: "0.75",
      warmReuse: false
    })
  })
})

describe("running and completing", () => {
  it("is Running once an attempt runs; startTime is the first boot, timeoutStartTime the first Provisioning", () => {
    const result = run(jobSpec(a10), { status: { phase: "Provisioning" }, attempts: [attempt()], now: T0 + 3 * minute })
    expect(result.status).toMatchObject({
      phase: "Running",
      active: 1,
      startTime: new Date(T0 + 2 * minute).toISOString(),
      timeoutStartTime: new Date(T0).toISOString()
    })
    expect(result.actions).toEqual([])
  })

  it("succeeds when every index succeeded, with completionTime and job.succeeded", () => {
    const attempts = [ended({ type: "Succeeded" }, T0 + hour)]
    const result = run(jobSpec(a10), { status: { phase: "Running" }, attempts, now: T0 + hour })
    expect(result.status).toMatchObject({
      phase: "Succeeded",
      reason: "Completed",
      succeeded: 1,
      completedIndexes: "0",
      completionTime: new Date(T0 + hour).toISOString()
    })
    expect(condition(result.status, "Complete")?.status).toBe("True")
    expect(eventTypes(result)).toEqual(["job.succeeded"])
  })

  it("writes completedIndexes in ranges and does not rerun a succeeded index", () => {
    const attempts = [0, 1, 2, 4].map((index) =>
      ended({ type: "Succeeded" }, T0 + hour, { index, name: `train-${index}-1` })
    )
    const result = run(jobSpec({ ...a10, completions: 6, parallelism: 6 }), {
      status: { phase: "Running" },
      attempts,
      now: T0 + hour
    })
    expect(result.status.completedIndexes).toBe("0-2,4")
    expect(launches(result.actions).map((launch) => launch._tag === "Launch" && launch.index)).toEqual([3, 5])
  })

  it("is level-triggered: the same observation gives the same step", () => {
    const spec = jobSpec({ ...a10, completions: 3, parallelism: 2 })
    const inputs = {
      status: { phase: "Running" as const },
      attempts: [attempt(), ended({ type: "Succeeded" }, T0 + hour, { index: 1, name: "train-1-1" })],
      now: T0 + hour
    }
    const first = run(spec, inputs)
    const second = run(spec, inputs)
    expect(JSON.stringify({ ...second, actions: tags(second.actions) })).toBe(
      JSON.stringify({ ...first, actions: tags(first.actions) })
    )
  })
})

describe("customer failures (spec: backoffLimit)", () => {
  it("retries a failed index while failures are within backoffLimit", () => {
    const attempts = [ended({ type: "Failed", exitCode: 1 }, T0 + hour)]
    const result = run(jobSpec({ ...a10, backoffLimit: 1 }), { status: { phase: "Running" }, attempts, now: T0 + hour })
    expect(result.status.failed).toBe(1)
    expect(tags(result.actions)).toEqual(["Launch train-0-2"])
  })

  it("fails with BackoffLimitExceeded when failures exceed backoffLimit; OOM counts as a customer failure", () => {
    const attempts = [
      ended({ type: "Failed", exitCode: 1 }, T0 + hour),
      ended({ type: "OOMKilled" }, T0 + 2 * hour, { number: 2, name: "train-0-2" })
    ]
    const result = run(jobSpec({ ...a10, backoffLimit: 1 }), {
      status: { phase: "Running" },
      attempts,
      now: T0 + 2 * hour
    })
    expect(result.status).toMatchObject({ phase: "Failed", reason: "BackoffLimitExceeded", failed: 2 })
    expect(eventTypes(result)).toEqual(["job.failed"])
  })

  it("stops the other indexes' attempts when the Job fails", () => {
    const attempts = [ended({ type: "Failed", exitCode: 2 }, T0 + hour), attempt({ index: 1, name: "train-1-1" })]
    const result = run(jobSpec({ ...a10, completions: 2, parallelism: 2, backoffLimit: 0 }), {
      status: { phase: "Running" },
      attempts,
      now: T0 + hour
    })
    expect(result.status.phase).toBe("Failed")
    expect(tags(result.actions)).toEqual(["Stop train-1-1"])
  })
})

describe("recovery from capacity loss (spec: capacity lost row, Recovery)", () => {
  const h100 = { resources: { gpu: { type: ["H100"], count: 8 } }, placement: { interruptible: "Allow" } }
  // The previous step already reported checkpoint 7.
  const seen = (phase: NonNullable<JobStatusType["phase"]>): JobStatusType => ({
    phase,
    checkpoint: { seq: 7, size: 1024 }
  })
  const preempted = (fields: Partial<AttemptFacts> = {}) =>
    ended({ type: "Preempted" }, T0 + 3 * hour, {
      checkpoint: { seq: 7, sizeBytes: 1024, at: T0 + 2 * hour },
      ...fields
    })

  it("restores the latest checkpoint of the index on a replacement, as Recovering with job.preempted", () => {
    const result = run(jobSpec(h100), { status: seen("Running"), attempts: [preempted()], now: T0 + 3 * hour })
    const [launch] = launches(result.actions)
    expect(launch).toMatchObject({
      attempt: "train-0-2",
      number: 2,
      recovery: true,
      restoreFromSeq: 7,
      resumeFromUnits: undefined
    })
    expect(result.status.phase).toBe("Recovering")
    expect(eventTypes(result)).toEqual(["job.preempted", "Recovering"])
  })

  it("reports job.node_lost for a lost node", () => {
    const result = run(jobSpec(h100), {
      status: seen("Running"),
      attempts: [preempted({ outcome: { type: "NodeLost" } })],
      now: T0 + 3 * hour
    })
    expect(eventTypes(result)[0]).toBe("job.node_lost")
  })

  it("emits job.restored when the replacement runs", () => {
    const attempts = [
      preempted(),
      attempt({ number: 2, name: "train-0-2", recovery: true, restoreFromSeq: 7, bootedAt: T0 + 4 * hour })
    ]
    const result = run(jobSpec(h100), { status: seen("Recovering"), attempts, now: T0 + 4 * hour })
    expect(result.status.phase).toBe("Running")
    expect(result.status.checkpoint?.restoredFromSeq).toBe(7)
    expect(eventTypes(result)).toEqual(["job.restored"])
  })

  it("resumes from the progress cursor with continuity Restartable, and from scratch with Ephemeral", () => {
    const restartable = run(jobSpec({ ...h100, recovery: { continuity: "Restartable" } }), {
      attempts: [preempted({ progressUnits: 5400 })],
      now: T0 + 3 * hour
    })
    expect(launches(restartable.actions)[0]).toMatchObject({
      restoreFromSeq: undefined,
      resumeFromUnits: 5400,
      checkpointIntervalMs: undefined
    })
    const ephemeral = run(jobSpec({ ...h100, recovery: { continuity: "Ephemeral" } }), {
      attempts: [preempted({ progressUnits: 5400 })],
      now: T0 + 3 * hour
    })
    expect(launches(ephemeral.actions)[0]).toMatchObject({ restoreFromSeq: undefined, resumeFromUnits: undefined })
  })

  it("fails instead of recovering with onInterruption Fail", () => {
    const result = run(
      jobSpec({ ...h100, placement: { interruptible: "Prefer" }, recovery: { onInterruption: "Fail" } }),
      { status: seen("Running"), attempts: [preempted()], now: T0 + 3 * hour }
    )
    expect(result.status).toMatchObject({ phase: "Failed", reason: "Preempted" })
    expect(result.actions).toEqual([])
    expect(eventTypes(result)).toEqual(["job.preempted", "job.failed"])
  })

  describe("maxAttempts bounds losses without progress (minProgressDuration)", () => {
    const lost = (number: number, ranMs: number, fields: Partial<AttemptFacts> = {}) =>
      ended({ type: "NodeLost" }, T0 + number * hour + 2 * minute + ranMs, {
        number,
        name: `train-0-${number}`,
        requestedAt: T0 + number * hour,
        bootedAt: T0 + number * hour + 2 * minute,
        ...fields
      })
    const saved = { checkpoint: { seq: 1, sizeBytes: 1, at: T0 + 2 * hour } }
    const recovering = (continuity: string, attempts: ReadonlyArray<AttemptFacts>) =>
      run(jobSpec({ ...h100, recovery: { continuity, maxAttempts: 2, minProgressDuration: "10m" } }), {
        status: { phase: "Recovering" },
        attempts,
        now: T0 + 4 * hour
      })

    it("fails with RecoveryLimitExceeded after more than maxAttempts losses in a row", () => {
      const result = recovering("Checkpointed", [lost(1, minute), lost(2, minute), lost(3, minute)])
      expect(result.status).toMatchObject({ phase: "Failed", reason: "RecoveryLimitExceeded" })
    })

    it("a run past minProgressDuration that saved a checkpoint resets the count", () => {
      expect(tags(recovering("Checkpointed", [lost(1, minute), lost(2, hour, saved), lost(3, minute)]).actions))
        .toEqual(["Launch train-0-4"])
      // Run time without a checkpoint left nothing to start from.
      expect(recovering("Checkpointed", [lost(1, minute), lost(2, hour), lost(3, minute)]).status.reason).toBe(
        "RecoveryLimitExceeded"
      )
      // A checkpoint from a run shorter than minProgressDuration does not count either.
      expect(recovering("Checkpointed", [lost(1, minute), lost(2, minute, saved), lost(3, minute)]).status.reason).toBe(
        "RecoveryLimitExceeded"
      )
    })

    it("Restartable progress is a further cursor; Ephemeral runs never count as progress", () => {
      const cursor = (units: number) => ({ progressUnits: units })
      expect(
        tags(
          recovering("Restartable", [
            lost(1, minute, cursor(60)),
            lost(2, hour, cursor(3660)),
            lost(3, minute, cursor(3700))
          ]).actions
        )
      ).toEqual(["Launch train-0-4"])
      // The first run moved the cursor; the three after it did not.
      const stuck = [1, 2, 3, 4].map((number) => lost(number, hour, cursor(3600)))
      expect(recovering("Restartable", stuck).status.reason).toBe("RecoveryLimitExceeded")
      expect(tags(recovering("Restartable", stuck.slice(0, 3)).actions)).toEqual(["Launch train-0-4"])
      expect(recovering("Ephemeral", [lost(1, hour), lost(2, hour), lost(3, hour)]).status.reason).toBe(
        "RecoveryLimitExceeded"
      )
    })
  })

  it("uses an auto checkpoint interval from the variant's interruption rate (Young: sqrt(2 C M))", () => {
    const [launch] = launches(
      run(jobSpec(h100), { on: market({ mtbiMs: 6 * hour, capacity: { "h100-sxm-8x-us": 0 } }) }).actions
    )
    // sqrt(2 * 30 s * 6 h) = 1,138 s → rounded to 19 minutes.
    expect(launch).toMatchObject({ checkpointIntervalMs: 19 * minute })
    const fixed = launches(run(jobSpec({ ...h100, recovery: { checkpoint: { interval: "45m" } } })).actions)[0]
    expect(fixed).toMatchObject({ checkpointIntervalMs: 45 * minute })
  })

  it("reports checkpoints saved and failed (job.checkpointed, job.checkpoint_failed)", () => {
    const running = attempt({ checkpoint: { seq: 3, sizeBytes: 4096, at: T0 + hour }, checkpointFailures: 1 })
    const result = run(jobSpec(h100), {
      status: { phase: "Running", checkpoint: { seq: 2 } },
      attempts: [running],
      now: T0 + hour
    })
    expect(result.status.checkpoint).toMatchObject({
      seq: 3,
      size: 4096,
      time: new Date(T0 + hour).toISOString(),
      failures: 1
    })
    expect(eventTypes(result)).toEqual(["job.checkpointed", "job.checkpoint_failed"])
    const again = run(jobSpec(h100), { status: result.status, attempts: [running], now: T0 + hour + 1 })
    expect(again.events).toEqual([])
  })
})

describe("suspend and resume (spec: spec.state Suspended rows)", () => {
  const suspended = jobSpec({ ...a10, state: "Suspended" })

  it("asks the running attempt for a suspend checkpoint, then stops it once saved", () => {
    const first = run(suspended, { status: { phase: "Running" }, attempts: [attempt()], now: T0 + hour })
    expect(first.status.phase).toBe("Suspending")
    const [checkpoint] = first.actions
    expect(checkpoint).toMatchObject({ _tag: "Checkpoint", attempt: "train-0-1", episode: T0 + hour })
    const saved = attempt({ suspend: { episode: T0 + hour, state: "Saved", failures: 0 } })
    const second = run(suspended, { status: first.status, attempts: [saved], now: T0 + hour + minute })
    expect(tags(second.actions)).toEqual(["Stop train-0-1"])
  })

  it("is Suspended once nothing runs, and records the handled request", () => {
    const stopped = ended({ type: "Stopped" }, T0 + hour)
    const result = run(suspended, { status: { phase: "Suspending" }, attempts: [stopped], now: T0 + hour })
    expect(result.status).toMatchObject({
      phase: "Suspended",
      reason: "Suspended",
      handledRequests: { state: "Suspended" }
    })
    expect(condition(result.status, "Suspended")?.status).toBe("True")
    expect(result.actions).toEqual([])
  })

  it("retries a failed suspend checkpoint twice, then keeps running with SuspendFailed", () => {
    const first = run(suspended, { status: { phase: "Running" }, attempts: [attempt()], now: T0 + hour })
    const episode = T0 + hour
    const failedOnce = attempt({ suspend: { episode, state: "Failed", failures: 1 } })
    const retry = run(suspended, { status: first.status, attempts: [failedOnce], now: T0 + hour + minute })
    expect(retry.actions).toEqual([{ _tag: "Checkpoint", attempt: "train-0-1", episode }])
    expect(retry.status.suspendFailures).toBe(1)
    const failedThrice = attempt({ suspend: { episode, state: "Failed", failures: 3 } })
    const gaveUp = run(suspended, { status: retry.status, attempts: [failedThrice], now: T0 + hour + 3 * minute })
    expect(gaveUp.status.phase).toBe("Running")
    expect(gaveUp.actions).toEqual([])
    expect(condition(gaveUp.status, "SuspendFailed")?.status).toBe("True")
    expect(gaveUp.status.suspendFailures).toBe(3)
    const stays = run(suspended, { status: gaveUp.status, attempts: [failedThrice], now: T0 + 2 * hour })
    expect(stays.actions).toEqual([])
  })

  it("resumes when spec.state leaves Suspended: suspendedDuration grows, suspendFailures resets, the index restores", () => {
    const stopped = ended({ type: "Stopped" }, T0 + hour, { checkpoint: { seq: 4, sizeBytes: 10, at: T0 + hour } })
    const paused = run(suspended, { status: { phase: "Suspending" }, attempts: [stopped], now: T0 + hour })
    const resumed = run(jobSpec(a10), {
      status: { ...paused.status, suspendFailures: 2 },
      attempts: [stopped],
      now: T0 + 3 * hour
    })
    expect(resumed.status).toMatchObject({
      suspendedDuration: "2h",
      suspendFailures: 0,
      handledRequests: { state: "Running" },
      phase: "Provisioning"
    })
    expect(condition(resumed.status, "Suspended")).toBeUndefined()
    expect(launches(resumed.actions)[0]).toMatchObject({ attempt: "train-0-2", restoreFromSeq: 4, recovery: false })
  })
})

describe("timeout (spec: spec.timeout row)", () => {
  const spec = jobSpec({ ...a10, timeout: "2h" })

  it("sets timeoutTime = timeoutStartTime + timeout + suspendedDuration and wakes then", () => {
    const result = run(spec, {
      status: { phase: "Running", suspendedDuration: "30m" },
      attempts: [attempt()],
      now: T0 + hour
    })
    expect(result.status.timeoutTime).toBe(new Date(T0 + 2 * hour + 30 * minute).toISOString())
    expect(result.wakeAt).toBe(T0 + 2 * hour + 30 * minute)
  })

  it("fails with DeadlineExceeded at timeoutTime and stops the attempt", () => {
    const result = run(spec, { status: { phase: "Running" }, attempts: [attempt()], now: T0 + 2 * hour })
    expect(result.status).toMatchObject({ phase: "Failed", reason: "DeadlineExceeded" })
    expect(tags(result.actions)).toEqual(["Stop train-0-1"])
  })

  it("does not run while suspended", () => {
    const stopped = ended({ type: "Stopped" }, T0 + hour)
    const status = run(jobSpec({ ...a10, timeout: "2h", state: "Suspended" }), {
      status: { phase: "Suspending" },
      attempts: [stopped],
      now: T0 + hour
    }).status
    const later = run(jobSpec({ ...a10, timeout: "2h", state: "Suspended" }), {
      status,
      attempts: [stopped],
      now: T0 + 10 * hour
    })
    expect(later.status.phase).toBe("Suspended")
  })
})

describe("cancel and clean-up", () => {
  it("cancels on spec.state Cancelled: stops every attempt, job.cancelled", () => {
    const result = run(jobSpec({ ...a10, state: "Cancelled" }), {
      status: { phase: "Running" },
      attempts: [attempt()],
      now: T0 + hour
    })
    expect(result.status).toMatchObject({ phase: "Cancelled", reason: "Cancelled" })
    expect(tags(result.actions)).toEqual(["Stop train-0-1"])
    expect(eventTypes(result)).toEqual(["job.cancelled"])
  })

  it("keeps stopping live attempts after the Job is final", () => {
    const result = run(jobSpec(a10), {
      status: { phase: "Failed", completionTime: new Date(T0).toISOString() },
      attempts: [attempt()],
      now: T0 + hour
    })
    expect(tags(result.actions)).toEqual(["Stop train-0-1"])
    expect(result.status.phase).toBe("Failed")
  })

  it("deletes a finished Job ttlSecondsAfterFinished after completionTime", () => {
    const spec = jobSpec({ ...a10, ttlSecondsAfterFinished: 600 })
    const attempts = [ended({ type: "Succeeded" }, T0 + hour)]
    const done = run(spec, { status: { phase: "Running" }, attempts, now: T0 + hour })
    expect(done.wakeAt).toBe(T0 + hour + 600_000)
    expect(run(spec, { status: done.status, attempts, now: T0 + hour + 599_999 }).actions).toEqual([])
    expect(run(spec, { status: done.status, attempts, now: T0 + hour + 600_000 }).actions).toEqual([{ _tag: "Delete" }])
  })
})

describe("a timeout past any representable time", () => {
  it("never ends the Job and shows no timeoutTime (activeDeadlineSeconds is an int64)", () => {
    const spec = jobSpec({ resources: { gpu: { type: ["A10"] } }, activeDeadlineSeconds: 8191414303814214 })
    const result = step(observation(spec, { phase: "Running" }, [attempt()]), {
      now: T0 + hour,
      market: market(),
      ranking: rankingOf(spec)
    })
    expect(result.status.phase).toBe("Running")
    expect(result.status.timeoutTime).toBeUndefined()
    expect(result.wakeAt).toBeUndefined()
  })
})
