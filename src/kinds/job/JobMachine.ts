/**
 * The Job controller: a pure, level-triggered step. From what is observed now — the spec, the status it wrote last,
 * the facts of every Attempt, the market — and `now`, it returns the next status, the actions for the capacity
 * driver, the events to record and when it wants to be woken. The same inputs give the same outputs whatever
 * happened before, so a driver may call it after every observation, on a timer, or after a crash.
 *
 * The rows of the spec's "States and transitions" table for Job, and where each is decided:
 * - maxCostUSD reached / funding lost → Suspended (Funded False, stopByTime): `suspend` for money, from the
 *   `Funding` that billing (Billing.ts) works out from the ledger before the step.
 * - Suspended → running when spec.state leaves Suspended (suspendFailures resets): `resume`.
 * - customer suspend checkpoint fails after the first try and two retries → keeps running, SuspendFailed: `suspend`.
 * - timeout clock reaches timeoutTime → fails (DeadlineExceeded): `deadline`.
 * - customer failures exceed backoffLimit → Failed (BackoffLimitExceeded): `step`.
 * - capacity lost → restored from the latest checkpoint, or fails with onInterruption Fail: `recover`.
 * - queued past queueTimeout → Failed, CapacityUnavailable: `queueDeadline`.
 * Phases and the moves between them (the spec leaves them open) are in `JobPhases.ts` and docs/jobs.md.
 */
import type { Funding } from "../../core/billing/Billing.ts"
import {
  type AttemptFacts,
  type Checkpoint,
  isCustomerFailure,
  isInterruption,
  isLive,
  type Outcome
} from "../../core/capacity/Capacity.ts"
import { autoCheckpointIntervalMs, type Continuity } from "../../core/capacity/Interruptions.ts"
import type { Variant } from "../../core/capacity/Offering.ts"
import { choose, defaultExpectedWorkMs, explain, type Market, type RunProfile } from "../../core/capacity/Placement.ts"
import { conditionIn, withoutCondition } from "../../core/controller/Conditions.ts"
import type { Machine, Observation, StepContext, StepResult } from "../../core/controller/Controller.ts"
import { fund, type FundedWords } from "../../core/controller/Funded.ts"
import { StepState } from "../../core/controller/StepState.ts"
import * as Limits from "../../core/Limits.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import { durationMs, durationText, iso, parseTime, parseTimeOf } from "../../core/StatusText.ts"
import { formatDurationMs } from "../../core/Units.ts"
import { isFinalPhase, type JobPhase } from "./JobPhases.ts"
import { jobProgramOf } from "./JobProgram.ts"
import type { JobSpecType, JobStatusType } from "./JobSchema.ts"

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/**
 * Removes a field from the status, when it has it: a delete of a field that is not there still costs a generic
 * property deletion, and a step removes reason, message and timeoutTime at nearly every step of a running Job.
 */
const without = (status: Mutable<JobStatusType>, field: "reason" | "message" | "timeoutTime" | "stopByTime") => {
  if (field in status) delete status[field]
}

export type JobObservation = Observation<JobSpecType, JobStatusType>
export type JobStep = StepResult<JobStatusType>

// ---------------------------------------------------------------------------------------------------------------------
// Reading the spec with its documented defaults

export const continuityOf = (spec: JobSpecType): Continuity => spec.recovery.continuity ?? "Checkpointed"

/** How placement scores a run of this Job: its declared duration, continuity and onInterruption. */
export const runProfileOf = (spec: JobSpecType): RunProfile => ({
  workMs: durationMs(spec.expectedDuration, defaultExpectedWorkMs),
  continuity: continuityOf(spec),
  failOnInterruption: spec.recovery.onInterruption === "Fail"
})
const backoffLimitOf = (spec: JobSpecType) => spec.backoffLimit ?? Limits.jobBackoffLimitDefault
const maxAttemptsOf = (spec: JobSpecType) => spec.recovery.maxAttempts ?? Limits.recoveryMaxAttemptsDefault
const keepWarmMsOf = (spec: JobSpecType) => durationMs(spec.scaledownWindow, 0)

/** Spec: Recovery.checkpoint.interval — auto follows the variant's interruption rate. */
const checkpointIntervalMsOf = (spec: JobSpecType, variant: Variant, market: Market): number | undefined => {
  if (continuityOf(spec) !== "Checkpointed") return undefined
  const interval = spec.recovery.checkpoint.interval
  return interval === undefined || interval === "auto"
    ? autoCheckpointIntervalMs(market.meanTimeBetweenInterruptionsMs(variant))
    : durationMs(interval, Limits.hourMs)
}

// ---------------------------------------------------------------------------------------------------------------------
// What the attempts say

/**
 * The attempts read per index and in total, once per step (`readAttempts`). Done indexes are a bit set (a byte array
 * past 31 indexes), and the other per-index facts share one array, four slots per completion index — the attempt with
 * the highest number, the live one, the latest checkpoint seq (what a restore loads) and the furthest progress
 * cursor: a step runs after every change of every Job, and most Jobs have one or a few indexes. `indexes` lists the
 * indexes that have attempts in the order they first appear, the order recovery visits them; `unitIndexes` those
 * with a progress cursor, in the order their first cursor appears (the order of the total).
 */
interface IndexView {
  readonly succeeded: number
  readonly live: ReadonlyArray<AttemptFacts>
  readonly indexes: ReadonlyArray<number>
  readonly customerFailures: number
  readonly latestCheckpoint: Checkpoint | undefined
  readonly checkpointFailures: number
  readonly unitIndexes: ReadonlyArray<number>
  readonly isDone: (index: number) => boolean
  readonly lastAt: (index: number) => AttemptFacts | undefined
  readonly liveAt: (index: number) => AttemptFacts | undefined
  readonly seqAt: (index: number) => number | undefined
  readonly unitsAt: (index: number) => number | undefined
}

const noAttempts: ReadonlyArray<never> = []

