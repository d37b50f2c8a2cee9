/**
 * The loss model of interruptible capacity, shared by placement (expected cost under `interruptible: Allow`) and the
 * Job controller (the `auto` checkpoint interval). Both use the same two facts of a variant: its mean time between
 * interruptions and its boot time; the estimate's Monte Carlo (billing issue) samples the same models instead.
 */
import * as Limits from "../Limits.ts"

/** What a checkpoint is assumed to cost in run time when the workload does not say (nodus; docs/jobs.md). */
export const assumedCheckpointCostMs = 30 * Limits.secondMs

/** The `auto` interval on capacity that is not interrupted: checkpoints still guard against node loss. */
export const uninterruptedIntervalMs = Limits.hourMs

/**
 * The `auto` checkpoint interval: Young's first-order optimum √(2·C·M) for checkpoint cost C and mean time between
 * interruptions M, clamped to the spec's 1m–6h (spec: Recovery.checkpoint.interval).
 */
export const autoCheckpointIntervalMs = (meanTimeBetweenInterruptionsMs: number | undefined): number => {
  if (meanTimeBetweenInterruptionsMs === undefined) return uninterruptedIntervalMs
  const young = Math.sqrt(2 * assumedCheckpointCostMs * meanTimeBetweenInterruptionsMs)
  const minutes = Math.round(young / Limits.minuteMs) * Limits.minuteMs
  return Math.min(Limits.checkpointIntervalMsMax, Math.max(Limits.checkpointIntervalMsMin, minutes))
}

export type Continuity = "Checkpointed" | "Restartable" | "Ephemeral"

/**
 * Expected wall-clock time of a run of `workMs` on a variant: its boot, the work, and for each expected interruption
 * the work lost since the last save plus a fresh boot. Checkpointed and Restartable runs lose half an interval on
 * average; Ephemeral ones start over, losing half the work on average.
 */
export const expectedRunMs = (
  workMs: number,
  bootMs: number,
  meanTimeBetweenInterruptionsMs: number | undefined,
  continuity: Continuity
): number => {
  if (meanTimeBetweenInterruptionsMs === undefined || meanTimeBetweenInterruptionsMs <= 0) return bootMs + workMs
  const interruptions = workMs / meanTimeBetweenInterruptionsMs
  const lostPerInterruption = continuity === "Ephemeral"
    ? workMs / 2
    : autoCheckpointIntervalMs(meanTimeBetweenInterruptionsMs) / 2
  return bootMs + workMs + interruptions * (lostPerInterruption + bootMs)
}
