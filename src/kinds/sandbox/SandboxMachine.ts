/**
 * The Sandbox controller: a pure, level-triggered step (controller/Controller.ts), the same for the simulator and live
 * hosts. A Sandbox holds one run of capacity (its box) while it should run, and none while it is stopped.
 *
 * The rows of the spec's "States and transitions" table for Sandbox, and where each is decided:
 * - spec.state set to Stopped → Stopped: compute released, /workspace saved first when continuity is Snapshotted
 *   (`stopRuns`: a snapshot is the port's suspend checkpoint of the run, then its release).
 * - spec.state set to Running, or a new start-requested-at annotation → Running via Starting: `wanted`, `run`; a new
 *   start pins the newest Secret versions again (`launch`: status.secretVersions, which the program names).
 * - idleTimeout elapsed → onIdle Stop (as a stop) or Delete: `idle`.
 * - maxLifetime since creation → deleted: `expire`, in any phase (a Failed Sandbox too).
 * - maxCostUSD reached / funding lost → stops paying: the Sandbox saves /workspace until stopByTime and is Stopped,
 *   with stopReason MaxCostReached or FundingLost; it starts again by itself once money allows (docs/kinds/Sandbox.md).
 * Moves the spec leaves open (docs/kinds/Sandbox.md): a box lost under a running Sandbox (NodeLost, Preempted, a
 * failed boot) is replaced, Recovering, from the last snapshot (or the image, when none); a box that cannot be set up
 * at all ends the Sandbox Failed (StartupFailed), which is final.
 */
import { type AttemptFacts, isInterruption, isLive } from "../../core/capacity/Capacity.ts"
import { choose, explain, type RunProfile } from "../../core/capacity/Placement.ts"
import { conditionIn } from "../../core/controller/Conditions.ts"
import type { Machine, Observation, StepContext, StepResult } from "../../core/controller/Controller.ts"
import { fund, type FundedWords } from "../../core/controller/Funded.ts"
import { StepState } from "../../core/controller/StepState.ts"
import * as Limits from "../../core/Limits.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import { durationMs, iso, parseTime, parseTimeOf } from "../../core/StatusText.ts"
import { sandboxProgramOf } from "./SandboxProgram.ts"
import type { SandboxSpecType, SandboxStatusType } from "./SandboxSchema.ts"

/**
 * The spec as the machine reads it: the schema's, with what server-owned annotations carry folded in (specOf): the
 * start request, and the newest versions of its mounted Secrets.
 */
export interface SandboxMachineSpec extends SandboxSpecType {
  /** The `<group>/start-requested-at` annotation's value, when set. */
  readonly startRequestedAt?: string | undefined
  /**
   * The `<group>/secret-versions` annotation: mount name → the version a start pins, the newest (or the one the spec
   * names) as admission found it at the Sandbox's last write. Admission owns it (runtime/Admission.ts).
   */
  readonly newestSecretVersions?: Readonly<Record<string, number>> | undefined
}

export type SandboxObservation = Observation<SandboxMachineSpec, SandboxStatusType>

/** Where status.handledRequests keeps the last start request acted on. */
export const startRequestKey = "start-requested-at"

/** The annotation (under the API group) holding the Secret versions the next start pins. */
export const secretVersionsKey = "secret-versions"

/** Why a Sandbox that should run is stopped (status.stopReason; docs/kinds/Sandbox.md). */
export type StopReason = "Requested" | "IdleTimeout" | "MaxCostReached" | "FundingLost"

/** What the step decides the Sandbox should be doing. */
type Wanted =
  | { readonly run: true }
  | { readonly run: false; readonly reason: StopReason; readonly message: string; readonly by: number | undefined }

const idleTimeoutMsOf = (spec: SandboxSpecType) => durationMs(spec.lifecycle.idleTimeout, 0)
const maxLifetimeMsOf = (spec: SandboxSpecType) => durationMs(spec.lifecycle.maxLifetime, 24 * Limits.hourMs)
const snapshotted = (spec: SandboxSpecType) => spec.continuity.mode === "Snapshotted"

