/**
 * A scenario file (scenarios/*.json), decoded with Schema: the fleet (which offerings, how many hosts), provider
 * models, the arrival process, the workload mix (Job specs admitted by the Job kind's own schema, with models of how
 * their programs behave), Sandbox sessions, Functions and their call load, faults, the seed and the horizon.
 * docs/simulator.md describes every field.
 */
import { Result, Schema } from "effect"
import { isObject, type Json } from "../../core/Json.ts"
import type { JsonObject } from "../../core/Json.ts"
import { admit } from "../../core/meta/Admission.ts"
import { defaulted, described, duration, oneOf, optional, quantity, usd } from "../../core/meta/Fields.ts"
import { functionKind, FunctionSpec } from "../../kinds/function/FunctionSchema.ts"
import { JobSpec, type JobSpecType, normalizeJob } from "../../kinds/job/JobSchema.ts"
import { sandbox as sandboxKind, SandboxSpec } from "../../kinds/sandbox/SandboxSchema.ts"

const probability = Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 1 }))
const nonNegative = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

export const ProviderSettings = Schema.Struct({
  bootMedian: optional(duration(), "Median boot time."),
  bootSigma: optional(Schema.Number, "Spread of log(boot time)."),
  bootFailureRate: optional(probability, "Probability that a boot fails."),
  preemptionMtbf: optional(duration(), "Mean time between preemptions of an interruptible host."),
  preemptionTrace: optional(
    Schema.String,
    "A spot trace under scenarios/data/spot-traces/ replayed instead of a rate."
  ),
  nodeLossMtbf: optional(duration(), "Mean time between node losses of any host."),
  teardown: optional(duration(), "Teardown time."),
  warmStart: optional(duration(), "Program start on a warm host."),
  restoreBandwidth: optional(quantity(), "Checkpoint save and restore bytes per second.")
})
export type ProviderSettings = typeof ProviderSettings.Type

export const WorkloadSettings = Schema.Struct({
  name: described(Schema.String, "Name prefix of the Jobs."),
  namespace: defaulted(Schema.String, "default", "Project of the Jobs."),
  weight: defaulted(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)), 1, "Relative share of arrivals."),
  job: described(Schema.Record(Schema.String, Schema.Json), "A Job spec, admitted by the Job schema."),
  durationMedian: described(duration(), "Median work of a program."),
  durationSigma: defaulted(Schema.Number, 0, "Spread of log(work)."),
  failureRate: defaulted(probability, 0, "Probability that a run exits with code 1."),
  oomRate: defaulted(probability, 0, "Probability that a run is OOM-killed."),
  checkpointSize: defaulted(quantity(), "1Gi", "Bytes per checkpoint."),
  checkpointFailureRate: defaulted(probability, 0, "Probability that a periodic checkpoint fails."),
  suspendCheckpointFailureRate: defaulted(probability, 0, "Probability that a suspend checkpoint fails.")
})
export type WorkloadSettings = typeof WorkloadSettings.Type

const Window = Schema.Struct({
  at: described(duration(), "Offset from the start."),
  for: described(duration(), "Length.")
})

export const Faults = Schema.Struct({
  preemptionStorms: defaulted(
    Schema.Array(Schema.Struct({ ...Window.fields, factor: described(Schema.Number, "Preemption rate multiplier.") })),
    [],
    "Windows of many preemptions."
  ),
  droughts: defaulted(
    Schema.Array(
      Schema.Struct({ ...Window.fields, capacityFactor: described(probability, "Share of capacity left.") })
    ),
    [],
    "Windows of little capacity."
  ),
  suspendRate: defaulted(probability, 0, "Share of Jobs a customer suspends once, some time into their run."),
  suspendFor: defaulted(duration(), "30m", "How long a suspended Job stays suspended."),
  cancelRate: defaulted(probability, 0, "Share of Jobs a customer cancels some time into their run.")
})
export type Faults = typeof Faults.Type

export const BillingSettings = Schema.Struct({
  credits: described(usd, "Credits granted at the start (USD)."),
  grants: defaulted(
    Schema.Array(Schema.Struct({
      at: described(duration(), "Offset from the start."),
      amountUSD: described(usd, "Credits granted then (a top-up arriving).")
    })),
    [],
    "Credits arriving later."
  )
})
export type BillingSettings = typeof BillingSettings.Type

/**
 * A recorded trace as a workload source (docs/simulator.md, "Trace workloads"): each record becomes a Job created at
 * its recorded instant, working for its recorded run time, on the GPUs it asked for; its node list, when given, is the
 * fleet. One format so far: the Alibaba GPU cluster trace v2023 (src/data/AlibabaGpuTrace.ts).
 */