/**
 * A list of indexes that holds index 0 alone (most Jobs have one index): shared, never written (`withIndex` copies it
 * when a second index comes). Not frozen: a frozen array is iterated through an iterator object.
 */
const onlyIndexZero: ReadonlyArray<number> = [0]

const withIndex = (list: ReadonlyArray<number>, index: number): ReadonlyArray<number> => {
  if (list === noAttempts) return index === 0 ? onlyIndexZero : [index]
  if (list === onlyIndexZero) return [0, index]
  ;(list as Array<number>).push(index)
  return list
}

/** Done indexes fit the bit set up to this many completions. */
const doneBitsMax = 31
/** The slots of an index in the per-index array. */
const lastSlot = 0
const liveSlot = 1
const seqSlot = 2
const unitsSlot = 3

/** Reads the attempts into the step's view (IndexView): one pass, nothing made that a Job does not have. */
const readAttempts = (step: Step, completions: number, attempts: ReadonlyArray<AttemptFacts>): void => {
  if (attempts.length === 0) return
  const many = completions > doneBitsMax ? new Uint8Array(completions) : undefined
  step.doneMany = many
  // Sized up front for the usual few indexes, grown as needed for many.
  const slots: Array<AttemptFacts | number | undefined> = completions <= 64 ? new Array(4 * completions) : []
  step.slots = slots
  let doneBits = 0
  // The live attempts, in a list of their exact length.
  let liveCount = 0
  for (let position = 0; position < attempts.length; position++) if (isLive(attempts[position]!)) liveCount++
  const live = liveCount === 0 ? undefined : new Array<AttemptFacts>(liveCount)
  let liveFilled = 0
  for (let position = 0; position < attempts.length; position++) {
    const attempt = attempts[position]!
    const index = attempt.index
    const at = 4 * index
    const outcome = attempt.outcome
    if (outcome?.type === "Succeeded" && index < completions) {
      if (many === undefined) {
        if (((doneBits >>> index) & 1) === 0) {
          doneBits |= 1 << index
          step.succeeded++
        }
      } else if (many[index] === 0) {
        many[index] = 1
        step.succeeded++
      }
    }
    if (outcome !== undefined && isCustomerFailure(outcome)) step.customerFailures++
    if (live !== undefined && isLive(attempt)) {
      live[liveFilled++] = attempt
      slots[at + liveSlot] = attempt
    }
    const last = slots[at + lastSlot] as AttemptFacts | undefined
    if (last === undefined) step.indexes = withIndex(step.indexes, index)
    if (last === undefined || last.number < attempt.number) slots[at + lastSlot] = attempt
    step.checkpointFailures += attempt.checkpointFailures
    const checkpoint = attempt.checkpoint
    if (checkpoint !== undefined) {
      if (step.latestCheckpoint === undefined || checkpoint.seq > step.latestCheckpoint.seq) {
        step.latestCheckpoint = checkpoint
      }
      if (checkpoint.seq > ((slots[at + seqSlot] as number | undefined) ?? -1)) slots[at + seqSlot] = checkpoint.seq
    }
    const units = attempt.progressUnits
    if (units !== undefined) {
      const furthest = slots[at + unitsSlot] as number | undefined
      if (units > (furthest ?? -1)) {
        if (furthest === undefined) step.unitIndexes = withIndex(step.unitIndexes, index)
        slots[at + unitsSlot] = units
      }
    }
  }
  step.doneBits = doneBits
  if (live !== undefined) step.live = live
}

/** Up to this many indexes, completedIndexes is remembered per set of done indexes (a status shows it every step). */
const indexTextsMax = 8
const indexTexts: Array<Array<string | undefined>> = []

/** "0-3,7,9-10" (spec: Job status.completedIndexes, Kubernetes' notation). */
const completedIndexesOf = (view: IndexView, completions: number): string => {
  // One index, the common case: "0" or "".
  if (completions === 1) return view.isDone(0) ? "0" : ""
  if (completions <= indexTextsMax) {
    let mask = 0
    for (let index = 0; index < completions; index++) if (view.isDone(index)) mask |= 1 << index
    const texts = (indexTexts[completions] ??= [])
    return (texts[mask] ??= indexRanges(view, completions))
  }
  return indexRanges(view, completions)
}

const indexRanges = (view: IndexView, completions: number): string => {
  const parts: Array<string> = []
  let start = -1
  for (let index = 0; index <= completions; index++) {
    const on = index < completions && view.isDone(index)
    if (on && start < 0) start = index
    if (!on && start >= 0) {
      parts.push(start === index - 1 ? `${start}` : `${start}-${index - 1}`)
      start = -1
    }
  }
  return parts.join(",")
}

/**
 * Interruptions of the index since its last run that made progress. Spec: Recovery.minProgressDuration is "run time
 * that counts as progress"; nodus counts it only when the run also left something a replacement starts from — a
 * checkpoint (Checkpointed) or a further progress cursor (Restartable). An Ephemeral run keeps nothing, so its
 * interruptions always count, and maxAttempts bounds a run that can never finish between two preemptions.
 */
const interruptionsWithoutProgress = (
  attempts: ReadonlyArray<AttemptFacts>,
  index: number,
  minProgressMs: number,
  continuity: Continuity
): number => {
  const runs = attempts.filter((attempt) => attempt.index === index).sort((a, b) => a.number - b.number)
  let count = 0
  let cursor = 0
  for (const run of runs) {
    const ranMs = run.bootedAt !== undefined && run.endedAt !== undefined ? run.endedAt - run.bootedAt : 0
    const retained = continuity === "Checkpointed"
      ? run.checkpoint !== undefined
      : continuity === "Restartable" && (run.progressUnits ?? 0) > cursor
    cursor = Math.max(cursor, run.progressUnits ?? 0)
    if (run.outcome === undefined || !isInterruption(run.outcome)) continue
    count = ranMs >= minProgressMs && retained ? 0 : count + 1
  }
  return count
}

