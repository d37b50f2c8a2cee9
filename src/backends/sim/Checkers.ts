/**
 * Independent checkers, run on every step of every simulation test (issue: transition checker, liveness, invariants).
 * They do not reuse the controller's reasoning: each rule restates a fact of the spec or of docs/jobs.md from the
 * step's inputs and outputs, so a controller bug shows up as a violation instead of being agreed with. A violation
 * records the seed it came from; the fault swarm prints it, and a failing seed becomes a regression test.
 */
import { isCustomerFailure, isLive } from "../../core/capacity/Capacity.ts"
import * as Limits from "../../core/Limits.ts"
import { parseDurationMs } from "../../core/Units.ts"
import type { JobStep } from "../../kinds/job/JobMachine.ts"
import { isAllowedMove, isFinalPhase } from "../../kinds/job/JobPhases.ts"
import type { JobSpecType, JobStatusType } from "../../kinds/job/JobSchema.ts"
import type { ClockVerdict, SimObject } from "./SimObject.ts"

export interface Violation {
  readonly at: number
  readonly job: string
  readonly rule: string
  readonly detail: string
}

/** What a step's status showed before the step, as the rules read it. */
export interface StatusBefore {
  readonly phase?: SimJob["status"]["phase"] | undefined
  readonly conditions?: SimJob["status"]["conditions"] | undefined
}

export type { ClockVerdict }

/** A Job as the headless simulator holds it (JobSim.ts). */
type SimJob = SimObject<JobSpecType, JobStatusType>

export class CheckFailed extends Error {
  readonly violations: ReadonlyArray<Violation>
  readonly seed: string
  constructor(seed: string, violations: ReadonlyArray<Violation>) {
    super(`seed ${JSON.stringify(seed)} broke ${violations.length} rule(s); first: ${JSON.stringify(violations[0])}`)
    this.seed = seed
    this.violations = violations
  }
}

export class Checkers {
  readonly violations: Array<Violation> = []
  readonly seed: string
  /** The clock rule's readings of times and durations, remembered: it reads a Job's same texts at its every step. */
  private readonly readings = new Readings()

  constructor(seed: string) {
    this.seed = seed
  }

  private fail(at: number, job: SimJob, rule: string, detail: string) {
    if (this.violations.length < 100) this.violations.push({ at, job: `${job.namespace}/${job.name}`, rule, detail })
  }

  /**
   * Rules over one step: its input (the job, and what its status showed before: its phase and conditions, all the
   * rules read of it; the step may have written the status itself in place, StepContext.rewriteStatus) and its output.
   */
  afterStep(job: SimJob, before: StatusBefore, result: JobStep, now: number): void {
    const after = result.status
    const spec = job.spec
    const from = before.phase
    const to = after.phase
    if (to === undefined) this.fail(now, job, "phase-set", "a step left the phase unset")
    else if (!isAllowedMove(from, to)) this.fail(now, job, "transition", `${from} → ${to} is not in the phase graph`)
    if (from !== undefined && isFinalPhase(from) && result.actions.some((action) => action._tag === "Launch")) {
      this.fail(now, job, "final-launch", `a ${from} Job launched capacity`)
    }
    // Indexes: none both succeeded and running; launches only for indexes not done and not running. Read in plain
    // loops that make a set or map only when there is something to put in it: the checkers run on every step.
    let done: Set<number> | undefined
    let customerFailures = 0
    let live = 0
    let running = 0
    for (const attempt of job.attempts) {
      if (attempt.outcome?.type === "Succeeded") (done ??= new Set()).add(attempt.index)
      if (attempt.outcome !== undefined && isCustomerFailure(attempt.outcome)) customerFailures++
      if (isLive(attempt)) live++
      if (attempt.phase === "Provisioning" || attempt.phase === "Running") running++
    }
    // Live attempts per index, in the order their indexes first appear (one live attempt cannot share its index).
    let liveIndexes: Map<number, number> | undefined
    let onlyLive: number | undefined
    for (const attempt of job.attempts) {
      if (!isLive(attempt)) continue
      if (live === 1) onlyLive = attempt.index
      else (liveIndexes ??= new Map()).set(attempt.index, (liveIndexes.get(attempt.index) ?? 0) + 1)
      if (done?.has(attempt.index) === true && attempt.phase === "Running") {
        this.fail(now, job, "index-done-and-running", `index ${attempt.index} succeeded and runs again`)
      }
    }
    if (liveIndexes !== undefined) {
      for (const [index, count] of liveIndexes) {
        if (count > 1) this.fail(now, job, "index-twice", `index ${index} has ${count} live attempts`)
      }
    }
    let launches = 0
    for (const action of result.actions) {
      if (action._tag !== "Launch") continue
      launches++
      if (done?.has(action.index) === true || onlyLive === action.index || liveIndexes?.has(action.index) === true) {
        this.fail(now, job, "launch-index", `index ${action.index} launched while done or live`)
      }
    }
    if (launches > 0 && running + launches > spec.parallelism) {
      this.fail(
        now,
        job,
        "parallelism",
        `${running} live + ${launches} launched exceed parallelism ${spec.parallelism}`
      )
    }
    // Counts add up.
    const succeeded = done?.size ?? 0
    if (after.succeeded !== succeeded) {
      this.fail(now, job, "succeeded-count", `status.succeeded ${after.succeeded}, attempts say ${succeeded}`)
    }
    if (after.failed !== customerFailures) {
      this.fail(now, job, "failed-count", `status.failed ${after.failed}, attempts say ${customerFailures}`)
    }
    const total = job.attempts.length + launches
    if ((after.attempts?.total ?? 0) !== total) {
      this.fail(now, job, "attempts-total", `attempts.total ${after.attempts?.total}, ${total} recorded or launched`)
    }
    // Final phases are bound to their causes (spec: States and transitions, Job).
    if (to !== from) this.finalRules(job, before, after, succeeded, customerFailures, now)
    this.clockRules(job, after, now)
    this.moneyRules(job, after, now)
  }

