/**
 * The FunctionCall machine (spec: FunctionCall; States and transitions): the life of one call as pure moves over its
 * state, the same under the simulator and on live hosts. The runtime's dispatcher (runtime/FunctionDispatch.ts) holds
 * the state of every unfinished call, makes these moves as it dispatches calls to workers and hears their answers,
 * and writes `statusOf` back; nothing here reads a clock or knows a worker but by name.
 *
 * The spec's rows, and the move that makes each:
 * - Queued → Running: `dispatch` (a worker took it; the dispatch epoch goes up by one).
 * - Running, function raised, retries left → retried: `answer` (retries + 1; queued again after the Function's
 *   backoff).
 * - Running, function raised, retries exhausted → Failed RemoteError, error recorded: `answer`.
 * - Running, per-call deadline passes → Failed DeadlineExceeded: `expire` (the deadline counts from the try's start).
 * - Queued/Running, worker lost, within the recovery limit → Recovering, then re-dispatched, recoveries + 1: `lose`.
 * - Recovering, recovery limit exceeded → Failed RecoveryLimitExceeded: `lose`.
 * - any unfinished, Function deleted → Failed FunctionDeleted: `functionDeleted`.
 * - spec.state Cancelled → Cancelling while a worker runs it, then Cancelled; Cancelled at once otherwise: `cancel`
 *   (nodus, docs/kinds/FunctionCall.md).
 * Fencing: an answer or a loss is for one dispatch epoch; one for another epoch changes nothing (spec: worker.epoch,
 * "a result from another epoch is fenced").
 */
import { Decimal } from "decimal.js"
import { type Condition, type ConditionStatus, withCondition } from "../../core/controller/Conditions.ts"
import * as Limits from "../../core/Limits.ts"
import { formatMicroUsd, parseMicroUsd } from "../../core/Money.ts"
import type { CallError, CallOutcome } from "../../core/SandboxBox.ts"
import { durationMs, iso, parseTime } from "../../core/StatusText.ts"
import type { FunctionCallStatusType } from "./FunctionCallSchema.ts"
import type { FunctionSpecType } from "./FunctionSchema.ts"

export type CallPhase = NonNullable<FunctionCallStatusType["phase"]>
export type CallReason = NonNullable<FunctionCallStatusType["reason"]>

/** What a call runs under: its Function's retry and recovery policy, and its own deadline. */
export interface CallPolicy {
  readonly maxRetries: number
  /** A decimal string, 1 to 10 (spec: retries.backoffCoefficient). */
  readonly backoffCoefficient: string
  readonly initialDelayMs: number
  readonly maxDelayMs: number
  /** Re-dispatches after worker loss the call may have (spec: Function.recovery.maxAttempts). */
  readonly recoveryLimit: number
  /** The call's per-try deadline (spec: FunctionCall.timeout, defaulted from the Function's at admission). */
  readonly timeoutMs: number
}

/** A result as the call shows it: the worker's return value inline, in its encoding. */
export interface CallResult {
  readonly encoding: "JSON" | "Pickle"
  /** base64 */
  readonly inline: string
}

export interface CallState {
  readonly phase: CallPhase
  readonly retries: number
  readonly recoveries: number
  /** The dispatch epoch: 0 before the first dispatch, then one more per dispatch. */
  readonly epoch: number
  /** The worker (its Attempt's name) of the latest dispatch. */
  readonly worker: string | undefined
  /** When a worker last started it. */
  readonly startTime: number | undefined
  readonly completionTime: number | undefined
  /** A retry is not dispatched before its backoff is over. */
  readonly notBefore: number | undefined
  readonly reason: CallReason | undefined
  readonly message: string | undefined
  readonly error: CallError | undefined
  readonly result: CallResult | undefined
  /** Worker time of every try so far, at the Function's per-call rate (spec: costUSD). */
  readonly costMicroUsd: bigint
}

const unfinished: ReadonlySet<CallPhase> = new Set(["Queued", "Running", "Recovering", "Cancelling"])

/** Whether the call may still change (its result long poll waits). */
export const isUnfinished = (state: CallState): boolean => unfinished.has(state.phase)

/** Whether the call waits for a worker now (a retry's backoff over). */
export const isDispatchable = (state: CallState, now: number): boolean =>
  (state.phase === "Queued" || state.phase === "Recovering") &&
  (state.notBefore === undefined || state.notBefore <= now)