const interruptionEvent = (outcome: Outcome): { type: string | undefined; reason: string } =>
  outcome.type === "Preempted"
    ? { type: "job.preempted", reason: "Preempted" }
    : outcome.type === "NodeLost"
    ? { type: "job.node_lost", reason: "NodeLost" }
    : { type: undefined, reason: "BootFailed" }

// ---------------------------------------------------------------------------------------------------------------------
// Texts of frequent events, made once

/**
 * Remembers `text` under `key` (`texts.get(key) ?? remember(texts, key, …)`). The texts are joined from their parts:
 * one flat string each, made once. A template would make a new rope at every event (a Job's phase events and
 * checkpoints: millions in the platform benchmark), which the trace flattens again to write it. Each memo is bounded:
 * it starts over when full.
 */
const remember = <K>(texts: Map<K, string>, key: K, text: string): string => {
  if (texts.size >= 4096) texts.clear()
  texts.set(key, text)
  return text
}

const phaseTexts = new Map<JobPhase, string>()
const succeededTexts = new Map<number, string>()
/**
 * The checkpoint sizes seen (a workload saves checkpoints of one size: a few), and their texts by seq, side by side.
 */
const checkpointSizes: Array<number> = []
const checkpointTexts: Array<Array<string | undefined>> = []

/**
 * "Checkpoint 3 saved (1024 bytes).", remembered per size by seq: a size is found in a short list, and a seq is an
 * index (a map keyed by both as one number, a float past 2^31, took as long as making the text).
 */
const checkpointedText = (checkpoint: Checkpoint): string => {
  const { seq, sizeBytes } = checkpoint
  if (!(Number.isInteger(seq) && seq >= 0 && seq < 4096)) return `Checkpoint ${seq} saved (${sizeBytes} bytes).`
  let at = checkpointSizes.indexOf(sizeBytes)
  if (at === -1) {
    if (checkpointSizes.length >= 16) {
      checkpointSizes.length = 0
      checkpointTexts.length = 0
    }
    at = checkpointSizes.push(sizeBytes) - 1
    checkpointTexts.push([])
  }
  const texts = checkpointTexts[at]!
  return (texts[seq] ??= ["Checkpoint ", seq, " saved (", sizeBytes, " bytes)."].join(""))
}

const finalEventTypes = { Succeeded: "job.succeeded", Failed: "job.failed", Cancelled: "job.cancelled" } as const

// ---------------------------------------------------------------------------------------------------------------------
// The step

class Step extends StepState<JobStatusType> implements IndexView {
  /** The market less the hosts this step has asked for (made when a step first places). */
  private marketView: TakenMarket | undefined
  launched = 0
  launchedRecovery = false
  /** What the launches of this step took of the launch budget. */
  spent = 0n
  /**
   * The times `status.timeoutStartTime` and `status.completionTime` show when this step set them (saves reading them
   * back).
   */
  timeoutStartMs: number | undefined
  completionMs: number | undefined

  readonly job: JobObservation

  // What the attempts say (IndexView, `readAttempts`): on the step itself, which is made once per step anyway.
  succeeded = 0
  customerFailures = 0
  checkpointFailures = 0
  latestCheckpoint: Checkpoint | undefined = undefined
  live: ReadonlyArray<AttemptFacts> = noAttempts
  indexes: ReadonlyArray<number> = noAttempts
  unitIndexes: ReadonlyArray<number> = noAttempts
  doneBits = 0
  doneMany: Uint8Array | undefined = undefined
  slots: ReadonlyArray<AttemptFacts | number | undefined> = noAttempts

  constructor(job: JobObservation, context: StepContext) {
    super(job.status, context)
    this.job = job
    readAttempts(this, job.spec.completions, job.attempts)
  }

  get view(): IndexView {
    return this
  }

  isDone(index: number): boolean {
    return this.doneMany === undefined
      ? index < doneBitsMax && ((this.doneBits >>> index) & 1) === 1
      : this.doneMany[index] === 1
  }

  lastAt(index: number): AttemptFacts | undefined {
    return this.slots[4 * index + lastSlot] as AttemptFacts | undefined
  }

  liveAt(index: number): AttemptFacts | undefined {
    return this.slots[4 * index + liveSlot] as AttemptFacts | undefined
  }

  seqAt(index: number): number | undefined {
    return this.slots[4 * index + seqSlot] as number | undefined
  }

  unitsAt(index: number): number | undefined {
    return this.slots[4 * index + unitsSlot] as number | undefined
  }

  /** Stops every live attempt that is not stopping yet. */
  stopAll(keepWarmMs: number) {
    for (const attempt of this.view.live) {
      if (attempt.phase !== "Terminating") this.actions.push({ _tag: "Stop", attempt: attempt.name, keepWarmMs })
    }
  }

  /** Ends the Job for good (spec: Job reaches a final phase). */
  finish(phase: "Succeeded" | "Failed" | "Cancelled", reason: string, message: string) {
    this.status.phase = phase
    this.status.reason = reason
    this.status.message = message
    this.status.completionTime = iso(this.now)
    if (Number.isInteger(this.now)) this.completionMs = this.now
    this.condition(phase === "Succeeded" ? "Complete" : phase, "True", reason, message)
    this.stopAll(keepWarmMsOf(this.job.spec))
    this.event(finalEventTypes[phase], reason, message, phase === "Failed")
  }

  /** A market that also counts the hosts this step has already asked for (made when a step first places). */
  get market(): Market {
    return this.marketView ??= new TakenMarket(this.context.market)
  }

  take(variant: Variant) {
    ;(this.marketView ??= new TakenMarket(this.context.market)).take(variant)
  }
}

/**
 * A market less the hosts a step has asked for, by variant: the first variant's count in a field (a step's launches
 * mostly take one), the others in a short list (no map).
 */
class TakenMarket implements Market {
  private readonly base: Market
  private first: Variant | undefined = undefined
  private firstCount = 0
  private others: Array<Variant> | undefined = undefined
  private otherCounts: Array<number> | undefined = undefined

