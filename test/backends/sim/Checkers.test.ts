/**
 * The checkers catch what they claim to: each rule is fed a step that breaks it (a controller bug made up for the
 * test) and must report it, and a correct step reports nothing.
 */
import { describe, expect, it } from "vitest"
import { Checkers } from "../../../src/backends/sim/Checkers.ts"
import { jobSimKind, type SimJob } from "../../../src/backends/sim/JobSim.ts"
import { defaultWorkload } from "../../../src/backends/sim/Workloads.ts"
import type { AttemptFacts } from "../../../src/core/capacity/Capacity.ts"
import type { JobStep } from "../../../src/kinds/job/JobMachine.ts"
import { type JobStatusType } from "../../../src/kinds/job/JobSchema.ts"
import { attempt, ended, jobSpec, T0 } from "../../core/Fixtures.ts"

const simJob = (fields: Record<string, unknown>, attempts: Array<AttemptFacts>): SimJob => ({
  kind: jobSimKind(),
  name: "train",
  namespace: "demo",
  key: "demo/train",
  uid: "u",
  generation: 1,
  createdAt: T0,
  spec: jobSpec({ resources: { gpu: { type: ["A10"] } }, ...fields }),
  status: {},
  attempts,
  workload: defaultWorkload,
  dirty: false,
  wakeAt: undefined,
  deleted: false,
  queued: false,
  settled: undefined
})

const stepOf = (status: JobStatusType, actions: JobStep["actions"] = []): JobStep => ({
  status,
  actions,
  events: [],
  wakeAt: undefined,
  waitingForCapacity: false,
  waitingForFunds: false
})

const rules = (job: SimJob, before: JobStatusType, after: JobStep) => {
  const checkers = new Checkers("test")
  checkers.afterStep(job, before, after, T0)
  return checkers.violations.map((violation) => violation.rule)
}

const counts = (job: SimJob) => ({
  succeeded: job.attempts.filter((entry) => entry.outcome?.type === "Succeeded").length,
  failed: 0,
  attempts: { total: job.attempts.length }
})

describe("checkers", () => {
  it("accept a correct step", () => {
    const job = simJob({}, [attempt()])
    expect(rules(job, { phase: "Provisioning" }, stepOf({ phase: "Running", ...counts(job) }))).toEqual([])
  })

  it("report a move outside the phase graph", () => {
    const job = simJob({}, [])
    expect(rules(job, { phase: "Succeeded" }, stepOf({ phase: "Running", ...counts(job) }))).toContain("transition")
  })

  it("report Succeeded before every index succeeded", () => {
    const job = simJob({ completions: 2 }, [ended({ type: "Succeeded" }, T0)])
    expect(rules(job, { phase: "Running" }, stepOf({ phase: "Succeeded", ...counts(job) }))).toContain(
      "succeeded-early"
    )
  })

  it("report counts that do not add up", () => {
    const job = simJob({}, [ended({ type: "Failed", exitCode: 1 }, T0)])
    expect(
      rules(job, { phase: "Running" }, stepOf({ phase: "Running", succeeded: 0, failed: 0, attempts: { total: 1 } }))
    ).toEqual(["failed-count"])
  })

  it("report a launch beyond parallelism and a second live attempt of one index", () => {
    const job = simJob({}, [attempt(), attempt({ name: "train-0-2", number: 2 })])
    const launch = { _tag: "Launch", attempt: "train-1-1", index: 1 } as unknown as JobStep["actions"][number]
    const found = rules(job, { phase: "Running" }, stepOf({ phase: "Running", ...counts(job) }, [launch]))
    expect(found).toContain("index-twice")
    expect(found).toContain("parallelism")
  })

  it("report Suspended without a suspend request and CapacityUnavailable before queueTimeout", () => {
    const job = simJob({}, [])
    expect(rules(job, { phase: "Running" }, stepOf({ phase: "Suspended", ...counts(job) }))).toContain(
      "suspended-unasked"
    )
    expect(rules(job, { phase: "Pending" }, stepOf({ phase: "Failed", reason: "CapacityUnavailable", ...counts(job) })))
      .toContain("queue-early")
  })

  it("report a timeoutTime that is not timeoutStartTime + timeout + suspendedDuration, at every step", () => {
    const job = simJob({ timeout: "2h" }, [attempt()])
    const checkers = new Checkers("test")
    const clock = (timeoutTime: string, suspendedDuration?: string) =>
      stepOf({
        phase: "Running",
        ...counts(job),
        timeoutStartTime: "2026-01-01T00:00:00.000Z",
        timeoutTime,
        ...(suspendedDuration === undefined ? {} : { suspendedDuration })
      })
    // The same texts again (the readings are remembered) and other ones: only the wrong ones are reported.
    for (
      const [timeoutTime, suspended, wrong] of [
        ["2026-01-01T02:00:00.000Z", undefined, false],
        ["2026-01-01T02:00:00.001Z", undefined, true],
        ["2026-01-01T02:00:00.000Z", undefined, false],
        ["2026-01-01T02:30:00.000Z", "30m", false],
        ["2026-01-01T02:00:00.000Z", "30m", true],
        ["2026-01-01T02:00:00.001Z", undefined, true]
      ] as const
    ) {
      const before = checkers.violations.length
      checkers.afterStep(job, { phase: "Running" }, clock(timeoutTime, suspended), T0)
      expect(checkers.violations.slice(before).map((violation) => violation.rule)).toEqual(
        wrong ? ["timeout-time"] : []
      )
    }
  })

  it("report liveness: a Job neither final nor waiting at the end", () => {
    const checkers = new Checkers("test")
    const running = { ...simJob({}, []), status: { phase: "Running" as const } }
    checkers.liveness([running], () => false, T0)
    expect(checkers.violations.map((violation) => violation.rule)).toEqual(["liveness"])
    expect(() => checkers.assert()).toThrow(/seed "test"/)
  })
})
