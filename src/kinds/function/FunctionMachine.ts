/**
 * The Function controller: a pure, level-triggered step (controller/Controller.ts), the same for the simulator and
 * live hosts. A Function holds a group of warm workers — runs of capacity whose program is the Python worker
 * (FunctionProgram.ts) — sized to the calls the runtime's dispatcher has for it (Observation.serving), within
 * `scaling` (spec: Function):
 *
 * - Workers wanted: enough to run every queued and running call at `targetConcurrency` calls each, at least
 *   `minWorkers` (kept warm, billed as their runs are), at most `maxWorkers`.
 * - Scale-down: a worker of the current template with no call for `scaledownWindow` goes while there are more than
 *   wanted; one with a call is never stopped for scaling (its calls finish first). Such an idle worker goes at once
 *   when another object waits for capacity of its offering (StepContext.contention: it yields).
 * - Rolling (spec: "a change to code, image or resources rolls workers while in-flight calls finish on the old ones"):
 *   a new template (workerTemplateOf) is numbered from the next worker on (status.workerTemplate); older workers take
 *   no new call and go once their calls are done, while new ones start.
 * - `state` Stopped (spec: "drains workers to zero; new calls queue"), and money (maxCostUSD reached, funding lost):
 *   no worker starts; idle ones go at once, busy ones when their calls end (money does not wait past its stopByTime).
 * - Workers of one template that end before they are ready `Limits.functionWorkerStartFailuresMax` times in a row
 *   (the module does not import, the interpreter is missing) fail the Function (WorkerStartupFailed) until the spec
 *   changes: no worker starts in a loop that cannot succeed. Calls stay queued.
 * Phases (the long-running vocabulary; Transitions "not shown", nodus: docs/kinds/Function.md): Pending (workers
 * wanted, none placed), Starting (none ready yet), Running (ready workers, or none wanted: it scales to zero),
 * Stopping, Stopped, Failed.
 */
import { type AttemptFacts, isLive } from "../../core/capacity/Capacity.ts"
import { choose, explain, type RunProfile } from "../../core/capacity/Placement.ts"
import type { Machine, Observation, ServingLoad, StepContext, StepResult } from "../../core/controller/Controller.ts"
import { fund, type FundedWords } from "../../core/controller/Funded.ts"
import { StepState } from "../../core/controller/StepState.ts"
import * as Limits from "../../core/Limits.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import { durationMs } from "../../core/StatusText.ts"
import { functionProgramOf, workerTemplateOf } from "./FunctionProgram.ts"
import type { FunctionSpecType, FunctionStatusType } from "./FunctionSchema.ts"

export type FunctionObservation = Observation<FunctionSpecType, FunctionStatusType>

const noLoad: ServingLoad = { queued: 0, running: {}, lastBusyAt: {}, nextAt: undefined }

/** How placement scores a worker: it serves until scaled down, and a lost one is replaced from the image. */
export const functionRunProfile = (spec: FunctionSpecType): RunProfile => ({
  workMs: Math.max(durationMs(spec.scaling.scaledownWindow, 0), durationMs(spec.timeout, 0)),
  continuity: "Ephemeral",
  failOnInterruption: false
})

/** Why workers may not run now: the owner's stop, or money. */
type Hold = {
  readonly reason: "Stopped" | "FundingLost" | "MaxCostReached"
  readonly message: string
  readonly by: number | undefined
}

class Step extends StepState<FunctionStatusType> {
  readonly fn: FunctionObservation
  readonly load: ServingLoad
  readonly live: ReadonlyArray<AttemptFacts>
  /** The first worker number of the current template: workers numbered below drain. */
  readonly firstWorker: number
  nextNumber: number

  constructor(fn: FunctionObservation, context: StepContext) {
    super(fn.status, context)
    this.fn = fn
    this.load = fn.serving ?? noLoad
    this.live = fn.attempts.filter(isLive)
    let highest = 0
    for (const attempt of fn.attempts) highest = Math.max(highest, attempt.number)
    this.nextNumber = highest + 1
    const template = workerTemplateOf(fn.spec)
    const shown = fn.status.workerTemplate
    if (shown?.template === template) this.firstWorker = shown.firstWorker
    else {
      // A new template: every worker so far is old. The first step of a Function starts at worker 1.
      this.firstWorker = this.nextNumber
      this.status.workerTemplate = { template, firstWorker: this.firstWorker }
      if (shown !== undefined && this.live.length > 0) {
        this.event(
          undefined,
          "RollingWorkers",
          "The workers' code, image or resources changed: new workers start, and the old ones finish their calls and go."
        )
      }
    }
  }