  constructor(base: Market) {
    this.base = base
  }

  private taken(variant: Variant): number {
    if (variant === this.first) return this.firstCount
    const at = this.others === undefined ? -1 : this.others.indexOf(variant)
    return at === -1 ? 0 : this.otherCounts![at]!
  }

  available(variant: Variant): number {
    return this.base.available(variant) - this.taken(variant)
  }

  bootMs(variant: Variant): number {
    return this.base.bootMs(variant)
  }

  meanTimeBetweenInterruptionsMs(variant: Variant): number | undefined {
    return this.base.meanTimeBetweenInterruptionsMs(variant)
  }

  take(variant: Variant): void {
    if (this.first === undefined || variant === this.first) {
      this.first = variant
      this.firstCount++
      return
    }
    const others = (this.others ??= [])
    const counts = (this.otherCounts ??= [])
    const at = others.indexOf(variant)
    if (at === -1) {
      others.push(variant)
      counts.push(1)
    } else counts[at]!++
  }
}

/** Spec: timeoutTime = timeoutStartTime + current spec.timeout + suspendedDuration; undefined without a timeout. */
const timeoutAt = (step: Step): number | undefined => {
  const { spec } = step.job
  if (spec.timeout === undefined) return undefined
  const start = step.timeoutStartMs ?? parseTime(step.status.timeoutStartTime)
  if (start === undefined) return undefined
  const at = start + durationMs(spec.timeout, 0) + durationMs(step.status.suspendedDuration, 0)
  // A timeout so long that its deadline is past any representable time (activeDeadlineSeconds is an int64) never ends
  // the Job.
  return at > Limits.latestTimeMs ? undefined : at
}

/** Shows timeoutTime as the status now stands (a resume in this step may have moved suspendedDuration). */
const showTimeout = (step: Step) => {
  const at = timeoutAt(step)
  if (at === undefined) without(step.status, "timeoutTime")
  else step.status.timeoutTime = iso(at)
}

/**
 * Spec: "spec.timeout clock reaches timeoutTime" — the clock starts at first Provisioning; suspended time is excluded.
 */
const deadline = (step: Step): boolean => {
  const at = timeoutAt(step)
  if (at === undefined) return false
  if (step.now >= at) {
    step.finish(
      "Failed",
      "DeadlineExceeded",
      `The Job ran past its timeout of ${step.job.spec.timeout} (timeoutTime ${iso(at)}).`
    )
    return true
  }
  step.wake(at)
  return false
}

/** Spec: "capacity lost → restored from latest checkpoint; onInterruption Fail fails instead". */
const recover = (step: Step): boolean => {
  const { spec, attempts } = step.job
  const indexes = step.view.indexes
  for (let position = 0; position < indexes.length; position++) {
    const index = indexes[position]!
    const last = step.view.lastAt(index)!
    if (
      last.outcome === undefined || !isInterruption(last.outcome) || step.view.liveAt(index) !== undefined ||
      step.view.isDone(index)
    ) continue
    const { type, reason } = interruptionEvent(last.outcome)
    if (spec.recovery.onInterruption === "Fail") {
      step.event(type, reason, `Index ${index} lost its capacity (${reason}).`, true)
      step.finish("Failed", reason, `Index ${index} lost its capacity (${reason}) and recovery.onInterruption is Fail.`)
      return true
    }
    const minProgressMs = durationMs(spec.recovery.minProgressDuration, 2 * Limits.minuteMs)
    const lost = interruptionsWithoutProgress(attempts, index, minProgressMs, continuityOf(spec))
    if (lost > maxAttemptsOf(spec)) {
      step.event(type, reason, `Index ${index} lost its capacity (${reason}).`, true)
      step.finish(
        "Failed",
        "RecoveryLimitExceeded",
        `Index ${index} lost its capacity ${lost} times without progress; recovery.maxAttempts is ${
          maxAttemptsOf(spec)
        }.`
      )
      return true
    }
  }
  return false
}

/** Spec: "queued | queueTimeout elapsed | no capacity → Failed, CapacityUnavailable"; 0s waits forever. */
const queueDeadline = (step: Step): boolean => {
  const scheduled = conditionIn(step.conditions, "Scheduled")
  if (scheduled?.status !== "False") return false
  const timeoutMs = durationMs(step.job.spec.placement.queueTimeout, 24 * Limits.hourMs)
  if (timeoutMs === 0) return false
  const at = parseTimeOf(scheduled.lastTransitionTime) + timeoutMs
  if (step.now >= at) {
    step.finish(
      "Failed",
      "CapacityUnavailable",
      `No capacity matched the placement within queueTimeout ${step.job.spec.placement.queueTimeout}.`
    )
    return true
  }
  step.wake(at)
  return false
}

/** Why a Job suspends: its owner asked (spec.state), or money stops it by `at` (spec: funding lost, maxCostUSD). */
type SuspendCause =
  | { readonly _tag: "Requested" }
  | {
    readonly _tag: "Money"
    readonly reason: "FundingLost" | "MaxCostReached"
    readonly at: number
    readonly message: string
  }

const requested: SuspendCause = { _tag: "Requested" }

const suspendEpisode = (step: Step, cause: SuspendCause): number => {
  const suspended = conditionIn(step.conditions, "Suspended")
  if (suspended === undefined || suspended.status !== "False" || suspended.reason !== "Suspending") {
    step.condition(
      "Suspended",
      "False",
      "Suspending",
      cause._tag === "Money"
        ? `Saving state before stopping: ${cause.message}`
        : "Saving state before suspending (spec.state Suspended)."
    )
  }
  return parseTimeOf(conditionIn(step.conditions, "Suspended")!.lastTransitionTime)
}