/** A new call: Queued. */
export const queued = (): CallState => ({
  phase: "Queued",
  retries: 0,
  recoveries: 0,
  epoch: 0,
  worker: undefined,
  startTime: undefined,
  completionTime: undefined,
  notBefore: undefined,
  reason: undefined,
  message: undefined,
  error: undefined,
  result: undefined,
  costMicroUsd: 0n
})

/**
 * Spec: retries {backoffCoefficient, initialDelay, maxDelay} — the delay before retry `n` (1-based) is
 * initialDelay × coefficient^(n−1), at most maxDelay, to the millisecond (computed exactly, then rounded).
 */
export const retryDelayMs = (policy: CallPolicy, n: number): number => {
  const delay = new Decimal(policy.backoffCoefficient).pow(Math.max(0, n - 1)).times(policy.initialDelayMs)
  return delay.greaterThan(policy.maxDelayMs) ? policy.maxDelayMs : delay.round().toNumber()
}

/**
 * A try's worker time at the Function's per-call rate (spec: costUSD, "worker time, whole seconds at the Function's
 * per-call rate"): its seconds rounded up, at the worker's hourly rate shared by the calls a worker takes at once
 * (targetConcurrency), rounded up to the micro-USD (docs/functions.md, "Cost").
 */
export const tryCostMicroUsd = (ms: number, rateMicroUsdPerHour: bigint, concurrency: number): bigint => {
  const seconds = BigInt(Math.ceil(Math.max(0, ms) / 1000))
  const share = 3600n * BigInt(Math.max(1, concurrency))
  return (seconds * rateMicroUsdPerHour + share - 1n) / share
}

/** The worker that takes it: Running under the next epoch. */
export const dispatch = (state: CallState, worker: string, now: number): CallState => ({
  ...state,
  phase: "Running",
  epoch: state.epoch + 1,
  worker,
  startTime: now,
  notBefore: undefined,
  message: undefined
})

/** When the running try passes its deadline. */
export const deadlineOf = (state: CallState, policy: CallPolicy): number | undefined =>
  (state.phase === "Running" || state.phase === "Cancelling") && state.startTime !== undefined
    ? state.startTime + policy.timeoutMs
    : undefined

const ended = (
  state: CallState,
  now: number,
  phase: "Succeeded" | "Failed" | "Cancelled",
  reason: CallReason | undefined,
  message: string | undefined
): CallState => ({
  ...state,
  phase,
  reason,
  message,
  completionTime: now,
  notBefore: undefined
})

/** Whether a report about dispatch `epoch` is about the try running now; any other is fenced. */
const current = (state: CallState, epoch: number) =>
  (state.phase === "Running" || state.phase === "Cancelling") && epoch === state.epoch

/**
 * The worker answered dispatch `epoch`: the return value ends the call Succeeded; a raise retries it after the backoff
 * while retries are left, and fails it RemoteError with the error once they are not. A cancelled call's answer is
 * discarded (Cancelled). `tryCost` is the try's worker time at the per-call rate.
 */
export const answer = (
  state: CallState,
  epoch: number,
  outcome: CallOutcome,
  policy: CallPolicy,
  now: number,
  tryCost: bigint
): CallState => {
  if (!current(state, epoch)) return state
  const paid = { ...state, costMicroUsd: state.costMicroUsd + tryCost }
  if (state.phase === "Cancelling") {
    return ended(paid, now, "Cancelled", "Cancelled", "Cancelled; the worker's answer was discarded.")
  }
  if (outcome.ok) {
    return {
      ...ended(paid, now, "Succeeded", undefined, undefined),
      error: undefined,
      result: { encoding: outcome.encoding, inline: outcome.result }
    }
  }
  if (state.retries < policy.maxRetries) {
    const retry = state.retries + 1
    const delay = retryDelayMs(policy, retry)
    return {
      ...paid,
      phase: "Queued",
      retries: retry,
      worker: undefined,
      notBefore: now + delay,
      error: outcome.error,
      message: `${outcome.error.type} raised; retry ${retry} of ${policy.maxRetries} in ${delay / 1000}s.`
    }
  }
  const tries = policy.maxRetries + 1
  return {
    ...ended(
      paid,
      now,
      "Failed",
      "RemoteError",
      `${outcome.error.type} raised on ${tries === 1 ? "its only try" : `each of its ${tries} tries`}.`
    ),
    error: outcome.error
  }
}