/** How placement scores a Sandbox's run: it may live its whole maxLifetime, and a replacement restores /workspace. */
export const sandboxRunProfile = (spec: SandboxSpecType): RunProfile => ({
  workMs: maxLifetimeMsOf(spec),
  continuity: snapshotted(spec) ? "Checkpointed" : "Ephemeral",
  failOnInterruption: false
})

// ---------------------------------------------------------------------------------------------------------------------
// The step

class Step extends StepState<SandboxStatusType> {
  readonly live: ReadonlyArray<AttemptFacts>
  /** The run with the highest number: the current one, live or last ended. */
  readonly current: AttemptFacts | undefined
  readonly sandbox: SandboxObservation

  constructor(sandbox: SandboxObservation, context: StepContext) {
    super(sandbox.status, context)
    this.sandbox = sandbox
    this.live = sandbox.attempts.filter(isLive)
    let current: AttemptFacts | undefined
    for (const attempt of sandbox.attempts) {
      if (current === undefined || attempt.number > current.number) current = attempt
    }
    this.current = current
  }

  get spec() {
    return this.sandbox.spec
  }

  stopAll() {
    for (const run of this.live) {
      if (run.phase !== "Terminating") this.actions.push({ _tag: "Stop", attempt: run.name, keepWarmMs: 0 })
    }
  }
}

/**
 * Spec: "maxLifetime since creation → deleted", stopped time included. The expiration is counted from the object's
 * creation where the driver says it, else from the expirationTime written before (or the first step).
 */
const expire = (step: Step): boolean => {
  const lifetimeMs = maxLifetimeMsOf(step.spec)
  const shown = parseTime(step.status.expirationTime)
  const created = step.sandbox.createdAt ?? (shown === undefined ? step.now : shown - lifetimeMs)
  const at = created + lifetimeMs
  step.status.expirationTime = iso(at)
  if (step.now < at) {
    step.wake(at)
    return false
  }
  step.stopAll()
  step.actions.push({ _tag: "Delete" })
  step.status.phase = "Terminating"
  step.status.reason = "MaxLifetimeReached"
  step.status.message =
    `maxLifetime ${step.spec.lifecycle.maxLifetime} has passed since creation; the Sandbox is deleted.`
  step.event(undefined, "MaxLifetimeReached", step.status.message)
  return true
}

/**
 * A new start-requested-at value: recorded as handled, and it starts a Sandbox its idle timeout stopped. It is activity
 * too, so a request that comes while the idle stop still saves /workspace is not undone by the same idle clock. A
 * request that cannot start it (spec.state Stopped, or money) is answered all the same: see `declineStart`.
 */
const startRequested = (step: Step): boolean => {
  const request = step.spec.startRequestedAt
  if (request === undefined || step.status.handledRequests?.[startRequestKey] === request) return false
  step.status.handledRequests = { ...step.status.handledRequests, [startRequestKey]: request }
  step.status.lastActivityTime = iso(step.now)
  return true
}

const moneyStopText = (reason: "FundingLost" | "MaxCostReached", message: string): string =>
  reason === "MaxCostReached"
    ? `maxCostUSD is reached; raise it and the Sandbox starts again. ${message}`
    : `Funds ran out; the Sandbox starts again when credits arrive. ${message}`

/** What the Sandbox should be doing now, by the rows in the order they win. */
const wanted = (step: Step, requested: boolean): Wanted => {
  if (step.spec.state === "Stopped") {
    return {
      run: false,
      reason: "Requested",
      message: "Stopped by spec.state; set it to Running to start it.",
      by: undefined
    }
  }
  const stop = step.context.funding?.stop
  if (stop !== undefined) {
    return { run: false, reason: stop.reason, message: moneyStopText(stop.reason, stop.message), by: stop.at }
  }
  const idleStopped = step.status.stopReason === "IdleTimeout" &&
    (step.status.phase === "Stopped" || step.status.phase === "Stopping")
  if (idleStopped && !requested) return { run: false, reason: "IdleTimeout", message: idleMessage(step), by: undefined }
  return { run: true }
}