const suspendedText = (cause: SuspendCause): { readonly reason: string; readonly message: string } =>
  cause._tag === "Requested"
    ? { reason: "Suspended", message: "Suspended by spec.state; set it to Running to resume." }
    : cause.reason === "MaxCostReached"
    ? { reason: "MaxCostReached", message: `maxCostUSD is reached; raise it to resume. ${cause.message}` }
    : { reason: "FundingLost", message: `Funds ran out; the Job resumes when credits arrive. ${cause.message}` }

/**
 * Spec: spec.state Suspended. Each running attempt saves a suspend checkpoint (continuity Checkpointed), then stops;
 * a failed save is retried twice, after which the Job keeps running with condition SuspendFailed. Returns whether
 * the suspend is in force (false once it failed, so the Job runs on).
 *
 * Spec: funding lost / maxCostUSD reached → Suspended, "checkpoint until stopByTime, then stops without it": the same
 * saves, but money does not wait — a run still saving at `at`, or whose saves failed, stops without its checkpoint.
 */
const suspend = (step: Step, cause: SuspendCause): boolean => {
  const { spec } = step.job
  const money = cause._tag === "Money"
  if (
    !money && step.status.handledRequests?.["state"] === "Suspended" &&
    conditionIn(step.conditions, "SuspendFailed")?.status === "True"
  ) return false
  if (step.view.live.length === 0) {
    const text = suspendedText(cause)
    const suspended = conditionIn(step.conditions, "Suspended")
    if (suspended?.status !== "True" || suspended.reason !== text.reason) {
      step.condition("Suspended", "True", text.reason, text.message)
    }
    step.conditions = withoutCondition(step.conditions, "Scheduled")
    if (!money) step.status.handledRequests = { ...step.status.handledRequests, state: "Suspended" }
    return true
  }
  const episode = suspendEpisode(step, cause)
  const checkpointed = continuityOf(spec) === "Checkpointed"
  const outOfTime = money && step.now >= cause.at
  if (money && !outOfTime) step.wake(cause.at)
  let failures = 0
  for (const attempt of step.view.live) {
    if (attempt.phase === "Terminating") continue
    if (attempt.phase === "Provisioning" || !checkpointed || outOfTime) {
      step.actions.push({ _tag: "Stop", attempt: attempt.name, keepWarmMs: 0 })
      continue
    }
    const save = attempt.suspend?.episode === episode ? attempt.suspend : undefined
    failures = Math.max(failures, save?.failures ?? 0)
    if (
      save?.state === "Saved" || (money && save?.state === "Failed" && save.failures >= Limits.suspendCheckpointTries)
    ) {
      step.actions.push({ _tag: "Stop", attempt: attempt.name, keepWarmMs: 0 })
    } else if (save === undefined || (save.state === "Failed" && save.failures < Limits.suspendCheckpointTries)) {
      step.actions.push({ _tag: "Checkpoint", attempt: attempt.name, episode })
    }
  }
  step.status.suspendFailures = failures
  if (!money && failures >= Limits.suspendCheckpointTries) {
    // Spec: "customer suspend checkpoint fails after first try and two retries → keeps running, condition
    // SuspendFailed".
    step.actions.length = 0
    step.condition(
      "SuspendFailed",
      "True",
      "CheckpointFailed",
      `The suspend checkpoint failed ${failures} times; the Job keeps running.`
    )
    step.conditions = withoutCondition(step.conditions, "Suspended")
    step.status.handledRequests = { ...step.status.handledRequests, state: "Suspended" }
    step.event(
      undefined,
      "SuspendFailed",
      `The suspend checkpoint failed ${failures} times; the Job keeps running.`,
      true
    )
    return false
  }
  return true
}

/** The Job's words for its money moves (controller/Funded.ts). */
const fundedWords: FundedWords = {
  prefix: "job",
  maxCostReached: (cap, by) => `maxCostUSD ${cap} is reached; the Job stops by ${by}.`,
  fundingLost: (message, by) => `${message} The Job checkpoints and stops by ${by}.`,
  restoredByCap: "maxCostUSD was raised; the Job runs again.",
  restoredByCredits: "Credits arrived; the Job runs again.",
  funded: "Holds pay for the running work."
}

/**
 * The Funded condition (spec: Job status.conditions — "Funded is one (False while money is short)"; stopByTime "funded
 * edge while Funded is False"), and the events of its moves: job.funding_lost and job.max_cost_reached when money
 * stops the Job, job.funding_restored when it may run again.
 */
const fundJob = (step: Step, funding: Funding) => {
  if (funding.stop !== undefined) step.status.stopByTime = iso(funding.stop.at)
  else without(step.status, "stopByTime")
  fund(step, funding, step.job.spec.maxCostUSD, fundedWords)
}

/** Spec: "Suspended → running again when spec.state leaves Suspended; suspendFailures resets". */
const resume = (step: Step) => {
  const suspended = conditionIn(step.conditions, "Suspended")
  if (suspended?.status === "True") {
    const since = parseTimeOf(suspended.lastTransitionTime)
    step.status.suspendedDuration = formatDurationMs(
      durationMs(step.status.suspendedDuration, 0) + Math.max(0, step.now - since)
    )
  }
  if (suspended !== undefined) step.conditions = withoutCondition(step.conditions, "Suspended")
  step.conditions = withoutCondition(step.conditions, "SuspendFailed")
  if (step.status.suspendFailures !== undefined) step.status.suspendFailures = 0
  if (step.status.handledRequests?.["state"] !== undefined && step.status.handledRequests["state"] !== "Running") {
    step.status.handledRequests = { ...step.status.handledRequests, state: "Running" }
  }
}