/**
 * The worker of dispatch `epoch` was lost under the call (or a restart lost its answer): Recovering until a worker
 * takes it again, or Failed RecoveryLimitExceeded past the Function's recovery limit. A cancelled call ends Cancelled.
 */
export const lose = (
  state: CallState,
  epoch: number,
  policy: CallPolicy,
  now: number,
  tryCost: bigint,
  why: string
): CallState => {
  if (!current(state, epoch)) return state
  const paid = { ...state, costMicroUsd: state.costMicroUsd + tryCost }
  if (state.phase === "Cancelling") return ended(paid, now, "Cancelled", "Cancelled", "Cancelled; its worker was lost.")
  const recoveries = state.recoveries + 1
  if (recoveries > policy.recoveryLimit) {
    return ended(
      { ...paid, recoveries: state.recoveries },
      now,
      "Failed",
      "RecoveryLimitExceeded",
      `Its worker was lost (${why}) and the recovery limit (${policy.recoveryLimit}) is used up.`
    )
  }
  return {
    ...paid,
    phase: "Recovering",
    recoveries,
    worker: undefined,
    message: `Its worker was lost (${why}); it is dispatched again (recovery ${recoveries} of ${policy.recoveryLimit}).`
  }
}

/** The running try passed its deadline (spec: per-call deadline passes → Failed DeadlineExceeded). */
export const expire = (state: CallState, policy: CallPolicy, now: number, tryCost: bigint): CallState => {
  const deadline = deadlineOf(state, policy)
  if (deadline === undefined || now < deadline) return state
  const paid = { ...state, costMicroUsd: state.costMicroUsd + tryCost }
  if (state.phase === "Cancelling") return ended(paid, now, "Cancelled", "Cancelled", "Cancelled.")
  return ended(paid, now, "Failed", "DeadlineExceeded", `It ran past its timeout of ${policy.timeoutMs / 1000}s.`)
}

/** Spec: Function deleted → every unfinished call Failed FunctionDeleted; a try that ran is paid (`tryCost`). */
export const functionDeleted = (state: CallState, now: number, tryCost: bigint): CallState =>
  isUnfinished(state)
    ? ended(
      { ...state, costMicroUsd: state.costMicroUsd + tryCost },
      now,
      "Failed",
      "FunctionDeleted",
      "Its Function was deleted."
    )
    : state

/**
 * spec.state Cancelled (nodus: docs/kinds/FunctionCall.md): a call no worker runs ends Cancelled at once; one a worker
 * runs is Cancelling until the worker answers, is lost, or the try's deadline passes, and its result is discarded.
 */
export const cancel = (state: CallState, now: number): CallState => {
  if (state.phase === "Running") {
    return { ...state, phase: "Cancelling", message: "Cancelling; the worker's answer will be discarded." }
  }
  if (state.phase === "Queued" || state.phase === "Recovering") {
    return ended(state, now, "Cancelled", "Cancelled", "Cancelled before a worker took it.")
  }
  return state
}

// ---------------------------------------------------------------------------------------------------------------------
// Status

/** The call's status as the spec shows it (everything the status holds is the state's). */
export const statusOf = (state: CallState, previous: FunctionCallStatusType): FunctionCallStatusType => {
  const status: { -readonly [K in keyof FunctionCallStatusType]: FunctionCallStatusType[K] } = { ...previous }
  const set = <K extends keyof FunctionCallStatusType>(key: K, value: FunctionCallStatusType[K] | undefined) => {
    if (value === undefined) delete status[key]
    else status[key] = value
  }
  status.phase = state.phase
  set("reason", state.reason)
  set("message", state.message)
  set("retries", state.retries)
  set("recoveries", state.recoveries)
  set("startTime", state.startTime === undefined ? undefined : iso(state.startTime))
  set("completionTime", state.completionTime === undefined ? undefined : iso(state.completionTime))
  set("retryTime", state.notBefore === undefined ? undefined : iso(state.notBefore))
  set(
    "worker",
    state.epoch === 0
      ? undefined
      : { ...(state.worker === undefined ? {} : { attempt: state.worker }), epoch: state.epoch }
  )
  set("error", state.error === undefined ? undefined : { ...state.error })
  set(
    "result",
    state.result === undefined ? undefined : { encoding: state.result.encoding, inline: state.result.inline }
  )
  set("costUSD", formatMicroUsd(state.costMicroUsd))
  return status
}