  /**
   * Money rules (docs/billing.md): a Job stopped for money is Funded False with that reason; the cap is never passed by
   * a new hold.
   */
  private moneyRules(job: SimJob, after: SimJob["status"], now: number) {
    const funded = conditionOf(after.conditions, "Funded")
    if (stoppedForMoney(after) && (funded?.status !== "False" || funded.reason !== after.reason)) {
      this.fail(now, job, "money-stop-unrecorded", `reason ${after.reason} without Funded False ${after.reason}`)
    }
    if (after.stopByTime !== undefined && funded?.status !== "False") {
      this.fail(now, job, "stop-by-while-funded", "stopByTime set while Funded is not False")
    }
  }

  private finalRules(
    job: SimJob,
    before: StatusBefore,
    after: SimJob["status"],
    succeeded: number,
    customerFailures: number,
    now: number
  ) {
    const spec = job.spec
    if (after.phase === "Succeeded" && succeeded !== spec.completions) {
      this.fail(now, job, "succeeded-early", `${succeeded}/${spec.completions} indexes done`)
    }
    if (after.phase === "Suspended" && spec.state !== "Suspended" && !stoppedForMoney(after)) {
      this.fail(now, job, "suspended-unasked", "Suspended without spec.state Suspended or a stop for money")
    }
    if (after.phase === "Cancelled" && spec.state !== "Cancelled") {
      this.fail(now, job, "cancelled-unasked", "Cancelled without spec.state Cancelled")
    }
    if (after.phase !== "Failed") return
    const backoffLimit = spec.backoffLimit ?? Limits.jobBackoffLimitDefault
    if (after.reason === "BackoffLimitExceeded" && customerFailures <= backoffLimit) {
      this.fail(now, job, "backoff", `${customerFailures} failures ≤ backoffLimit ${backoffLimit}`)
    }
    if (after.reason === "CapacityUnavailable") {
      const waited = conditionOf(before.conditions, "Scheduled")
      const timeoutMs = parseDurationMs(spec.placement.queueTimeout) ?? 0
      if (timeoutMs === 0) this.fail(now, job, "queue-forever", "queueTimeout 0s failed with CapacityUnavailable")
      else if (waited?.status !== "False" || now - Date.parse(waited.lastTransitionTime) < timeoutMs) {
        this.fail(now, job, "queue-early", "CapacityUnavailable before queueTimeout of waiting")
      }
    }
    if (after.reason === "DeadlineExceeded") {
      const start = after.timeoutStartTime === undefined ? undefined : Date.parse(after.timeoutStartTime)
      const suspended = parseDurationMs(after.suspendedDuration ?? "0s") ?? 0
      const limit = parseDurationMs(spec.timeout ?? "") ?? Number.POSITIVE_INFINITY
      if (start === undefined || now - start - suspended < limit) {
        this.fail(now, job, "deadline-early", "DeadlineExceeded before the timeout clock ran out")
      }
    }
  }