export const TraceWorkloadSettings = Schema.Struct({
  name: described(
    Schema.String,
    "The workload's name: the Jobs' class in the cost summary, and the key of variants' `workloads` patches."
  ),
  namespace: defaulted(Schema.String, "default", "Project of the Jobs."),
  format: described(oneOf(["alibaba-gpu-v2023"]), "The trace's format."),
  pods: described(Schema.String, "The pod list, a file under scenarios/data/."),
  nodes: optional(
    Schema.String,
    "The node list, a file under scenarios/data/: the fleet's hosts of `offerings` (carved as src/data/AlibabaGpuTrace.ts says)."
  ),
  from: defaulted(
    duration(),
    "0s",
    "Replay the pods created at or after this offset into the trace; the scenario's start is this instant of the trace."
  ),
  offerings: described(
    Schema.Record(Schema.String, Schema.String),
    "The catalog offering a pod asking for 1, 2, 4 or 8 GPUs runs on (the trace's GPUs are priced as these)."
  ),
  job: described(
    Schema.Record(Schema.String, Schema.Json),
    "The Jobs' spec, admitted by the Job schema; resources.gpu.count is each pod's."
  )
})
export type TraceWorkloadSettings = typeof TraceWorkloadSettings.Type

/** A simulated webhook receiver (docs/simulator.md, "Webhooks"): an endpoint's subscription and when it is down. */
export const WebhookSettings = Schema.Struct({
  name: described(Schema.String, "The endpoint's name, as the summary shows it."),
  eventTypes: defaulted(
    Schema.Array(Schema.String),
    ["*"],
    "Event types it takes: exact, <kind>.* or * (as WebhookEndpoint.eventTypes)."
  ),
  projects: defaulted(Schema.Array(Schema.String), [], "Projects whose events it takes; empty: every project."),
  down: defaulted(Schema.Array(Window), [], "Windows in which the receiver answers 503 to every attempt.")
})
export type WebhookSettings = typeof WebhookSettings.Type

/** One command of an agent session's script (docs/simulator.md, "Sandbox sessions"). */
export const SessionStep = Schema.Struct({
  command: described(Schema.Array(Schema.String).check(Schema.isMinLength(1)), "The command's argv."),
  duration: optional(duration(), "How long it runs; else drawn from durationMedian, else 0s."),
  durationMedian: optional(duration(), "Median run time, drawn log-normally with durationSigma."),
  durationSigma: defaulted(Schema.Number, 0, "Spread of log(run time)."),
  background: defaulted(Schema.Boolean, false, "Started in the background: the agent goes on at once."),
  think: optional(duration(), "The agent's think time after it; else drawn from the session's thinkMedian.")
})
export type SessionStep = typeof SessionStep.Type

/**
 * Agent sessions on Sandboxes (docs/simulator.md, "Sandbox sessions"): each creates a Sandbox, runs its script of
 * commands with think times between them, and then leaves it idle (its idleTimeout stops it) or deletes it.
 */
export const SandboxSessionSettings = Schema.Struct({
  name: described(Schema.String, "Name prefix of the Sandboxes."),
  namespace: defaulted(Schema.String, "default", "Project of the Sandboxes."),
  count: described(nonNegative, "How many sessions."),
  meanInterarrival: described(duration(), "Mean time between session starts (Poisson process)."),
  sandbox: described(Schema.Record(Schema.String, Schema.Json), "A Sandbox spec, admitted by the Sandbox schema."),
  annotations: defaulted(
    Schema.Record(Schema.String, Schema.String),
    {},
    "The Sandbox's sim.nodus.dev/* annotations (main-duration, exec-exit-code)."
  ),
  script: described(Schema.Array(SessionStep), "The commands each session runs, in order."),
  thinkMedian: defaulted(duration(), "0s", "Median think time after a command that does not set its own."),
  thinkSigma: defaulted(Schema.Number, 0, "Spread of log(think time)."),
  end: defaulted(
    oneOf(["Idle", "Delete"]),
    "Idle",
    "After the script: Idle (left for idleTimeout to stop it) or Delete."
  )
})
export type SandboxSessionSettings = typeof SandboxSessionSettings.Type

/**
 * The calls a scenario's Function gets (docs/simulator.md, "Functions"): a Poisson process of `count` calls, each
 * running on a worker for a service time drawn log-normally around `durationMedian`, or from token counts under the
 * token-throughput model of src/data/LlmTrace.ts (`tokens`), each try raising with `failureRate`.
 */
