/**
 * Attempt objects from the facts a capacity driver reports (spec: History — "Attempt: one run of capacity for a
 * workload"; an Attempt carries a placement explanation). The Attempt kind's phases are nodus's own
 * (schemas/Attempt.ts); this module maps the driver's facts onto them, and back when a server restarts and finds the
 * Attempts it wrote before (docs/simulator.md, "The sim backend").
 *
 * Pure: times are epoch milliseconds in the facts and ISO strings in the objects.
 */
import type { AttemptFacts, Outcome } from "../../core/capacity/Capacity.ts"
import type { Variant } from "../../core/capacity/Offering.ts"
import type { Explanation } from "../../core/capacity/Placement.ts"
import { withCondition } from "../../core/controller/Conditions.ts"
import type { Json, JsonObject } from "../../core/Json.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import type { attemptPhases } from "./AttemptSchema.ts"

export type AttemptPhase = typeof attemptPhases[number]

const iso = (ms: number) => new Date(ms).toISOString()

/**
 * The Attempt phase of an ended run. Interrupted: the capacity went away under the program, by the provider
 * (preemption, node loss) or because the workload's controller stopped it (suspend, cancel, the Job ended);
 * Failed: the program or its host's start failed.
 */
const endedPhase = (outcome: Outcome): AttemptPhase => {
  switch (outcome.type) {
    case "Succeeded":
      return "Succeeded"
    case "Failed":
    case "OOMKilled":
    case "BootFailed":
    case "Unavailable":
      return "Failed"
    case "Preempted":
    case "NodeLost":
    case "Stopped":
      return "Interrupted"
  }
}

export const attemptPhaseOf = (facts: AttemptFacts): AttemptPhase =>
  facts.phase === "Ended" ? endedPhase(facts.outcome ?? { type: "Stopped" }) : facts.phase

/** `status.reason`: Completed and Error as Kubernetes words container exits, the outcome's own name otherwise. */
const reasonOf = (outcome: Outcome): string =>
  outcome.type === "Succeeded" ? "Completed" : outcome.type === "Failed" ? "Error" : outcome.type

/** What the main process exited with; an OOM kill is SIGKILL (128 + 9), as a container runtime reports it. */
const exitCodeOf = (outcome: Outcome): number | undefined =>
  outcome.type === "Succeeded"
    ? 0
    : outcome.type === "Failed"
    ? outcome.exitCode
    : outcome.type === "OOMKilled"
    ? 137
    : undefined

const messageOf = (outcome: Outcome): string | undefined => {
  switch (outcome.type) {
    case "Failed":
      return outcome.message ?? `The program exited with code ${outcome.exitCode}.`
    case "OOMKilled":
      return "The program ran out of memory and was killed."
    case "Preempted":
      return "The provider reclaimed the interruptible capacity."
    case "NodeLost":
      return "The host was lost."
    case "BootFailed":
      return "The host failed to boot."
    case "Unavailable":
      return "The capacity was taken before it could be acquired."
    case "Stopped":
      return "Stopped by the workload's controller (suspend, cancel, or the workload ended)."
    case "Succeeded":
      return undefined
  }
}

/** Condition Booted: when the host came up and the program started (a restarted server reads it back). */
export const bootedCondition = "Booted"

/**
 * The Attempt's status from its facts. `startTime` is when the capacity was requested (billing starts with it),
 * `endTime` when the run ended, and condition Booted when the program started.
 */