  get spec() {
    return this.fn.spec
  }

  callsOn(worker: AttemptFacts): number {
    return this.load.running[worker.name] ?? 0
  }

  isCurrent(worker: AttemptFacts): boolean {
    return worker.number >= this.firstWorker
  }

  stop(worker: AttemptFacts) {
    if (worker.phase !== "Terminating") this.actions.push({ _tag: "Stop", attempt: worker.name, keepWarmMs: 0 })
  }
}

/**
 * Whether a worker takes new calls: ready, of the current template, and the Function not held (the dispatcher asks).
 */
export const acceptsCalls = (spec: FunctionSpecType, status: FunctionStatusType, worker: AttemptFacts): boolean =>
  worker.phase === "Running" && worker.number >= (status.workerTemplate?.firstWorker ?? 0) &&
  spec.state === "Running" &&
  status.phase !== "Stopping" && status.phase !== "Stopped" && status.phase !== "Failed"

const holdOf = (step: Step): Hold | undefined => {
  if (step.spec.state === "Stopped") {
    return {
      reason: "Stopped",
      message: "Stopped by spec.state: workers drain to zero and new calls queue; set it to Running to serve them.",
      by: undefined
    }
  }
  const stop = step.context.funding?.stop
  if (stop === undefined) return undefined
  const text = stop.reason === "MaxCostReached"
    ? "maxCostUSD is reached; raise it and workers start again."
    : "Funds ran out; workers start again when credits arrive."
  return { reason: stop.reason, message: `${text} ${stop.message}`, by: stop.at }
}

/** Old-template workers go once their calls are done (spec: in-flight calls finish on the old ones). */
const drainOld = (step: Step) => {
  for (const worker of step.live) if (!step.isCurrent(worker) && step.callsOn(worker) === 0) step.stop(worker)
}

/** Held: no worker starts; idle ones go, busy ones when their calls end, or at once when money's time is up. */
const drainAll = (step: Step, hold: Hold) => {
  const outOfTime = hold.by !== undefined && step.now >= hold.by
  if (hold.by !== undefined && !outOfTime) step.wake(hold.by)
  for (const worker of step.live) if (outOfTime || step.callsOn(worker) === 0) step.stop(worker)
}

/** Workers of the current template that ended before they were ready, in a row (the latest first). */
const startFailures = (step: Step): { readonly count: number; readonly message: string | undefined } => {
  const ended = step.fn.attempts.filter((worker) => step.isCurrent(worker) && !isLive(worker)).sort((a, b) =>
    b.number - a.number
  )
  let count = 0
  let message: string | undefined
  for (const worker of ended) {
    const outcome = worker.outcome
    if (
      worker.bootedAt !== undefined || outcome === undefined ||
      (outcome.type !== "Failed" && outcome.type !== "OOMKilled")
    ) break
    message ??= outcome.type === "Failed"
      ? outcome.message ?? `the worker exited with code ${outcome.exitCode} before it was ready`
      : "the worker was OOMKilled before it was ready"
    count++
  }
  return { count, message }
}

/** Workers wanted for the calls there are (spec: scaling). */
const wantedWorkers = (step: Step): number => {
  const scaling = step.spec.scaling
  let running = 0
  for (const count of Object.values(step.load.running)) running += count
  const forCalls = Math.ceil((step.load.queued + running) / scaling.targetConcurrency)
  return Math.min(scaling.maxWorkers, Math.max(scaling.minWorkers ?? 0, forCalls))
}