/**
 * A start request the Sandbox does not act on: spec.state Stopped wins (the owner's own stop is undone only by setting
 * it to Running), and so does a money stop (it starts again by itself once money allows). The request is still
 * recorded as handled — it was read and answered — and a warning Event says why it did not start and what will, so the
 * caller waiting on handledRequests is not left guessing (docs/kinds/Sandbox.md, "Start requests").
 */
const declineStart = (step: Step, want: Extract<Wanted, { run: false }>) => {
  const request = step.spec.startRequestedAt ?? ""
  step.event(
    undefined,
    "StartRequestDeclined",
    `The start request ${request} does not start the Sandbox: ${want.message}`,
    true
  )
}

const idleMessage = (step: Step) =>
  `No command, file request or terminal input for idleTimeout ${step.spec.lifecycle.idleTimeout}; start it again with the start-requested-at annotation.`

/**
 * Spec: idleTimeout "counted from no running command, no file request and no terminal input". The run's start counts
 * as activity, so a Sandbox just started again is not stopped at once for the quiet before its stop.
 */
const idle = (step: Step): "Stop" | "Delete" | undefined => {
  const run = step.live.find((attempt) => attempt.phase === "Running")
  const idleMs = idleTimeoutMsOf(step.spec)
  if (run === undefined || idleMs === 0 || run.activity?.busy === true) return undefined
  const last = Math.max(
    run.bootedAt ?? step.now,
    run.activity?.lastAt ?? 0,
    parseTime(step.status.lastActivityTime) ?? 0
  )
  const at = last + idleMs
  if (step.now < at) {
    step.wake(at)
    return undefined
  }
  return step.spec.lifecycle.onIdle
}

/** The activity shown: Busy while a command runs, the latest command, file request or terminal input. */
const observeActivity = (step: Step) => {
  const running = step.live.find((attempt) => attempt.phase === "Running")
  let last = parseTime(step.status.lastActivityTime)
  for (const attempt of step.sandbox.attempts) {
    const at = attempt.activity?.lastAt
    if (at !== undefined && (last === undefined || at > last)) last = at
  }
  if (last !== undefined) step.status.lastActivityTime = iso(last)
  if (running === undefined) delete step.status.activity
  else step.status.activity = running.activity?.busy === true ? "Busy" : "Idle"
}

/** The latest /workspace snapshot any run saved: what the next start restores (continuity Snapshotted). */
const latestSnapshot = (step: Step): AttemptFacts["checkpoint"] => {
  let latest: AttemptFacts["checkpoint"]
  for (const attempt of step.sandbox.attempts) {
    const saved = attempt.checkpoint
    if (saved !== undefined && (latest === undefined || saved.seq > latest.seq)) latest = saved
  }
  return latest
}

/**
 * Stops every live run: a running one of a Snapshotted Sandbox saves /workspace first (the port's suspend checkpoint,
 * episode = the run's number; tried three times), then is released. Money does not wait past its stopByTime.
 */
const stopRuns = (step: Step, want: Extract<Wanted, { run: false }>) => {
  const outOfTime = want.by !== undefined && step.now >= want.by
  if (want.by !== undefined && !outOfTime) step.wake(want.by)
  for (const run of step.live) {
    if (run.phase === "Terminating") continue
    if (run.phase === "Provisioning" || !snapshotted(step.spec) || outOfTime) {
      step.actions.push({ _tag: "Stop", attempt: run.name, keepWarmMs: 0 })
      continue
    }
    const save = run.suspend?.episode === run.number ? run.suspend : undefined
    if (save?.state === "Saved" || (save?.state === "Failed" && save.failures >= Limits.suspendCheckpointTries)) {
      step.actions.push({ _tag: "Stop", attempt: run.name, keepWarmMs: 0 })
    } else if (save === undefined || save.state === "Failed") {
      step.actions.push({ _tag: "Checkpoint", attempt: run.name, episode: run.number })
    }
  }
}