export const FunctionCallLoad = Schema.Struct({
  count: described(nonNegative, "How many calls."),
  meanInterarrival: described(duration(), "Mean time between calls (Poisson process)."),
  start: defaulted(duration(), "0s", "When the first call may come, after the scenario's start."),
  durationMedian: defaulted(duration(), "1s", "Median service time of a call on a worker."),
  durationSigma: defaulted(Schema.Number, 0, "Spread of log(service time)."),
  tokens: optional(
    Schema.Struct({
      contextMedian: described(nonNegative, "Median prompt tokens of a call (its input size)."),
      generatedMedian: described(nonNegative, "Median generated tokens of a call."),
      sigma: defaulted(Schema.Number, 0, "Spread of log(tokens)."),
      prefillTokensPerSecond: defaulted(Schema.Number, 10_000, "Prompt tokens a worker reads per second."),
      decodeTokensPerSecond: defaulted(Schema.Number, 100, "Tokens a worker generates per second.")
    }),
    "Service time from token counts (src/data/LlmTrace.ts's model) instead of durationMedian."
  ),
  failureRate: defaulted(probability, 0, "Probability that a try raises (the Function's retries apply)."),
  sessions: defaulted(
    Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)),
    1,
    "Sessions the calls take turns in (FunctionCall.session), round robin."
  )
})
export type FunctionCallLoad = typeof FunctionCallLoad.Type

/** A Function of a scenario and its call load (docs/simulator.md, "Functions"). */
export const FunctionSettings = Schema.Struct({
  name: described(Schema.String, "The Function's name."),
  namespace: defaulted(Schema.String, "default", "Project of the Function."),
  function: described(Schema.Record(Schema.String, Schema.Json), "A Function spec, admitted by the Function schema."),
  workerStart: defaulted(duration(), "0s", "A worker's own start once its host is up (importing its code)."),
  calls: described(FunctionCallLoad, "The calls it gets.")
})
export type FunctionSettings = typeof FunctionSettings.Type

/**
 * A what-if variant (docs/simulator.md, "Reports"): the scenario with its Job templates patched, run from the same seed
 * by `nodus report`. The patches are JSON merge patches (RFC 7396: an object merges, null removes, anything else
 * replaces) of the workloads' Job specs, and the patched specs are admitted by the Job schema like the scenario's own.
 */
export const VariantSettings = Schema.Struct({
  name: described(Schema.String, "The variant's name, as the report shows it."),
  description: optional(Schema.String, "What it changes."),
  job: defaulted(Schema.Record(Schema.String, Schema.Json), {}, "A merge patch applied to every workload's Job spec."),
  workloads: defaulted(
    Schema.Record(Schema.String, Schema.Record(Schema.String, Schema.Json)),
    {},
    "Per workload name, a merge patch of its Job spec (after `job`)."
  ),
  fleet: defaulted(
    Schema.Record(Schema.String, Schema.Json),
    {},
    "A merge patch of the scenario's `fleet` (its hosts)."
  )
})
export type VariantSettings = typeof VariantSettings.Type

export const Scenario = Schema.Struct({
  name: described(Schema.String, "Scenario name."),
  description: optional(Schema.String, "What it shows."),
  seed: described(Schema.String, "Seed of every random draw."),
  start: defaulted(Schema.String, "2026-01-01T00:00:00.000Z", "Virtual start time."),
  horizon: described(duration(), "Arrivals happen within this time."),
  drain: defaulted(duration(), "720h", "Time after the horizon for work to finish (the liveness budget)."),
  fleet: described(
    Schema.Struct({
      offerings: optional(
        Schema.Array(Schema.String),
        "Offering ids in the fleet (default: every one in the catalog)."
      ),
      hostsPerVariant: defaulted(nonNegative, 8, "Hosts of each variant unless `capacity` says otherwise."),
      capacity: defaulted(Schema.Record(Schema.String, nonNegative), {}, "Hosts by offering id or id/interruptible.")
    }),
    "The capacity."
  ),
  providers: defaulted(
    Schema.Struct({
      default: defaulted(ProviderSettings, {}, "Every variant."),
      interruptible: defaulted(ProviderSettings, {}, "Interruptible variants, over the default."),
      byOffering: defaulted(Schema.Record(Schema.String, ProviderSettings), {}, "Per offering id, over the rest.")
    }),
    {},
    "Provider models."
  ),
  arrivals: described(
    Schema.Struct({
      meanInterarrival: described(duration(), "Mean time between arrivals (Poisson process)."),
      count: optional(nonNegative, "Stop after this many arrivals.")
    }),
    "The arrival process."
  ),
  workloads: described(Schema.Array(WorkloadSettings), "The workload mix."),
  traceWorkloads: defaulted(
    Schema.Array(TraceWorkloadSettings),
    [],
    "Recorded traces replayed as Jobs (docs/simulator.md, \"Trace workloads\")."
  ),
  faults: defaulted(Faults, {}, "Injected faults."),
  billing: optional(
    BillingSettings,
    "Bill every run on a ledger with these credits (docs/billing.md); absent: nothing is billed."
  ),
  webhooks: defaulted(
    Schema.Array(WebhookSettings),
    [],
    "Simulated webhook receivers the Jobs' events are delivered to (docs/webhooks.md)."
  ),
  sandboxes: defaulted(
    Schema.Array(SandboxSessionSettings),
    [],
    "Agent sessions on Sandboxes (docs/simulator.md, \"Sandbox sessions\")."
  ),
  functions: defaulted(
    Schema.Array(FunctionSettings),
    [],
    "Functions and the FunctionCalls they get (docs/simulator.md, \"Functions\")."
  ),
  variants: defaulted(
    Schema.Array(VariantSettings),
    [],
    "What-if variants `nodus report` runs from the same seed; the first is the baseline (docs/simulator.md, \"Reports\")."
  )
})
export type Scenario = typeof Scenario.Type