/** Starts `count` workers, best-ranked variant with capacity, each first hold within what money allows. */
const launch = (step: Step, count: number) => {
  const funding = step.context.funding
  let budget = funding?.launchBudget
  for (let started = 0; started < count; started++) {
    const candidate = choose(step.context.ranking, step.context.market)
    if (candidate === undefined) {
      step.waitingForCapacity = true
      step.condition(
        "Scheduled",
        "False",
        "Unschedulable",
        `No offering matching the resources has capacity now.${idleHolders(step)}`
      )
      return
    }
    const hold = funding?.initialHold(candidate.variant)
    if (hold !== undefined && budget !== undefined) {
      if (hold > budget) {
        step.waitingForFunds = true
        step.condition(
          "Scheduled",
          "False",
          "Unfunded",
          "The first hold of a worker does not fit what money allows now (condition Funded)."
        )
        return
      }
      budget -= hold
    }
    const number = step.nextNumber++
    const name = `${step.fn.name}-${number}`
    const { ranking, market } = step.context
    step.actions.push({
      _tag: "Launch",
      attempt: name,
      index: 0,
      number,
      variant: candidate.variant,
      recovery: false,
      restoreFromSeq: undefined,
      resumeFromUnits: undefined,
      checkpointIntervalMs: undefined,
      keepWarmMs: 0,
      env: {},
      service: true,
      workload: functionProgramOf(step.spec),
      explain: () => explain(ranking, candidate, market)
    })
    step.condition(
      "Scheduled",
      "True",
      "Scheduled",
      `Workers are placed on ${candidate.variant.offering.id} at ${
        formatMicroUsd(candidate.variant.rateMicroUsdPerHour)
      } USD/h.`
    )
  }
}

/** What an Unschedulable message adds: the idle workers of others on the offerings this Function could use. */
const idleHolders = (step: Step): string => {
  const usable = new Set(step.context.ranking.kept.map((candidate) => candidate.variant.offering.id))
  const holders = (step.context.contention?.idle ?? []).filter((worker) => usable.has(worker.offering))
  if (holders.length === 0) return ""
  const named = holders.slice(0, 3).map((worker) => `${worker.attempt} (${worker.owner}, on ${worker.offering})`).join(
    ", "
  )
  return ` Idle worker${holders.length === 1 ? "" : "s"} ${named}${
    holders.length > 3 ? ` and ${holders.length - 3} more` : ""
  } hold it: one beyond its Function's minWorkers yields to this wait at once.`
}

/**
 * Scale-down: current workers above the wanted count, idle for scaledownWindow (since their last call, or their
 * start), go — those idle longest first. One whose offering another object waits for goes at once instead (it yields:
 * a warm idle worker must not keep another Function's first call waiting out the window). The step wakes when the
 * next one would be due.
 */
const scaleDown = (step: Step, current: ReadonlyArray<AttemptFacts>, wanted: number) => {
  const windowMs = durationMs(step.spec.scaling.scaledownWindow, 0)
  const idle = current
    .filter((worker) => worker.phase === "Running" && step.callsOn(worker) === 0)
    .map((worker) => ({ worker, since: Math.max(worker.bootedAt ?? step.now, step.load.lastBusyAt[worker.name] ?? 0) }))
    .sort((a, b) => a.since - b.since || a.worker.number - b.worker.number)
  let excess = current.length - wanted
  for (const { worker, since } of idle) {
    if (excess <= 0) return
    const offering = worker.variant.offering.id
    const waiter = step.context.contention?.wanted.get(offering)
    if (step.now >= since + windowMs) {
      step.stop(worker)
      excess--
    } else if (waiter !== undefined) {
      step.event(
        undefined,
        "WorkerYielded",
        `Worker ${worker.name} was idle and ${waiter} waits for capacity of ${offering}: it goes now, before its scaledownWindow.`
      )
      step.stop(worker)
      excess--
    } else step.wake(since + windowMs)
  }
}