/** Starts runs for pending indexes up to parallelism, best-ranked variant with capacity first. */
const launch = (step: Step) => {
  const { spec, name } = step.job
  const { view } = step
  let slots = spec.parallelism - view.live.length
  let waiting = false
  for (let index = 0; index < spec.completions && slots > 0; index++) {
    if (view.isDone(index) || view.liveAt(index) !== undefined) continue
    const candidate = choose(step.context.ranking, step.market)
    if (candidate === undefined) {
      waiting = true
      step.waitingForCapacity = true
      break
    }
    // Money first (Billing.ts): the run's first hold must fit what the ledger allows new holds this step.
    const funding = step.context.funding
    if (funding !== undefined) {
      const hold = funding.initialHold(candidate.variant)
      if (step.spent + hold > funding.launchBudget) {
        step.waitingForFunds = true
        break
      }
      step.spent += hold
    }
    const last = view.lastAt(index)
    const number = (last?.number ?? 0) + 1
    const recovery = last?.outcome !== undefined && isInterruption(last.outcome)
    const continuity = continuityOf(spec)
    const restoreFromSeq = continuity === "Checkpointed" ? view.seqAt(index) : undefined
    const resumeFromUnits = continuity === "Restartable" ? view.unitsAt(index) : undefined
    const variant = candidate.variant
    step.take(variant)
    const ranking = step.context.ranking
    const market = step.context.market
    step.actions.push({
      _tag: "Launch",
      // Joined: one flat string, where a template keeps a rope of its pieces (the name lives as long as the Attempt).
      attempt: [name, index, number].join("-"),
      index,
      number,
      variant,
      recovery,
      restoreFromSeq,
      resumeFromUnits,
      checkpointIntervalMs: checkpointIntervalMsOf(spec, variant, market),
      keepWarmMs: keepWarmMsOf(spec),
      env: indexEnvOf(index),
      workload: jobProgramOf(spec, step.status),
      explain: () => explain(ranking, candidate, market)
    })
    if (recovery && last?.outcome !== undefined) {
      const { type, reason } = interruptionEvent(last.outcome)
      const from = restoreFromSeq === undefined ? "from the start" : `from checkpoint ${restoreFromSeq}`
      step.event(type, reason, `Index ${index} lost its capacity (${reason}); a replacement starts ${from}.`, true)
      step.launchedRecovery = true
    }
    step.launched++
    // The launch is an attempt from now on: counted at once, not one step later.
    const counted = step.status.attempts
    step.status.active = (step.status.active ?? 0) + 1
    step.status.attempts = {
      ...counted,
      current: Math.max(counted?.current ?? 0, number),
      total: (counted?.total ?? 0) + 1
    }
    slots--
    setPlacement(step, variant, false)
  }
  const pending = spec.completions - view.succeeded - view.live.length - step.launched
  if (step.waitingForFunds && view.live.length === 0 && step.launched === 0) {
    step.condition(
      "Scheduled",
      "False",
      "Unfunded",
      "The first hold of a run does not fit what money allows now (condition Funded)."
    )
  } else if (waiting && view.live.length === 0 && step.launched === 0) {
    step.condition("Scheduled", "False", "Unschedulable", "No offering matching the placement has capacity now.")
  } else if (step.launched > 0 || view.live.length > 0) {
    step.condition(
      "Scheduled",
      "True",
      "Scheduled",
      pending > 0 ? `${pending} indexes wait for a slot.` : "Every pending index has capacity."
    )
  }
}

/** The environment of an index's program (spec: Job env PLATFORM_INDEX, JOB_COMPLETION_INDEX), one object per index. */
const indexEnvs: Array<Readonly<Record<string, string>>> = []

const indexEnvOf = (index: number): Readonly<Record<string, string>> => {
  if (index >= 1024) return { PLATFORM_INDEX: `${index}`, JOB_COMPLETION_INDEX: `${index}` }
  return (indexEnvs[index] ??= Object.freeze({ PLATFORM_INDEX: `${index}`, JOB_COMPLETION_INDEX: `${index}` }))
}

type PlacementShown = NonNullable<JobStatusType["placement"]>

/**
 * A variant's placement as status shows it, cold and warm: one object each per variant, shared by every status that
 * shows it (a status is replaced, never written in place), so the placement a step shows again allocates nothing.
 */
const placementsShown = new WeakMap<Variant, readonly [cold: PlacementShown, warm: PlacementShown]>()

const placementShown = (variant: Variant, warmReuse: boolean): PlacementShown => {
  let shown = placementsShown.get(variant)
  if (shown === undefined) {
    const rateUSDPerHour = formatMicroUsd(variant.rateMicroUsdPerHour)
    const of = (warm: boolean): PlacementShown =>
      Object.freeze({
        offering: variant.offering.id,
        regionClass: variant.offering.regionClass,
        interruptible: variant.interruptible,
        rateUSDPerHour,
        warmReuse: warm
      })
    placementsShown.set(variant, shown = [of(false), of(true)])
  }
  return shown[warmReuse ? 1 : 0]
}

const setPlacement = (step: Step, variant: Variant, warmReuse: boolean) => {
  step.status.placement = placementShown(variant, warmReuse)
}

/** `status.attempts` with these counts: the one shown before when it says the same (most steps launch nothing). */
const attemptsShown = (
  previous: JobStatusType["attempts"],
  current: number,
  max: number,
  total: number
): NonNullable<JobStatusType["attempts"]> =>
  previous !== undefined && previous.current === current && previous.max === max && previous.total === total
    ? previous
    : { current, max, total }

/**
 * Spec: Job status.outputs — what a succeeded run collected, by index. Entries already in status stay (a restarted
 * server knows its Attempts without their outputs), so a step only adds what a newly succeeded run brought. `keys`
 * (index/name of the entries, made on first need) keeps the check linear in a Job of many indexes; what is new is
 * gathered in `added` and joined to status once, after every attempt was seen.
 */
interface OutputFold {
  keys: Set<string> | undefined
  readonly added: Array<NonNullable<JobStatusType["outputs"]>[number]>
}

const collectOutputs = (status: JobStatusType, attempt: AttemptFacts, fold: OutputFold) => {
  if (attempt.outputs === undefined || attempt.outcome?.type !== "Succeeded") return
  fold.keys ??= new Set((status.outputs ?? []).map((output) => `${output.index}/${output.name}`))
  for (const output of attempt.outputs) {
    const key = `${attempt.index}/${output.name}`
    if (fold.keys.has(key)) continue
    fold.keys.add(key)
    fold.added.push({
      name: output.name,
      path: output.path,
      sha256: output.sha256,
      size: output.sizeBytes,
      index: attempt.index
    })
  }
}

