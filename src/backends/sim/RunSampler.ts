/**
 * The simulator's RunSampler (kinds/job/JobSampling.ts; docs/billing.md, "Estimates"): the Job, or one index of
 * it, run `samples` times through the same core the simulator runs (Job controller, metering) on the chosen offering
 * variant under its provider model — boot times and failures, preemptions, node loss, teardown — each sample as its
 * own Job on its own hosts, so none waits for another. Every draw comes from the request's seed, and the runs start
 * at a fixed instant, so the samples depend on nothing but the request (the server caches them by it).
 */
import { meterAttempt } from "../../core/billing/Metering.ts"
import { ruleOf } from "../../core/billing/Pricebook.ts"
import { type Variant, variantKeyOf } from "../../core/capacity/Offering.ts"
import {
  assumedCheckpointBytes,
  type RunRequest,
  type RunSample,
  type RunSampler
} from "../../kinds/job/JobSampling.ts"
import type { JobSpecType } from "../../kinds/job/JobSchema.ts"
import { Engine } from "./Engine.ts"
import { jobSimKind, type SimJob } from "./JobSim.ts"
import { Prng } from "./Prng.ts"
import { SimCapacity, type SimProviderModel, type WorkloadModel } from "./SimCapacity.ts"
import { Simulation } from "./Simulation.ts"

/** Where every sampled simulation starts (any instant would do: the provider models do not vary with time). */
export const samplingEpochMs = Date.UTC(2026, 0, 1)

/** The Job as one sample runs it: only the chosen variant, interruptible when it is, never timing out in a queue. */
const sampledSpecOf = (request: RunRequest): JobSpecType => {
  const { spec, variant } = request
  const shape = request.perIndex
    ? { completions: 1, parallelism: 1 }
    : { completions: spec.completions, parallelism: spec.parallelism }
  const placement = {
    ...spec.placement,
    offerings: [variant.offering.id],
    interruptible: variant.interruptible ? "Prefer" as const : "Never" as const,
    queueTimeout: "0s"
  }
  return { ...spec, ...shape, placement }
}

/**
 * The program an estimate assumes: it works `workMs`, exits 0, has the assumed checkpoint size and no failures of its
 * own.
 */
export const sampledWorkload = (workMs: number): WorkloadModel => ({
  durationMs: workMs,
  exitCode: 0,
  runFailureRate: 0,
  oomRate: 0,
  checkpointSizeBytes: assumedCheckpointBytes,
  checkpointFailureRate: 0,
  suspendCheckpointFailureRate: 0
})

/** A finished sample's final charges (Metering is the one source of them and of billing's captures). */
const sampleOf = (job: SimJob, request: RunRequest, now: number): RunSample => {
  const rule = ruleOf(request.pricebook, request.variant)
  let cost = 0n
  let overhead = 0n
  let oneOff = 0n
  job.attempts.forEach((attempt, index) => {
    const meter = meterAttempt(attempt, rule, now)
    cost += meter.total
    overhead += meter.total - meter.charges.Running
    if (index === 0) oneOff += meter.charges.Boot
    if (index === job.attempts.length - 1) oneOff += meter.charges.Teardown
  })
  const first = job.attempts[0]
  return {
    cost,
    overhead,
    oneOff,
    coldStartMs: first?.bootedAt === undefined ? undefined : first.bootedAt - first.requestedAt
  }
}

export const simRunSampler: RunSampler = (request) => {
  const spec = sampledSpecOf(request)
  const key = variantKeyOf(request.variant)
  const hosts = request.samples * spec.parallelism
  // Hosts for every sample of the chosen variant, none of any other; no spot trace (the models are the fleet's rates).
  const models = (candidate: Variant): SimProviderModel => ({
    ...request.model,
    capacity: variantKeyOf(candidate) === key ? hosts : 0,
    preemptionTrace: undefined
  })
  const engine = new Engine(samplingEpochMs)
  const capacity = new SimCapacity(engine, new Prng(request.seed).derive("samples"), models)
  const jobKind = jobSimKind()
  const simulation = new Simulation({
    kinds: [jobKind],
    engine,
    capacity,
    catalog: [request.variant.offering],
    trace: { record: () => {} }
  })
  const workload = sampledWorkload(request.workMs)
  const jobs = Array.from(
    { length: request.samples },
    (_, index) => simulation.submit(jobKind, "estimate", `sample-${index}`, spec, workload)
  )
  engine.run(Number.POSITIVE_INFINITY)
  return jobs.map((job) => sampleOf(job, request, engine.now))
}