/** Spec: StateSaved, snapshot {reason Stop, time} — the save of the current run's stop, as it went. */
const observeSnapshot = (step: Step) => {
  if (!snapshotted(step.spec)) return
  const run = step.current
  const save = run?.suspend?.episode === run?.number ? run?.suspend : undefined
  if (run === undefined || save === undefined) return
  if (save.state === "Saved" && run.checkpoint !== undefined) {
    const time = iso(run.checkpoint.at)
    if (step.status.snapshot?.time !== time) step.status.snapshot = { reason: "Stop", time }
    step.condition(
      "StateSaved",
      "True",
      "Snapshotted",
      `/workspace was saved at ${time} (${run.checkpoint.sizeBytes} bytes).`
    )
  } else if (save.state === "Failed" && save.failures >= Limits.suspendCheckpointTries) {
    step.condition(
      "StateSaved",
      "False",
      "SnapshotFailed",
      `/workspace could not be saved after ${save.failures} tries; the next start restores the snapshot before it.`
    )
  }
}

/** Interruptions in a row of runs that never got to Running: past the recovery limit the box cannot be set up. */
const failedStarts = (attempts: ReadonlyArray<AttemptFacts>): number => {
  let count = 0
  for (const attempt of [...attempts].sort((a, b) => a.number - b.number)) {
    if (attempt.bootedAt !== undefined) count = 0
    else if (attempt.outcome !== undefined && isInterruption(attempt.outcome)) count++
  }
  return count
}

/** Spec: status.reason StartupFailed — a box that could not be set up; the Sandbox is Failed (final). */
const startupFailure = (step: Step): string | undefined => {
  const last = step.current
  if (last === undefined || isLive(last) || last.outcome === undefined) return undefined
  const outcome = last.outcome
  if (outcome.type === "Failed" && last.bootedAt === undefined) {
    return outcome.message ?? `The box exited with code ${outcome.exitCode} before it was ready.`
  }
  if (failedStarts(step.sandbox.attempts) > Limits.recoveryMaxAttemptsDefault) {
    return `${Limits.recoveryMaxAttemptsDefault + 1} starts in a row lost their capacity before the box was ready.`
  }
  return undefined
}

const fail = (step: Step, message: string) => {
  step.status.phase = "Failed"
  step.status.reason = "StartupFailed"
  step.status.message = message
  step.condition("Ready", "False", "StartupFailed", message)
  step.event("sandbox.setup_failed", "StartupFailed", message, true)
}

/** Why the last run ended under a Sandbox that should run, when it lost its capacity (recovery follows). */
const lostRun = (step: Step): string | undefined => {
  const last = step.current
  if (last === undefined || isLive(last) || last.outcome === undefined) return undefined
  if (isInterruption(last.outcome)) return last.outcome.type
  // The box itself ended under a running Sandbox (its supervisor died): replaced as a lost run.
  if (last.outcome.type === "Failed" || last.outcome.type === "OOMKilled" || last.outcome.type === "Succeeded") {
    return "BoxExited"
  }
  return undefined
}

/**
 * What a replacement box starts from: the last /workspace snapshot where one was saved (Snapshotted), else the image —
 * unless it starts on the lost box's host, which keeps a Snapshotted box's /workspace when the box ends unasked
 * (docs/sandboxes.md, "/workspace continuity").
 */
const replacementSource = (step: Step) => {
  if (!snapshotted(step.spec)) return "from the image"
  const base = latestSnapshot(step) !== undefined ? "from its last snapshot" : "from the image"
  return `${base}, or from the lost box's /workspace where its host kept it`
}

/** What the Event of a lost box says is lost with it. */
const lostText = (step: Step) => (snapshotted(step.spec) ? "what neither holds is lost" : "what was not saved is lost")