  /** timeoutTime = timeoutStartTime + timeout + suspendedDuration (spec: Job status). */
  private clockRules(job: SimJob, after: SimJob["status"], now: number) {
    const { timeoutTime, timeoutStartTime, suspendedDuration } = after
    const timeout = job.spec.timeout
    if (timeoutTime === undefined || timeout === undefined || timeoutStartTime === undefined) return
    // The rule reads four texts; a Job shows the same ones (the same strings) at most of its steps, so the verdict on
    // them is remembered on the Job and given again, a wrong clock reported at every step as before.
    const last = job.clockChecked
    if (
      last !== undefined && last.timeoutTime === timeoutTime && last.timeoutStartTime === timeoutStartTime &&
      last.timeout === timeout && last.suspendedDuration === suspendedDuration
    ) {
      if (!last.right) this.fail(now, job, "timeout-time", `timeoutTime ${timeoutTime} ≠ start + timeout + suspended`)
      return
    }
    const expected = this.readings.time(timeoutStartTime) + (this.readings.duration(timeout) ?? 0) +
      (this.readings.duration(suspendedDuration ?? "0s") ?? 0)
    const right = this.readings.time(timeoutTime) === expected
    job.clockChecked = { timeoutTime, timeoutStartTime, timeout, suspendedDuration, right }
    if (!right) this.fail(now, job, "timeout-time", `timeoutTime ${timeoutTime} ≠ start + timeout + suspended`)
  }

  /** Hosts in use never exceed a variant's capacity. */
  capacity(variant: string, used: number, capacity: number, now: number) {
    if (used > capacity || used < 0) {
      this.violations.push({ at: now, job: "-", rule: "capacity", detail: `${variant}: ${used} in use of ${capacity}` })
    }
  }

  /** Every Job ends final or in a documented waiting state within the budget. */
  liveness(jobs: Iterable<SimJob>, isWaiting: (job: SimJob) => boolean, now: number) {
    for (const job of jobs) {
      const phase = job.status.phase
      if (phase !== undefined && isFinalPhase(phase)) continue
      if (!isWaiting(job)) {
        this.fail(now, job, "liveness", `still ${phase} (${job.status.reason ?? "no reason"}) at the end of the budget`)
      }
    }
  }

  /** Throws with the seed when any rule was broken. */
  assert(): void {
    if (this.violations.length > 0) throw new CheckFailed(this.seed, this.violations)
  }
}

/**
 * `Date.parse` and `parseDurationMs`, remembered here (the checkers' own, not the controller's memo), each in a map
 * that starts over when it is full.
 */
class Readings {
  private readonly times = new Map<string, number>()
  private readonly durations = new Map<string, number | null>()

  time(text: string): number {
    let ms = this.times.get(text)
    if (ms === undefined) {
      if (this.times.size >= 65_536) this.times.clear()
      this.times.set(text, ms = Date.parse(text))
    }
    return ms
  }

  duration(text: string): number | undefined {
    let ms = this.durations.get(text)
    if (ms === undefined) {
      if (this.durations.size >= 4096) this.durations.clear()
      this.durations.set(text, ms = parseDurationMs(text) ?? null)
    }
    return ms ?? undefined
  }
}

/** The first condition of `type` (a loop, no closure: the checkers run on every step). */
const conditionOf = (conditions: SimJob["status"]["conditions"], type: string) => {
  for (const condition of conditions ?? []) if (condition.type === type) return condition
  return undefined
}

/** Suspended or suspending because money stopped it (maxCostUSD reached, funding lost). */
const stoppedForMoney = (status: SimJob["status"]): boolean =>
  status.reason === "FundingLost" || status.reason === "MaxCostReached"
