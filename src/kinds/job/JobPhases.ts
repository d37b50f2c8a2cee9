/**
 * Job phases and the moves between them. The spec leaves both open ("Job phases: the phase names and the moves
 * between them beyond the rows above: not shown"); this graph is nodus's, documented in docs/jobs.md, and the
 * simulator's transition checker holds every run to it.
 *
 * Pending: waiting for capacity (queued). Provisioning: capacity acquired, booting. Running: a program runs.
 * Recovering: a replacement for lost capacity is being brought up. Suspending: saving state before stopping for a
 * customer suspend. Suspended: stopped by spec.state, holding no capacity. Succeeded, Failed, Cancelled: final.
 */
import { jobPhases } from "./JobSchema.ts"

export type JobPhase = typeof jobPhases[number]

export const finalPhases: ReadonlySet<string> = new Set<JobPhase>(["Succeeded", "Failed", "Cancelled"])

export const isFinalPhase = (phase: string): boolean => finalPhases.has(phase)

const live: ReadonlyArray<JobPhase> = ["Pending", "Provisioning", "Running", "Recovering", "Suspending", "Suspended"]
const ends: ReadonlyArray<JobPhase> = ["Succeeded", "Failed", "Cancelled"]

/**
 * Allowed moves, besides staying put. One controller step may observe several driver facts at once (a live backend
 * polls), so a phase may be skipped: Pending → Running when a warm host booted between two steps.
 */
export const jobPhaseMoves: Readonly<Record<JobPhase, ReadonlyArray<JobPhase>>> = {
  // Suspended → Succeeded/Failed never happens: a suspended Job holds no capacity and its clock is stopped.
  Pending: [...live, ...ends],
  Provisioning: [...live, ...ends],
  Running: [...live, ...ends],
  Recovering: [...live, ...ends],
  Suspending: [...live, ...ends],
  Suspended: ["Pending", "Provisioning", "Running", "Recovering", "Suspended", "Cancelled"],
  Succeeded: [],
  Failed: [],
  Cancelled: []
}

/** Whether `from → to` is in the graph (a missing `from` is the Job's creation). */
export const isAllowedMove = (from: string | undefined, to: string): boolean => {
  if (from === undefined || from === to) return (jobPhases as ReadonlyArray<string>).includes(to)
  return (jobPhaseMoves[from as JobPhase] ?? []).includes(to as JobPhase)
}