/** Launches a box when none is live, best-ranked variant with capacity, its first hold within what money allows. */
const launch = (step: Step, recovery: boolean): boolean => {
  const candidate = choose(step.context.ranking, step.context.market)
  if (candidate === undefined) {
    step.waitingForCapacity = true
    step.condition("Scheduled", "False", "Unschedulable", "No offering matching the resources has capacity now.")
    return false
  }
  const funding = step.context.funding
  if (funding !== undefined && funding.initialHold(candidate.variant) > funding.launchBudget) {
    step.waitingForFunds = true
    step.condition(
      "Scheduled",
      "False",
      "Unfunded",
      "The first hold of the box does not fit what money allows now (condition Funded)."
    )
    return false
  }
  const number = (step.current?.number ?? 0) + 1
  const restore = snapshotted(step.spec) ? latestSnapshot(step)?.seq : undefined
  // Spec: "newest Secret versions pinned again" at each start; a replacement box (recovery) keeps the run's pins.
  const newest = step.spec.newestSecretVersions
  if (!recovery && newest !== undefined) step.status.secretVersions = { ...newest }
  const ranking = step.context.ranking
  const market = step.context.market
  step.actions.push({
    _tag: "Launch",
    attempt: `${step.sandbox.name}-${number}`,
    index: 0,
    number,
    variant: candidate.variant,
    recovery,
    restoreFromSeq: restore,
    resumeFromUnits: undefined,
    checkpointIntervalMs: undefined,
    keepWarmMs: 0,
    env: {},
    service: true,
    workload: sandboxProgramOf(step.spec, step.status.secretVersions),
    explain: () => explain(ranking, candidate, market)
  })
  step.status.attempt = { epoch: number, name: `${step.sandbox.name}-${number}` }
  step.condition(
    "Scheduled",
    "True",
    "Scheduled",
    `Placed on ${candidate.variant.offering.id} at ${formatMicroUsd(candidate.variant.rateMicroUsdPerHour)} USD/h.`
  )
  return true
}

/** The phase of a Sandbox that should run, from its live run (or the launch this step made). */
const runningPhase = (step: Step, recovering: boolean) => {
  const run = step.live[0]
  if (run === undefined) return recovering ? "Recovering" : "Starting"
  if (run.phase === "Running") return "Running"
  if (run.phase === "Terminating") return "Stopping"
  return run.recovery ? "Recovering" : "Starting"
}

/** What the Ready condition says while the Sandbox waits for its box: none placed yet, one starting, one replacing. */
const readyWhileWaiting = {
  Pending: { reason: "Pending", message: "No box yet: waiting for capacity or funds (see Scheduled and Funded)." },
  Starting: { reason: "Starting", message: "The box starts." },
  Recovering: { reason: "Recovering", message: "A replacement box starts." }
} as const

const waitingReasons: ReadonlySet<string> = new Set(Object.values(readyWhileWaiting).map((waiting) => waiting.reason))

/**
 * spec: sandbox.stuck — a box not ready within `Limits.sandboxStuckAfterMs` of its start request: said once per run,
 * with the Ready condition's reason Stuck (the start goes on).
 */
const stuck = (step: Step) => {
  const ready = conditionIn(step.conditions, "Ready")
  if (ready === undefined || ready.status !== "False" || !waitingReasons.has(ready.reason)) return
  const at = parseTimeOf(ready.lastTransitionTime) + Limits.sandboxStuckAfterMs
  if (step.now < at) return step.wake(at)
  const message = `The box has not been ready for ${
    Limits.sandboxStuckAfterMs / Limits.minuteMs
  } minutes; the start goes on.`
  step.condition("Ready", "False", "Stuck", message)
  step.event("sandbox.stuck", "Stuck", message, true)
}

/** The Sandbox should run: keep its box, or start one. */
const run = (step: Step) => {
  const failure = step.live.length === 0 ? startupFailure(step) : undefined
  if (failure !== undefined) return fail(step, failure)
  const lost = step.live.length === 0 && step.status.phase !== "Stopped" && step.status.phase !== "Pending"
    ? lostRun(step)
    : undefined
  const launched = step.live.length === 0 && launch(step, lost !== undefined)
  if (launched && lost !== undefined) {
    step.event(
      undefined,
      lost,
      `The box was lost (${lost}); a replacement starts ${replacementSource(step)}: ${lostText(step)}.`,
      true
    )
  }
  const phase = step.live.length === 0 && !launched ? "Pending" : runningPhase(step, lost !== undefined)
  if (phase === "Running") {
    if (step.status.phase !== "Running") {
      step.event("sandbox.started", "Started", `The Sandbox runs (attempt ${step.current?.name ?? ""}).`)
    }
    step.condition("Ready", "True", "Running", "The box takes commands and file requests.")
    delete step.status.reason
    delete step.status.message
  } else {
    const recovering = phase === "Recovering"
    const waiting = readyWhileWaiting[phase === "Pending" ? "Pending" : recovering ? "Recovering" : "Starting"]
    const previous = conditionIn(step.conditions, "Ready")
    if (previous?.reason !== "Stuck" || step.status.phase === "Running") {
      step.condition("Ready", "False", waiting.reason, waiting.message)
    }
    if (recovering) {
      step.status.reason = lost ?? step.status.reason ?? "NodeLost"
      step.status.message = `The box was lost; a replacement starts ${replacementSource(step)}.`
    } else {
      delete step.status.reason
      delete step.status.message
    }
    stuck(step)
  }
  delete step.status.stopReason
  step.status.phase = phase
}