/** A condition as its Function shows it (its Funded condition, which a call's mirrors). */
export interface ShownCondition {
  readonly status: ConditionStatus
  readonly reason: string
  readonly message: string
}

/**
 * The call's conditions (spec: FunctionCall.conditions Funded, Scheduled; nodus, docs/kinds/FunctionCall.md):
 * Scheduled says whether a worker runs it now, and Funded is its Function's (the workers a call runs on are the
 * Function's, paid by the Function's holds). A final call keeps the conditions it ended with.
 */
export const conditionsOf = (
  state: CallState,
  previous: FunctionCallStatusType["conditions"],
  now: number,
  funded: ShownCondition | undefined
): FunctionCallStatusType["conditions"] => {
  if (!isUnfinished(state)) return previous
  let conditions: ReadonlyArray<Condition> = previous ?? []
  if (state.phase === "Running" || state.phase === "Cancelling") {
    conditions = withCondition(
      conditions,
      "Scheduled",
      "True",
      "Dispatched",
      `Worker ${state.worker ?? ""} runs it (epoch ${state.epoch}).`,
      now
    )
  } else if (state.phase === "Recovering") {
    conditions = withCondition(
      conditions,
      "Scheduled",
      "False",
      "Recovering",
      "Its worker was lost; it waits for another.",
      now
    )
  } else {
    conditions = withCondition(
      conditions,
      "Scheduled",
      "False",
      state.notBefore === undefined ? "Queued" : "Backoff",
      state.notBefore === undefined ? "It waits for a worker." : `It waits for its retry at ${iso(state.notBefore)}.`,
      now
    )
  }
  if (funded !== undefined) {
    conditions = withCondition(conditions, "Funded", funded.status, funded.reason, funded.message, now)
  }
  return conditions
}

/**
 * The state a stored status stands for (a restart, or a call the dispatcher takes over): what was shown, with the
 * try that was running then to be reported lost by the caller (its answer went with the previous process).
 */
export const stateOf = (status: FunctionCallStatusType): CallState => {
  const base = queued()
  if (status.phase === undefined) return base
  return {
    ...base,
    phase: status.phase,
    retries: status.retries ?? 0,
    recoveries: status.recoveries ?? 0,
    epoch: status.worker?.epoch ?? 0,
    worker: status.worker?.attempt,
    startTime: parseTime(status.startTime),
    completionTime: parseTime(status.completionTime),
    notBefore: parseTime(status.retryTime),
    reason: status.reason,
    message: status.message,
    error: status.error === undefined
      ? undefined
      : { type: status.error.type ?? "", message: status.error.message ?? "", traceback: status.error.traceback ?? "" },
    result: status.result?.inline === undefined
      ? undefined
      : { encoding: status.result.encoding ?? "JSON", inline: status.result.inline },
    costMicroUsd: costMicroUsdOf(status.costUSD)
  }
}

const costMicroUsdOf = (text: string | undefined): bigint => {
  try {
    return text === undefined ? 0n : parseMicroUsd(text)
  } catch {
    return 0n
  }
}

/** The policy of a call from its Function's spec and its own timeout (as admitted: defaults filled). */
export const policyOf = (fn: FunctionSpecType, timeout: string | undefined): CallPolicy => ({
  maxRetries: fn.retries?.maxRetries ?? 0,
  backoffCoefficient: fn.retries?.backoffCoefficient ?? Limits.functionBackoffCoefficientDefault,
  initialDelayMs: durationMs(fn.retries?.initialDelay ?? Limits.functionInitialDelayDefault, 0),
  maxDelayMs: durationMs(fn.retries?.maxDelay ?? Limits.functionMaxDelayDefault, 0),
  recoveryLimit: fn.recovery?.maxAttempts ?? Limits.recoveryMaxAttemptsDefault,
  timeoutMs: durationMs(timeout ?? fn.timeout, durationMs(fn.timeout, Limits.functionTimeoutMsMax))
})