export const attemptStatusOf = (facts: AttemptFacts, placement: Explanation | undefined): JsonObject => {
  const { variant, outcome } = facts
  const exitCode = outcome === undefined ? undefined : exitCodeOf(outcome)
  const message = outcome === undefined ? undefined : messageOf(outcome)
  return {
    phase: attemptPhaseOf(facts),
    ...(outcome === undefined ? {} : { reason: reasonOf(outcome) }),
    ...(message === undefined ? {} : { message }),
    ...(placement === undefined ? {} : { placement: placement as unknown as JsonObject }),
    offering: variant.offering.id,
    regionClass: variant.offering.regionClass,
    interruptible: variant.interruptible,
    rateUSDPerHour: formatMicroUsd(variant.rateMicroUsdPerHour),
    // Read back after a restart (or by a shard's next owner): its boot is billed in the segment it was billed in.
    ...(facts.recovery ? { recovery: true } : {}),
    startTime: iso(facts.requestedAt),
    ...(facts.endedAt === undefined ? {} : { endTime: iso(facts.endedAt) }),
    ...(exitCode === undefined ? {} : { exitCode }),
    // Read back after a restart (or by a shard's next owner): a replacement restores the latest checkpoint of any run.
    ...(facts.checkpoint === undefined
      ? {}
      : {
        checkpoint: { seq: facts.checkpoint.seq, sizeBytes: facts.checkpoint.sizeBytes, time: iso(facts.checkpoint.at) }
      }),
    ...(facts.bootedAt === undefined ? {} : {
      conditions: withCondition(
        [],
        bootedCondition,
        "True",
        "Booted",
        "The host booted and the program started.",
        facts.bootedAt
      ) as unknown as Json
    })
  }
}

/** Reads the fields of a stored Attempt that `factsFromAttempt` needs; undefined when one is missing. */
interface StoredAttempt {
  readonly name: string
  readonly index: number
  readonly number: number
  readonly offering: string
  readonly interruptible: boolean
  readonly phase: string
  readonly reason: string | undefined
  readonly exitCode: number | undefined
  readonly startTime: number
  readonly endTime: number | undefined
  readonly bootTime: number | undefined
  readonly recovery: boolean
  readonly checkpoint: AttemptFacts["checkpoint"]
}

const field = (object: unknown, key: string): unknown =>
  typeof object === "object" && object !== null && !Array.isArray(object)
    ? (object as Record<string, unknown>)[key]
    : undefined

const storedOf = (object: JsonObject): StoredAttempt | undefined => {
  const metadata = field(object, "metadata")
  const spec = field(object, "spec")
  const status = field(object, "status")
  const name = field(metadata, "name")
  const index = field(spec, "index")
  const number = field(spec, "epoch")
  const offering = field(status, "offering")
  const phase = field(status, "phase")
  const startTime = Date.parse(String(field(status, "startTime")))
  if (
    typeof name !== "string" || typeof index !== "number" || typeof number !== "number" ||
    typeof offering !== "string" || typeof phase !== "string" || Number.isNaN(startTime)
  ) return undefined
  const endTime = Date.parse(String(field(status, "endTime")))
  const conditions = field(status, "conditions")
  const booted = Array.isArray(conditions)
    ? conditions.find((condition) => field(condition, "type") === bootedCondition)
    : undefined
  const bootTime = Date.parse(String(field(booted, "lastTransitionTime")))
  const reason = field(status, "reason")
  const exitCode = field(status, "exitCode")
  return {
    name,
    index,
    number,
    offering,
    interruptible: field(status, "interruptible") === true,
    phase,
    reason: typeof reason === "string" ? reason : undefined,
    exitCode: typeof exitCode === "number" ? exitCode : undefined,
    startTime,
    endTime: Number.isNaN(endTime) ? undefined : endTime,
    bootTime: Number.isNaN(bootTime) ? undefined : bootTime,
    recovery: field(status, "recovery") === true,
    checkpoint: checkpointOf(field(status, "checkpoint"))
  }
}

/** The checkpoint an Attempt recorded, when its fields are whole. */
const checkpointOf = (recorded: unknown): AttemptFacts["checkpoint"] => {
  const seq = field(recorded, "seq")
  const sizeBytes = field(recorded, "sizeBytes")
  const at = Date.parse(String(field(recorded, "time")))
  return typeof seq === "number" && typeof sizeBytes === "number" && !Number.isNaN(at)
    ? { seq, sizeBytes, at }
    : undefined
}