/** The Sandbox should not run: stop its box, saving /workspace first when Snapshotted. */
const stop = (step: Step, want: Extract<Wanted, { run: false }>) => {
  stopRuns(step, want)
  const phase = step.live.length === 0 ? "Stopped" : "Stopping"
  if (phase === "Stopped" && step.status.phase !== "Stopped" && step.sandbox.attempts.length > 0) {
    step.event("sandbox.stopped", want.reason, `The Sandbox stopped (${want.reason}).`)
  }
  step.status.phase = phase
  step.status.stopReason = want.reason
  step.status.reason = want.reason
  step.status.message = want.message
  step.condition("Ready", "False", phase, want.message)
}

/** The Sandbox's words for its money moves (controller/Funded.ts). */
const fundedWords = (step: Step): FundedWords => ({
  prefix: "sandbox",
  maxCostReached: (cap, by) => `maxCostUSD ${cap} is reached; the Sandbox stops by ${by}.`,
  fundingLost: (message, by) => `${message} The Sandbox saves /workspace and stops by ${by}.`,
  restoredByCap: "maxCostUSD was raised; the Sandbox starts again.",
  restoredByCredits: "Credits arrived; the Sandbox starts again.",
  funded: step.live.length > 0
    ? "Holds pay for the running box."
    : "The account can pay the holds of a box when one starts."
})

export const step = (sandbox: SandboxObservation, context: StepContext): StepResult<SandboxStatusType> => {
  const step = new Step(sandbox, context)
  step.status.observedGeneration = sandbox.generation
  observeActivity(step)
  observeSnapshot(step)
  const current = step.current
  if (current !== undefined) step.status.attempt = { epoch: current.number, name: current.name }
  // Spec: maxLifetime deletes "any" Sandbox, a Failed one too (its box is stopped either way).
  if (expire(step)) return step.result()
  if (step.status.phase === "Failed") step.stopAll()
  else {
    const requested = startRequested(step)
    let want = wanted(step, requested)
    const onIdle = want.run ? idle(step) : undefined
    if (onIdle === "Delete") {
      step.stopAll()
      step.actions.push({ _tag: "Delete" })
      step.status.phase = "Terminating"
      step.status.reason = "IdleTimeout"
      step.status.message = `No activity for idleTimeout ${step.spec.lifecycle.idleTimeout}; onIdle is Delete.`
      step.event(undefined, "IdleTimeout", step.status.message)
    } else {
      if (onIdle === "Stop") want = { run: false, reason: "IdleTimeout", message: idleMessage(step), by: undefined }
      if (want.run) run(step)
      else {
        if (requested) declineStart(step, want)
        stop(step, want)
      }
      if (context.funding !== undefined) fund(step, context.funding, step.spec.maxCostUSD, fundedWords(step))
    }
  }
  return step.result()
}

/** The Sandbox's machine (spec: Sandbox; States and transitions). */
export const sandboxMachine: Machine<SandboxMachineSpec, SandboxStatusType> = {
  kind: "Sandbox",
  step,
  placementOf: (spec) => ({
    request: { ...(spec.resources === undefined ? {} : { resources: spec.resources }) },
    run: sandboxRunProfile(spec)
  }),
  maxCostOf: (spec) => spec.maxCostUSD,
  // Failed is final (spec: SandboxFailed — "delete it and create a new Sandbox"); a stopped Sandbox starts again.
  isFinal: (status) => status.phase === "Failed"
}
