/**
 * A scenario run over time, for reports (docs/simulator.md, "Reports"): what the ledger charged by the end of each
 * hour, the preemptions and restores in each hour, every Job's queue wait and every Succeeded Job's completion time.
 * Everything here is virtual time and ledger postings, so the same scenario and seed give the same series.
 */
import type { Posting } from "../../core/billing/Ledger.ts"
import type { SimJob } from "./JobSim.ts"

export interface RunSeries {
  /** The run's virtual start (epoch ms) and the width of a bucket. */
  readonly start: number
  readonly bucketMs: number
  /** USD charged (the ledger's Capture and Arrears postings) by the end of each bucket, cumulative. */
  readonly costUSD: ReadonlyArray<number>
  /** Runs that ended Preempted in each bucket. */
  readonly preemptions: ReadonlyArray<number>
  /** Replacement runs after a lost capacity (Restore segment) requested in each bucket. */
  readonly restores: ReadonlyArray<number>
  /** Seconds from a Job's creation to its first launch, every Job that launched, ascending. */
  readonly queueWaitSeconds: ReadonlyArray<number>
  /** Seconds from a Succeeded Job's creation to its completion, ascending. */
  readonly completionSeconds: ReadonlyArray<number>
}

export const hourMs = 3_600_000

export class SeriesRecorder {
  private readonly start: number
  private readonly bucketMs: number
  private readonly preemptionTimes: Array<number> = []
  private readonly restoreTimes: Array<number> = []
  private readonly queueWaits: Array<number> = []
  private readonly completions: Array<number> = []

  constructor(start: number, bucketMs = hourMs) {
    this.start = start
    this.bucketMs = bucketMs
  }

  /** A Job that is deleted, or still there when the run ends. */
  job(job: SimJob): void {
    const first = job.attempts[0]
    if (first !== undefined) this.queueWaits.push((first.requestedAt - job.createdAt) / 1000)
    for (const attempt of job.attempts) {
      if (attempt.outcome?.type === "Preempted" && attempt.endedAt !== undefined) {
        this.preemptionTimes.push(attempt.endedAt)
      }
      if (attempt.recovery) this.restoreTimes.push(attempt.requestedAt)
    }
    if (job.status.phase === "Succeeded" && job.status.completionTime !== undefined) {
      this.completions.push((Date.parse(job.status.completionTime) - job.createdAt) / 1000)
    }
  }

  /** The series up to the last hour anything happened in, from the ledger's postings (kept: `retain`). */
  finish(postings: ReadonlyArray<Posting>): RunSeries {
    const bucketOf = (at: number) => Math.max(0, Math.floor((at - this.start) / this.bucketMs))
    const charges = postings.filter((posting) => posting.kind === "Capture" || posting.kind === "Arrears")
    let last = 0
    for (const at of [...this.preemptionTimes, ...this.restoreTimes, ...charges.map((posting) => posting.at)]) {
      last = Math.max(last, bucketOf(at))
    }
    const counts = (times: ReadonlyArray<number>) => {
      const buckets = new Array<number>(last + 1).fill(0)
      for (const at of times) buckets[bucketOf(at)]!++
      return buckets
    }
    const micro = new Array<bigint>(last + 1).fill(0n)
    for (const posting of charges) micro[bucketOf(posting.at)]! += posting.amount
    let sum = 0n
    const costUSD = micro.map((amount) => {
      sum += amount
      return Number(sum) / 1e6
    })
    const ascending = (values: Array<number>) => [...values].sort((a, b) => a - b)
    return {
      start: this.start,
      bucketMs: this.bucketMs,
      costUSD,
      preemptions: counts(this.preemptionTimes),
      restores: counts(this.restoreTimes),
      queueWaitSeconds: ascending(this.queueWaits),
      completionSeconds: ascending(this.completions)
    }
  }
}