/** Counts, times and checkpoint facts derived from the attempts (level-triggered: recomputed every step). */
const observe = (step: Step) => {
  const { spec, attempts } = step.job
  const { view, status } = step
  status.observedGeneration = step.job.generation
  status.active = view.live.length
  status.succeeded = view.succeeded
  status.failed = view.customerFailures
  status.completedIndexes = completedIndexesOf(view, spec.completions)
  let firstRequest: number | undefined
  let firstBoot: number | undefined
  let current = 0
  let latest: AttemptFacts | undefined
  // Made when a succeeded run brought outputs (most steps see none).
  let outputs: OutputFold | undefined
  for (const attempt of attempts) {
    if (firstRequest === undefined || attempt.requestedAt < firstRequest) firstRequest = attempt.requestedAt
    if (attempt.bootedAt !== undefined && (firstBoot === undefined || attempt.bootedAt < firstBoot)) {
      firstBoot = attempt.bootedAt
    }
    if (isLive(attempt) && attempt.number > current) current = attempt.number
    if (latest === undefined || attempt.requestedAt >= latest.requestedAt) latest = attempt
    if (attempt.outputs !== undefined && attempt.outcome?.type === "Succeeded") {
      collectOutputs(status, attempt, outputs ??= { keys: undefined, added: [] })
    }
    if (attempt.inputs !== undefined && attempt.bootedAt !== undefined && status.inputsReadyTime === undefined) {
      // Spec: Job status.inputs, inputsReadyTime — every input materialized, checked against its digest.
      status.inputs = attempt.inputs
      status.inputsReadyTime = iso(attempt.bootedAt)
    }
  }
  if (outputs !== undefined && outputs.added.length > 0) status.outputs = [...(status.outputs ?? []), ...outputs.added]
  status.attempts = attemptsShown(status.attempts, current, maxAttemptsOf(spec), attempts.length)
  // Spec: timeoutStartTime is the first Provisioning; startTime the first Running.
  if (firstRequest !== undefined) {
    status.timeoutStartTime = iso(firstRequest)
    // Date.parse(iso(t)) is t for a whole millisecond (and the memo of iso answers the same text).
    if (Number.isInteger(firstRequest)) step.timeoutStartMs = firstRequest
  }
  if (firstBoot !== undefined) status.startTime = iso(firstBoot)
  if (latest !== undefined) setPlacement(step, latest.variant, latest.warmReuse)
  observeCheckpoints(step)
  const units = progressUnits(step)
  // Rebuilt from the previous one, so when it already says `units` it is the same; keep it then.
  if (units !== undefined && status.progress?.units?.completed !== units) {
    status.progress = { ...status.progress, units: { ...status.progress?.units, completed: units } }
  }
}

const progressUnits = (step: Step): number | undefined => {
  let total: number | undefined
  const { view } = step
  const indexes = view.unitIndexes
  for (let position = 0; position < indexes.length; position++) total = (total ?? 0) + view.unitsAt(indexes[position]!)!
  return total
}

const observeCheckpoints = (step: Step) => {
  const { view, status } = step
  const previous = status.checkpoint
  const latest = view.latestCheckpoint
  // The highest checkpoint a running attempt restored from, else the one shown before.
  let restoring: number | undefined
  for (const attempt of view.live) {
    if (
      attempt.restoreFromSeq !== undefined && attempt.phase === "Running" &&
      (restoring === undefined || attempt.restoreFromSeq > restoring)
    ) restoring = attempt.restoreFromSeq
  }
  const restoredFromSeq = restoring ?? previous?.restoredFromSeq
  const interval = view.live.length > 0 ? intervalShown(step) : previous?.interval
  if (
    latest === undefined && restoredFromSeq === undefined && interval === undefined && view.checkpointFailures === 0
  ) return
  const failures = view.checkpointFailures !== 0 ? view.checkpointFailures : undefined
  const time = latest === undefined ? undefined : iso(latest.at)
  // What was shown, when it says the same (a checkpoint is shown on every step of a running Job; it changes at a save).
  if (
    previous === undefined || previous.interval !== interval || previous.restoredFromSeq !== restoredFromSeq ||
    previous.seq !== latest?.seq ||
    previous.size !== latest?.sizeBytes || previous.time !== time || previous.failures !== failures
  ) {
    // Fields in this order: interval, restoredFromSeq, seq, size, time, failures.
    const checkpoint: Mutable<NonNullable<JobStatusType["checkpoint"]>> = {}
    if (interval !== undefined) checkpoint.interval = interval
    if (restoredFromSeq !== undefined) checkpoint.restoredFromSeq = restoredFromSeq
    if (latest !== undefined) {
      checkpoint.seq = latest.seq
      checkpoint.size = latest.sizeBytes
      checkpoint.time = iso(latest.at)
    }
    if (failures !== undefined) checkpoint.failures = failures
    status.checkpoint = checkpoint
  }
  if (latest !== undefined && latest.seq !== previous?.seq) {
    step.event("job.checkpointed", "Checkpointed", checkpointedText(latest))
  }
  if (view.checkpointFailures > (previous?.failures ?? 0)) {
    step.event(
      "job.checkpoint_failed",
      "CheckpointFailed",
      "A checkpoint could not be saved; the previous one is kept.",
      true
    )
  }
}

const intervalShown = (step: Step): string | undefined => {
  const attempt = step.view.live[step.view.live.length - 1]
  if (attempt === undefined) return undefined
  const ms = checkpointIntervalMsOf(step.job.spec, attempt.variant, step.context.market)
  return ms === undefined ? undefined : durationText(ms)
}