/** The Function serves: workers for its calls, old ones drained, phase from what is ready. */
const serve = (step: Step) => {
  drainOld(step)
  const failures = startFailures(step)
  const current = step.live.filter((worker) => step.isCurrent(worker) && worker.phase !== "Terminating")
  if (failures.count >= Limits.functionWorkerStartFailuresMax) {
    // A Failed Function takes no call (acceptsCalls): a worker that came up before the failures would idle, billed,
    // for ever. Starting and idle ones go now, busy ones once their calls end.
    for (const worker of current) if (worker.phase === "Provisioning" || step.callsOn(worker) === 0) step.stop(worker)
    const message = `${failures.count} workers in a row ended before they were ready: ${
      failures.message ?? "no reason given"
    }. Fix the code, image or resources; a change starts new workers.`
    step.status.phase = "Failed"
    step.status.reason = "WorkerStartupFailed"
    step.status.message = message
    step.condition("Ready", "False", "WorkerStartupFailed", message)
    return
  }
  const wanted = wantedWorkers(step)
  if (current.length < wanted) launch(step, wanted - current.length)
  else if (current.length > wanted) scaleDown(step, current, wanted)
  const ready = current.filter((worker) => worker.phase === "Running").length
  const starting = step.actions.filter((action) => action._tag === "Launch").length +
    current.filter((worker) => worker.phase === "Provisioning").length
  delete step.status.reason
  delete step.status.message
  if (ready > 0 || wanted === 0) {
    step.status.phase = "Running"
    step.condition(
      "Ready",
      "True",
      "WorkersReady",
      ready > 0
        ? `${ready} worker${ready === 1 ? "" : "s"} ready.`
        : "No worker runs; a call starts one (scaled to zero)."
    )
  } else if (starting > 0) {
    step.status.phase = "Starting"
    step.condition("Ready", "False", "WorkersStarting", "Workers start; calls wait for the first to be ready.")
  } else {
    step.status.phase = "Pending"
    step.condition(
      "Ready",
      "False",
      "Pending",
      "No worker yet: waiting for capacity or funds (see Scheduled and Funded)."
    )
  }
}

/** Held: the workers drain, Stopping until none is left. */
const hold = (step: Step, held: Hold) => {
  drainAll(step, held)
  const stopping = step.live.some((worker) => worker.phase !== "Ended")
  step.status.phase = stopping ? "Stopping" : "Stopped"
  step.status.reason = held.reason
  step.status.message = held.message
  step.condition("Ready", "False", step.status.phase, held.message)
}

/**
 * status.workers and status.queue, from the live workers and the dispatcher's counts as shown (refreshed at most once
 * a second: a busy Function's status is not rewritten for every call).
 */
const observeCounts = (step: Step) => {
  const counts = { starting: 0, ready: 0, busy: 0, idle: 0, draining: 0 }
  const shown = step.load.shown ?? step.load
  let running = 0
  const stopping = new Set(step.actions.flatMap((action) => action._tag === "Stop" ? [action.attempt] : []))
  for (const worker of step.live) {
    const calls = shown.running[worker.name] ?? 0
    running += calls
    if (worker.phase === "Terminating" || stopping.has(worker.name) || !step.isCurrent(worker)) counts.draining++
    else if (worker.phase === "Provisioning") counts.starting++
    else {
      counts.ready++
      if (calls > 0) counts.busy++
      else counts.idle++
    }
  }
  counts.starting += step.actions.filter((action) => action._tag === "Launch").length
  step.status.workers = counts
  step.status.queue = { queued: shown.queued, running }
}

/** The Function's words for its money moves (controller/Funded.ts). */
const fundedWords = (step: Step): FundedWords => ({
  prefix: "function",
  maxCostReached: (cap, by) => `maxCostUSD ${cap} is reached; the workers stop by ${by}.`,
  fundingLost: (message, by) => `${message} The workers stop by ${by}.`,
  restoredByCap: "maxCostUSD was raised; workers start again.",
  restoredByCredits: "Credits arrived; workers start again.",
  funded: step.live.length > 0
    ? "Holds pay for the running workers."
    : "The account can pay the holds of a worker when one starts."
})

export const step = (fn: FunctionObservation, context: StepContext): StepResult<FunctionStatusType> => {
  const step = new Step(fn, context)
  step.status.observedGeneration = fn.generation
  const held = holdOf(step)
  if (held === undefined) serve(step)
  else hold(step, held)
  observeCounts(step)
  if (context.funding !== undefined) fund(step, context.funding, step.spec.maxCostUSD, fundedWords(step))
  if (step.load.nextAt !== undefined) step.wake(step.load.nextAt)
  return step.result()
}

/** The Function's machine (spec: Function). */
export const functionMachine: Machine<FunctionSpecType, FunctionStatusType> = {
  kind: "Function",
  step,
  placementOf: (spec) => ({
    request: { ...(spec.resources === undefined ? {} : { resources: spec.resources }), placement: spec.placement },
    run: functionRunProfile(spec)
  }),
  maxCostOf: (spec) => spec.maxCostUSD,
  // A Function is never final: a Failed one serves again once its spec changes; deleting it is how it ends.
  isFinal: () => false
}