/** The outcome an ended Attempt recorded; a run that was still live ends now as NodeLost. */
const outcomeOf = (stored: StoredAttempt): Outcome => {
  switch (stored.reason) {
    case "Completed":
      return { type: "Succeeded" }
    case "Error":
      return { type: "Failed", exitCode: stored.exitCode ?? 1 }
    case "OOMKilled":
    case "Preempted":
    case "BootFailed":
    case "Unavailable":
    case "Stopped":
      return { type: stored.reason }
    default:
      return { type: "NodeLost" }
  }
}

/** Whether the stored Attempt had ended before the server stopped. */
export const isEndedAttempt = (object: JsonObject): boolean => {
  const phase = field(field(object, "status"), "phase")
  return phase === "Succeeded" || phase === "Failed" || phase === "Interrupted"
}

/**
 * The facts of an Attempt a previous server process wrote: what the controller needs to count failures, number the
 * next run and recover. Capacity does not survive a restart, so a run that was live then ends at `lostAt` (when that
 * process stopped simulating) as NodeLost, and recovery replaces it (one being stopped ends as Stopped). Undefined
 * when the object lacks a field or names a variant the catalog no longer has.
 */
export const factsFromAttempt = (
  object: JsonObject,
  variantOf: (offering: string, interruptible: boolean) => Variant | undefined,
  lostAt: number
): AttemptFacts | undefined => {
  const stored = storedOf(object)
  const variant = stored === undefined ? undefined : variantOf(stored.offering, stored.interruptible)
  if (stored === undefined || variant === undefined) return undefined
  const ended = isEndedAttempt(object)
  // A run being stopped had been let go by its controller: it ends as Stopped, not as an interruption to recover.
  const outcome: Outcome = ended
    ? outcomeOf(stored)
    : stored.phase === "Terminating"
    ? { type: "Stopped" }
    : { type: "NodeLost" }
  // A live run ends at `lostAt`, but never before what its record shows it did (the clock was saved a little earlier).
  // What a restarted server knows of the teardown: none after the recorded end.
  const end = ended
    ? stored.endTime ?? stored.startTime
    : Math.max(lostAt, stored.startTime, stored.bootTime ?? stored.startTime)
  return { ...recordedFacts(stored, variant), endedAt: end, stoppingAt: end, releasedAt: end, phase: "Ended", outcome }
}

/**
 * The facts of an Attempt a previous server process left live, as they stood (Provisioning or Running), for a driver
 * whose hosts outlive the server (live hosts: their agents reconnect and say what still runs). Undefined when the
 * record is ended, lacks a field, or names a variant the catalog no longer has.
 */
export const liveFactsFromAttempt = (
  object: JsonObject,
  variantOf: (offering: string, interruptible: boolean) => Variant | undefined
): AttemptFacts | undefined => {
  const stored = storedOf(object)
  if (stored === undefined || isEndedAttempt(object) || stored.phase === "Terminating") return undefined
  const variant = variantOf(stored.offering, stored.interruptible)
  if (variant === undefined) return undefined
  const phase = stored.bootTime === undefined ? "Provisioning" : "Running"
  return {
    ...recordedFacts(stored, variant),
    endedAt: undefined,
    stoppingAt: undefined,
    releasedAt: undefined,
    phase,
    outcome: undefined
  }
}

/** What an Attempt record says of its run, whether it ended or not. */
const recordedFacts = (stored: StoredAttempt, variant: Variant) => ({
  name: stored.name,
  index: stored.index,
  number: stored.number,
  variant,
  warmReuse: false,
  recovery: stored.recovery,
  restoreFromSeq: undefined,
  requestedAt: stored.startTime,
  bootedAt: stored.bootTime,
  checkpoint: stored.checkpoint,
  checkpointFailures: 0,
  suspend: undefined,
  progressUnits: undefined
})