export const decodeScenario = (input: unknown): Scenario => Schema.decodeUnknownSync(Scenario)(input)

/** What is wrong with a scenario file, at a field path (`workloads[0].job.parallelism`). */
export interface ScenarioProblem {
  readonly field: string
  readonly message: string
}

export type ParsedScenario =
  | { readonly ok: true; readonly scenario: Scenario; readonly specs: ReadonlyArray<JobSpecType> }
  | { readonly ok: false; readonly problems: ReadonlyArray<ScenarioProblem> }

const problemsOf = (admitted: ReturnType<typeof admit>, prefix: string): ReadonlyArray<ScenarioProblem> =>
  Result.isSuccess(admitted)
    ? []
    : (admitted.failure.causes ?? [{ field: "", message: admitted.failure.message }]).map((cause) => ({
      field: cause.field === ""
        ? prefix
        : prefix === ""
        ? cause.field
        : cause.field.startsWith("[")
        ? `${prefix}${cause.field}`
        : `${prefix}.${cause.field}`,
      message: cause.message
    }))

/**
 * A scenario file's JSON, decoded strictly (a field the schema does not know is a problem, so a misspelt setting never
 * goes unnoticed), with every workload's Job spec admitted by the Job kind's schema. Problems name their field path.
 */
export const parseScenario = (input: unknown): ParsedScenario => {
  const admitted = admit(Scenario, input, "Strict", {}, "scenario")
  const problems: Array<ScenarioProblem> = [...problemsOf(admitted, "")]
  const specs: Array<JobSpecType> = []
  // The Job and Sandbox specs are admitted from the input as it is, so their problems show even when the rest has some
  // too.
  const workloads = isObject(input as Json) ? (input as JsonObject)["workloads"] : undefined
  if (Array.isArray(workloads)) {
    workloads.forEach((workload, index) => {
      const job = isObject(workload) ? workload["job"] : undefined
      if (!isObject(job)) return
      const spec = admit(JobSpec, normalizeJob(job), "Strict", {}, "Job")
      if (Result.isFailure(spec)) problems.push(...problemsOf(spec, `workloads[${index}].job`))
      else specs.push(spec.success.object as unknown as JobSpecType)
    })
  }
  // A trace workload's template is admitted as one pod's Job (its GPU count is each pod's).
  const traced = isObject(input as Json) ? (input as JsonObject)["traceWorkloads"] : undefined
  if (Array.isArray(traced)) {
    traced.forEach((workload, index) => {
      const job = isObject(workload) ? workload["job"] : undefined
      if (!isObject(job)) return
      const spec = admit(JobSpec, normalizeJob(job), "Strict", {}, "Job")
      problems.push(...problemsOf(spec, `traceWorkloads[${index}].job`))
    })
  }
  const sessions = isObject(input as Json) ? (input as JsonObject)["sandboxes"] : undefined
  if (Array.isArray(sessions)) {
    sessions.forEach((session, index) => {
      const spec = isObject(session) ? session["sandbox"] : undefined
      if (!isObject(spec)) return
      const admittedSpec = admit(SandboxSpec, sandboxKind.normalize!(spec), "Strict", {}, "Sandbox")
      problems.push(...problemsOf(admittedSpec, `sandboxes[${index}].sandbox`))
    })
  }
  const functions = isObject(input as Json) ? (input as JsonObject)["functions"] : undefined
  if (Array.isArray(functions)) {
    functions.forEach((setting, index) => {
      const spec = isObject(setting) ? setting["function"] : undefined
      if (!isObject(spec)) return
      const admittedSpec = admit(FunctionSpec, functionKind.normalize!(spec), "Strict", {}, "Function")
      problems.push(...problemsOf(admittedSpec, `functions[${index}].function`))
    })
  }
  if (problems.length > 0 || Result.isFailure(admitted)) return { ok: false, problems }
  return { ok: true, scenario: admitted.success.object as unknown as Scenario, specs }
}