/** The phase the attempts and requests add up to, when the Job is not final. */
const phaseOf = (step: Step, suspending: boolean): JobPhase => {
  const { view } = step
  if (suspending) return view.live.length === 0 ? "Suspended" : "Suspending"
  let running = 0
  let recovering = step.launchedRecovery
  for (const attempt of view.live) {
    if (attempt.phase === "Running") running++
    else if (attempt.phase === "Provisioning" && attempt.recovery) recovering = true
  }
  if (recovering) return "Recovering"
  if (running > 0) return "Running"
  return view.live.length + step.launched > 0 ? "Provisioning" : "Pending"
}

const phaseEvent = (step: Step, from: string | undefined, to: JobPhase) => {
  if (from === to || isFinalPhase(to)) return
  if (from === "Recovering" && to === "Running") {
    const seq = step.status.checkpoint?.restoredFromSeq
    step.event(
      "job.restored",
      "Restored",
      seq === undefined ? "The replacement runs." : `The replacement runs, restored from checkpoint ${seq}.`
    )
    return
  }
  step.event(undefined, to, phaseTexts.get(to) ?? remember(phaseTexts, to, ["The Job is ", to, "."].join("")))
}

/** Spec: Job.ttlSecondsAfterFinished — the finished Job is deleted that long after completionTime. */
const expire = (step: Step) => {
  const ttl = step.job.spec.ttlSecondsAfterFinished
  const done = step.completionMs ?? parseTime(step.status.completionTime)
  if (ttl === undefined || done === undefined) return
  const at = done + ttl * Limits.secondMs
  if (step.now >= at) step.actions.push({ _tag: "Delete" })
  else step.wake(at)
}

/** Money stops a Job before its owner's suspend does: a stop for money does not wait for checkpoints to succeed. */
const causeOf = (step: Step): SuspendCause | undefined => {
  const stop = step.context.funding?.stop
  if (stop !== undefined) return { _tag: "Money", ...stop }
  return step.job.spec.state === "Suspended" ? requested : undefined
}

/** The phase and requests of a Job that is not final after this step's final rows. */
const advance = (step: Step, before: string | undefined) => {
  const cause = causeOf(step)
  const suspending = cause !== undefined && suspend(step, cause)
  if (!suspending) {
    launch(step)
    if (queueDeadline(step)) return
  }
  const phase = phaseOf(step, suspending)
  phaseEvent(step, before, phase)
  step.status.phase = phase
  if (suspending) {
    const text = suspendedText(cause)
    step.status.reason = text.reason
    step.status.message = text.message
  } else {
    without(step.status, "reason")
    without(step.status, "message")
  }
}

export const step = (job: JobObservation, context: StepContext): JobStep => {
  const step = new Step(job, context)
  const before = job.status.phase
  observe(step)
  if (before !== undefined && isFinalPhase(before)) step.stopAll(keepWarmMsOf(job.spec))
  else {
    // A resume first moves the suspended time into suspendedDuration, which the timeout clock reads.
    if (job.spec.state !== "Suspended" && context.funding?.stop === undefined) resume(step)
    if (!decideFinal(step)) advance(step, before)
    if (context.funding !== undefined && !isFinalPhase(step.status.phase ?? "Pending")) fundJob(step, context.funding)
    showTimeout(step)
  }
  if (step.status.phase !== undefined && isFinalPhase(step.status.phase)) expire(step)
  return step.result()
}

/**
 * The latest customer failure, as status.message ends with it (spec: Job status.message, "at most three log lines for
 * a customer exit"): its index, how it ended, and the lines its driver reported (live hosts: the log's last lines,
 * scrubbed of secret values).
 */
const lastFailureText = (attempts: ReadonlyArray<AttemptFacts>): string => {
  let last: AttemptFacts | undefined
  for (const attempt of attempts) {
    if (attempt.outcome === undefined || !isCustomerFailure(attempt.outcome)) continue
    if (last === undefined || (attempt.endedAt ?? 0) >= (last.endedAt ?? 0)) last = attempt
  }
  const outcome = last?.outcome
  if (last === undefined || outcome === undefined) return ""
  if (outcome.type === "OOMKilled") return ` Index ${last.index} was killed for exceeding its memory (OOMKilled).`
  if (outcome.type !== "Failed") return ""
  const lines = outcome.message === undefined
    ? ""
    : `:\n${outcome.message.split("\n").slice(-Limits.failureLogLines).join("\n")}`
  return ` Index ${last.index} exited with code ${outcome.exitCode}${lines}`
}

/** The rows that end a Job, in the order they win when several hold at once. */
const decideFinal = (step: Step): boolean => {
  const { spec } = step.job
  const { view } = step
  if (spec.state === "Cancelled") {
    step.finish("Cancelled", "Cancelled", "Cancelled by spec.state.")
    return true
  }
  if (view.succeeded === spec.completions) {
    step.finish(
      "Succeeded",
      "Completed",
      succeededTexts.get(spec.completions) ??
        remember(succeededTexts, spec.completions, ["All ", spec.completions, " indexes succeeded."].join(""))
    )
    return true
  }
  if (view.customerFailures > backoffLimitOf(spec)) {
    step.finish(
      "Failed",
      "BackoffLimitExceeded",
      `${view.customerFailures} customer failures exceed backoffLimit ${backoffLimitOf(spec)}.${
        lastFailureText(step.job.attempts)
      }`
    )
    return true
  }
  const suspended = conditionIn(step.conditions, "Suspended")?.status === "True"
  if (!suspended && deadline(step)) return true
  return recover(step)
}

/** The Job's machine (spec: Job; States and transitions), as drivers and the runtime's registry take it. */
export const jobMachine: Machine<JobSpecType, JobStatusType> = {
  kind: "Job",
  step,
  placementOf: (spec) => ({ request: spec, run: runProfileOf(spec) }),
  maxCostOf: (spec) => spec.maxCostUSD,
  isFinal: (status) => status.phase !== undefined && isFinalPhase(status.phase)
}
