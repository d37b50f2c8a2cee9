/**
 * Runs a scenario headless, as fast as the engine goes: builds the fleet and provider models from the scenario and
 * the catalog, drives the arrival process and injected faults, runs every Job to the end of the drain budget, checks
 * liveness, and returns a summary (per Job and totals) with the trace hash. `nodus sim <scenario>` prints it.
 */
import { join } from "node:path"
import { Ledger } from "../../core/billing/Ledger.ts"
import { currentPricebook } from "../../core/billing/Pricebook.ts"
import type { AttemptFacts } from "../../core/capacity/Capacity.ts"
import { type Offering, type Variant, variantKeyOf, variantsOf } from "../../core/capacity/Offering.ts"
import { providerDefaults } from "../../core/capacity/ProviderModels.ts"
import type { ControllerEvent } from "../../core/controller/Controller.ts"
import type { JsonObject } from "../../core/Json.ts"
import { formatMicroUsd, parseMicroUsd } from "../../core/Money.ts"
import { durationMs } from "../../core/StatusText.ts"
import { parseQuantity } from "../../core/Units.ts"
import { admitJobSpec } from "../../kinds/job/JobAdmission.ts"
import { isFinalPhase } from "../../kinds/job/JobPhases.ts"
import type { JobSpecType, JobStatusType } from "../../kinds/job/JobSchema.ts"
import { Checkers } from "./Checkers.ts"
import { CostAccounts, type CostSummary } from "./Costs.ts"
import { Engine } from "./Engine.ts"
import {
  alibabaLeftOut,
  ExposureLog,
  exposureOf,
  type Fidelity,
  preemptionFidelity,
  queueDelayFidelity
} from "./Fidelity.ts"
import { isWaiting, jobSimKind, type SimJob } from "./JobSim.ts"
import { Prng } from "./Prng.ts"
import { type SandboxesSummary, SandboxSessions } from "./SandboxSessions.ts"
import { type ProviderSettings, type Scenario, type WorkloadSettings } from "./Scenario.ts"
import { hourMs, type RunSeries, SeriesRecorder } from "./Series.ts"
import { type ProviderFaults, SimCapacity, type SimProviderModel } from "./SimCapacity.ts"
import { type FunctionsSummary, SimFunctions } from "./SimFunctions.ts"
import type { SimKind } from "./SimObject.ts"
import { Simulation, TraceHash } from "./Simulation.ts"
import { SimWebhooks, type WebhookSummary } from "./SimWebhooks.ts"
import { loadTrace, meanTimeBetweenPreemptionsMs, type SpotTrace } from "./SpotTraces.ts"
import { loadTraceSource, replayTraces, traceFleetCapacity, traceWorkloadProblems } from "./TraceWorkloads.ts"
import { drawWorkload } from "./Workloads.ts"

export const spotTracesDir = new URL("../../../scenarios/data/spot-traces/", import.meta.url).pathname

export interface RunOptions {
  readonly catalog: ReadonlyArray<Offering>
  /** Keep a summary row per Job (off for the million-Job benchmark). */
  readonly perJob?: boolean
  /** Keep the trace's lines (tests print the first divergence). */
  readonly keepTrace?: boolean
  /** Run the checkers (on in tests; the benchmark measures without them too). */
  readonly check?: boolean
  /** Overrides the scenario's seed (the fault swarm). */
  readonly seed?: string
  /** Runs a step on every capacity look, even where it cannot change anything (tests: skipping changes nothing). */
  readonly stepEveryLook?: boolean
  /**
   * Bill a scenario that has no `billing` block (default true: every summary carries its cost). The platform benchmark
   * turns it off: it measures the engine and the controller, and billing 10^6 Jobs takes about 5x their time and a
   * ledger that keeps every operation's key (bench/sim/platform.ts).
   */
  readonly bill?: boolean
  /** Keep the run's series over time (`Summary.series`, for reports; keeps the ledger's postings). */
  readonly series?: boolean
  /** Called as virtual time passes (every simulated hour at most) with the engine's now and events so far. */
  readonly progress?: (now: number, events: number) => void
}

export interface JobSummary {
  readonly name: string
  readonly phase: string
  readonly reason: string | undefined
  readonly attempts: number
  readonly preemptions: number
  readonly nodeLosses: number
  readonly checkpoints: number
  readonly createdAt: string
  readonly completionTime: string | undefined
  /** The Job's status.cost.totalUSD: what the ledger charged it. */
  readonly costUSD?: string | undefined
}

/** The ledger's sums at the end of a billed run (USD strings). */
export interface BillingSummary {
  readonly credits: string
  readonly available: string
  readonly held: string
  readonly charged: string
  readonly arrears: string
}

export interface Summary {
  readonly scenario: string
  readonly seed: string
  readonly traceHash: string
  readonly traceLines: number
  readonly virtualStart: string
  readonly virtualEnd: string
  readonly totals: {
    readonly jobs: number
    readonly byPhase: Readonly<Record<string, number>>
    readonly attempts: number
    readonly preemptions: number
    readonly nodeLosses: number
    readonly bootFailures: number
    readonly checkpoints: number
    readonly engineEvents: number
    /** Steps of every kind's machine (Jobs and Sandboxes: one reconcile loop, Simulation.steps). */
    readonly controllerSteps: number
    /** Capacity looks at a waiting Job that could not change it, answered without a step (Simulation.skippedSteps). */
    readonly skippedSteps: number
  }
  readonly violations: ReadonlyArray<unknown>
  /** What the run cost, from its ledger (docs/simulator.md, "Cost"); absent only with `bill: false`. */
  readonly cost?: CostSummary
  /** The ledger's sums, when the scenario has a `billing` block (its credits). */
  readonly billing?: BillingSummary
  /** Per simulated webhook receiver, when the scenario has some: what was delivered, retried and given up. */
  readonly webhooks?: ReadonlyArray<WebhookSummary>
  /** The agent sessions' Sandboxes, when the scenario has some: phases, idle stops, commands and cost. */
  readonly sandboxes?: SandboxesSummary
  /** The Functions, when the scenario has some: their calls by phase, queue wait and latency, and cost. */
  readonly functions?: FunctionsSummary
  readonly jobs?: ReadonlyArray<JobSummary>
  /**
   * How closely the run follows the traces it replays (docs/simulator.md, "Fidelity"): per spot-trace-driven variant
   * its preemption instants against the trace's, and the trace workloads' queueing delays against the recorded ones.
   */
  readonly fidelity?: Fidelity
  /** The run over time, with `series` (reports). */
  readonly series?: RunSeries
  /** The trace's lines, with `keepTrace` (tests print the first divergence). */
  readonly trace?: ReadonlyArray<string>
}

/** The credits of a scenario without a `billing` block: a billion USD, more than any scenario spends. */
export const defaultCreditsMicro = 10n ** 15n

const finite = (value: number): number | undefined => (Number.isFinite(value) ? value : undefined)

type Settings = { readonly [K in keyof ProviderSettings]?: ProviderSettings[K] | undefined }

/** The fleet and provider settings of a scenario, which the API server's sim backend also fills in (its defaults). */
export interface FleetSettings {
  readonly hostsPerVariant: number
  /** Hosts by offering id or `<id>/interruptible`, over `hostsPerVariant`. */
  readonly capacity: Readonly<Record<string, number>>
  readonly providers: Pick<Scenario["providers"], "default" | "interruptible" | "byOffering">
}

/**
 * A fleet of `hostsPerVariant` hosts of every variant under the provider defaults (the sim backend's, the estimator's).
 */
export const defaultFleet = (hostsPerVariant: number): FleetSettings => ({
  hostsPerVariant,
  capacity: {},
  providers: { default: {}, interruptible: {}, byOffering: {} }
})

/** Provider models per variant: defaults, then the default, interruptible and per-offering settings. */
export const providerModelsOf =
  (fleet: FleetSettings, traces: Map<string, SpotTrace> = new Map()) => (variant: Variant): SimProviderModel => {
    const id = variant.offering.id
    const settings: Settings = {
      ...fleet.providers.default,
      ...(variant.interruptible ? fleet.providers.interruptible : {}),
      ...fleet.providers.byOffering[id]
    }
    const capacity = fleet.capacity[variantKeyOf(variant)] ?? fleet.capacity[id] ?? fleet.hostsPerVariant
    const traceName = variant.interruptible ? settings.preemptionTrace : undefined
    let trace: SpotTrace | undefined
    if (traceName !== undefined) {
      trace = traces.get(traceName)
      if (trace === undefined) traces.set(traceName, trace = loadTrace(join(spotTracesDir, traceName)))
    }
    // A setting the scenario leaves out takes the provider defaults (core/capacity/ProviderModels.ts).
    const defaults = providerDefaults
    return {
      capacity,
      bootMedianMs: durationMs(settings.bootMedian, defaults.bootMedianMs),
      bootSigma: settings.bootSigma ?? defaults.bootSigma,
      bootFailureRate: settings.bootFailureRate ?? defaults.bootFailureRate,
      preemptionMtbfMs: !variant.interruptible
        ? undefined
        : trace === undefined
        ? durationMs(settings.preemptionMtbf, defaults.preemptionMtbfMs!)
        : finite(meanTimeBetweenPreemptionsMs(trace)),
      preemptionTrace: trace,
      nodeLossMtbfMs: settings.nodeLossMtbf === undefined
        ? defaults.nodeLossMtbfMs
        : durationMs(settings.nodeLossMtbf, 0) || undefined,
      teardownMs: durationMs(settings.teardown, defaults.teardownMs),
      warmStartMs: durationMs(settings.warmStart, defaults.warmStartMs),
      restoreBytesPerSecond: settings.restoreBandwidth === undefined
        ? defaults.restoreBytesPerSecond
        : parseQuantity(settings.restoreBandwidth) ?? defaults.restoreBytesPerSecond
    }
  }

/** Fault windows as a function of time: storms multiply preemption rates, droughts shrink capacity. */
const faultsOf = (scenario: Scenario, start: number): ProviderFaults => {
  const storms = scenario.faults.preemptionStorms.map((storm) => ({
    from: start + durationMs(storm.at, 0),
    to: start + durationMs(storm.at, 0) + durationMs(storm.for, 0),
    factor: storm.factor
  }))
  const droughts = scenario.faults.droughts.map((drought) => ({
    from: start + durationMs(drought.at, 0),
    to: start + durationMs(drought.at, 0) + durationMs(drought.for, 0),
    factor: drought.capacityFactor
  }))
  // Outside every window (most of a run) one answer serves: the capacity reads it at every placement look.
  const calm = { preemptionFactor: 1, capacityFactor: 1 } as const
  return (_variant, now) => {
    let preemptionFactor = 1
    let capacityFactor = 1
    for (const storm of storms) if (now >= storm.from && now < storm.to) preemptionFactor *= storm.factor
    for (const drought of droughts) if (now >= drought.from && now < drought.to) capacityFactor *= drought.factor
    return preemptionFactor === 1 && capacityFactor === 1 ? calm : { preemptionFactor, capacityFactor }
  }
}

const fleetOf = (scenario: Scenario, catalog: ReadonlyArray<Offering>): ReadonlyArray<Offering> => {
  const wanted = scenario.fleet.offerings
  if (wanted === undefined) return catalog
  const chosen = catalog.filter((offering) => wanted.includes(offering.id))
  const missing = wanted.filter((id) => !chosen.some((offering) => offering.id === id))
  if (missing.length > 0) throw new Error(`scenario ${scenario.name}: unknown offerings ${missing.join(", ")}`)
  return chosen
}

/** The problem a scenario's references raise against the catalog and the traces (a field path and what is wrong). */
export const scenarioProblems = (
  scenario: Scenario,
  catalog: ReadonlyArray<Offering>
): ReadonlyArray<{ readonly field: string; readonly message: string }> => {
  const problems: Array<{ field: string; message: string }> = []
  const known = new Set(catalog.map((offering) => offering.id))
  scenario.fleet.offerings?.forEach((id, index) => {
    if (!known.has(id)) {
      problems.push({ field: `fleet.offerings[${index}]`, message: `no offering ${JSON.stringify(id)} in the catalog` })
    }
  })
  const fleet = new Set(scenario.fleet.offerings ?? known)
  for (const key of Object.keys(scenario.fleet.capacity)) {
    const id = key.endsWith("/interruptible") ? key.slice(0, -"/interruptible".length) : key
    if (!fleet.has(id)) {
      problems.push({
        field: `fleet.capacity[${key}]`,
        message: `${JSON.stringify(id)} is not an offering of the fleet`
      })
    }
  }
  for (const id of Object.keys(scenario.providers.byOffering)) {
    if (!fleet.has(id)) {
      problems.push({
        field: `providers.byOffering[${id}]`,
        message: `${JSON.stringify(id)} is not an offering of the fleet`
      })
    }
  }
  const traceAt = (field: string, name: string | undefined) => {
    if (name === undefined) return
    try {
      loadTrace(join(spotTracesDir, name))
    } catch (error) {
      const why = (error as { code?: string }).code === "ENOENT"
        ? `no spot trace ${name} under scenarios/data/spot-traces/`
        : (error as Error).message
      problems.push({ field, message: why })
    }
  }
  scenario.traceWorkloads.forEach((workload, index) => problems.push(...traceWorkloadProblems(workload, index, fleet)))
  traceAt("providers.default.preemptionTrace", scenario.providers.default.preemptionTrace)
  traceAt("providers.interruptible.preemptionTrace", scenario.providers.interruptible.preemptionTrace)
  for (const [id, settings] of Object.entries(scenario.providers.byOffering)) {
    traceAt(`providers.byOffering[${id}].preemptionTrace`, settings.preemptionTrace)
  }
  return problems
}

export const runScenario = (scenario: Scenario, options: RunOptions): Summary => {
  const seed = options.seed ?? scenario.seed
  const start = Date.parse(scenario.start)
  const engine = new Engine(start)
  const random = new Prng(seed)
  const traces = new Map<string, SpotTrace>()
  const catalog = fleetOf(scenario, options.catalog)
  const traceSources = scenario.traceWorkloads.map(loadTraceSource)
  // A trace's node list gives its offerings' hosts; the scenario's own `capacity` still has the last word.
  const fleet: FleetSettings = {
    hostsPerVariant: scenario.fleet.hostsPerVariant,
    capacity: { ...traceFleetCapacity(traceSources), ...scenario.fleet.capacity },
    providers: scenario.providers
  }
  const models = providerModelsOf(fleet, traces)
  const capacity = new SimCapacity(engine, random.derive("capacity"), models, faultsOf(scenario, start))
  const trace = new TraceHash(options.keepTrace === true)
  const checkers = options.check === false ? undefined : new Checkers(seed)
  const finished: Array<JobSummary> = []
  const counts = { jobs: 0, attempts: 0, preemptions: 0, nodeLosses: 0, bootFailures: 0, checkpoints: 0 }
  const byPhase: Record<string, number> = {}
  // Fidelity: the runs of every spot-trace-driven variant, and each replayed pod's recorded queueing delay.
  const traceOf = new Map<string, SpotTrace | undefined>()
  const exposures = new Map<string, ExposureLog>()
  const expose = (attempts: ReadonlyArray<AttemptFacts>) => {
    for (const attempt of attempts) {
      if (!attempt.variant.interruptible) continue
      const key = variantKeyOf(attempt.variant)
      if (!traceOf.has(key)) traceOf.set(key, models(attempt.variant).preemptionTrace)
      if (traceOf.get(key) === undefined) continue
      const exposure = exposureOf(attempt)
      if (exposure === undefined) continue
      let log = exposures.get(key)
      if (log === undefined) exposures.set(key, log = new ExposureLog())
      log.add(exposure)
    }
  }
  const recordedDelay = new WeakMap<SimJob, number>()
  const delays: Array<{ recorded: number; simulated: number | undefined }> = []
  // Once per Job: when it is deleted (onDeleted, once: a deleted Job is stepped no more), or at the end for the Jobs
  // still there (not deleted).
  const record = (job: SimJob) => {
    expose(job.attempts)
    const delay = recordedDelay.get(job)
    if (delay !== undefined) {
      const first = job.attempts[0]
      delays.push({
        recorded: delay,
        simulated: first === undefined ? undefined : (first.requestedAt - job.createdAt) / 1000
      })
    }
    costs?.runs(job.uid, job.attempts)
    series?.job(job)
    const phase = job.status.phase ?? "Pending"
    byPhase[phase] = (byPhase[phase] ?? 0) + 1
    let preemptions = 0
    let nodeLosses = 0
    for (const attempt of job.attempts) {
      if (attempt.outcome?.type === "Preempted") preemptions++
      if (attempt.outcome?.type === "NodeLost") nodeLosses++
      if (attempt.outcome?.type === "BootFailed") counts.bootFailures++
    }
    counts.attempts += job.attempts.length
    counts.preemptions += preemptions
    counts.nodeLosses += nodeLosses
    counts.checkpoints += job.status.checkpoint?.seq ?? 0
    if (options.perJob !== false) {
      finished.push({
        name: `${job.namespace}/${job.name}`,
        phase,
        reason: job.status.reason,
        attempts: job.attempts.length,
        preemptions,
        nodeLosses,
        checkpoints: job.status.checkpoint?.seq ?? 0,
        createdAt: new Date(job.createdAt).toISOString(),
        completionTime: job.status.completionTime,
        ...(job.status.cost === undefined ? {} : { costUSD: job.status.cost.totalUSD })
      })
    }
  }
  // Every run is billed on a ledger, as the server bills every run; without a `billing` block the credits are ample
  // (defaultCredits), so money never holds a Job back and the run is what it would be unbilled, but for the order of
  // looks at a freed host (billing wakes a Job when its host is released, as in the server).
  const billed = scenario.billing !== undefined || options.bill !== false
  const ledger = billed ? new Ledger({ retain: options.perJob !== false || options.series === true }) : undefined
  const pricebook = currentPricebook
  const costs = ledger === undefined ? undefined : new CostAccounts(ledger, pricebook)
  const series = options.series === true ? new SeriesRecorder(start) : undefined
  const webhooks = scenario.webhooks.length === 0 ?
    undefined :
    new SimWebhooks(
      engine,
      scenario.webhooks.map((endpoint) => ({
        name: endpoint.name,
        eventTypes: endpoint.eventTypes,
        projects: endpoint.projects,
        down: endpoint.down.map((window) => ({
          from: start + durationMs(window.at, 0),
          to: start + durationMs(window.at, 0) + durationMs(window.for, 0)
        }))
      })),
      trace
    )
  const jobs = jobSimKind({
    checkers,
    onDeleted: record,
    onEvent: webhooks === undefined
      ? undefined
      : (job: SimJob, event: ControllerEvent) =>
        event.type === undefined || webhooks.event(event.type, job.namespace, job.uid)
  })
  // Sandbox sessions and Functions draw from their own generators, so a scenario without them runs as it did before
  // they existed.
  const driver = (name: string) => ({
    engine,
    capacity,
    trace,
    random: random.derive(name),
    ledger
  })
  const sandboxes = scenario.sandboxes.length === 0 ? undefined : new SandboxSessions(driver("sandboxes"))
  const functions = scenario.functions.length === 0 ? undefined : new SimFunctions(driver("functions"))
  // Every kind the scenario runs, through the one reconcile loop.
  const simulation = new Simulation({
    engine,
    capacity,
    catalog,
    trace,
    kinds: [
      jobs,
      ...(sandboxes === undefined ? [] : [sandboxes.kind]),
      ...(functions === undefined ? [] : [functions.kind])
    ],
    stepEveryLook: options.stepEveryLook === true,
    billing: ledger === undefined ? undefined : { ledger, pricebook }
  })
  sandboxes?.arrive(simulation, scenario.sandboxes)
  functions?.arrive(simulation, scenario.functions)
  if (ledger !== undefined && scenario.billing !== undefined) {
    grants(
      scenario,
      engine,
      ledger,
      () => simulation.fundsChanged(),
      trace,
      start
    )
  } // Not a line of the trace: the default credits are how an unbilled scenario is priced, not an event of its run.
  else ledger?.grant("grant/default", start, defaultCreditsMicro, "default")
  // Capacity comes back when a drought ends.
  for (const drought of scenario.faults.droughts) {
    engine.at(start + durationMs(drought.at, 0) + durationMs(drought.for, 0), () => simulation.capacityChanged())
  }
  const specs = scenario.workloads.map((workload) => admitJobSpec(workload.job as JsonObject))
  // A scenario whose Jobs all come from traces has no mix to draw from.
  if (scenario.workloads.length > 0) {
    arrivals(
      scenario,
      engine,
      random,
      simulation,
      jobs,
      specs,
      start,
      counts,
      (job, settings) => costs?.job(job.uid, settings.name, job.spec)
    )
  }
  replayTraces(
    traceSources,
    engine,
    simulation,
    jobs,
    start,
    start + durationMs(scenario.horizon, 0),
    (job, source, pod, spec) => {
      counts.jobs++
      costs?.job(job.uid, source.settings.name, spec)
      if (pod.scheduled !== undefined) recordedDelay.set(job, pod.scheduled - pod.creation)
    }
  )
  const end = start + durationMs(scenario.horizon, 0) + durationMs(scenario.drain, 0)
  if (options.progress === undefined) engine.run(end)
  else {
    // Hour by hour, so a long run can say how far it is (the engine runs the same events in the same order).
    for (let until = start + hourMs;; until += hourMs) {
      engine.run(Math.min(until, end))
      options.progress(engine.now, engine.processed)
      if (until >= end) break
    }
  }
  const unfinished = [...simulation.objectsOf(jobs).values()]
  checkers?.liveness(unfinished, isWaiting, engine.now)
  for (const job of unfinished) record(job)
  for (const sandbox of sandboxes?.owners() ?? []) {
    costs?.sandbox(sandbox.uid)
    costs?.runs(sandbox.uid, sandbox.attempts)
    expose(sandbox.attempts)
  }
  for (const fn of functions?.owners() ?? []) {
    costs?.function(fn.uid)
    costs?.runs(fn.uid, fn.attempts)
    expose(fn.attempts)
  }
  const preemptions = [...exposures.keys()].sort().map((key) =>
    preemptionFidelity(key, traceOf.get(key)!, exposures.get(key)!.exposures(), start, engine.now)
  )
  const fidelity: Fidelity = {
    ...(preemptions.length === 0 ? {} : { preemptions }),
    ...(traceSources.length === 0 ? {} : { queueDelay: queueDelayFidelity(delays, alibabaLeftOut) })
  }
  if (checkers !== undefined) {
    for (const offering of catalog) {
      for (const variant of variantsOf(offering)) {
        checkers.capacity(variantKeyOf(variant), capacity.inUse(variant), capacity.capacityOf(variant), engine.now)
      }
    }
  }
  finished.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return {
    scenario: scenario.name,
    seed,
    traceHash: trace.digest(),
    traceLines: trace.count,
    virtualStart: new Date(start).toISOString(),
    virtualEnd: new Date(engine.now).toISOString(),
    totals: {
      ...counts,
      byPhase,
      engineEvents: engine.processed,
      controllerSteps: simulation.steps,
      skippedSteps: simulation.skippedSteps
    },
    violations: checkers?.violations ?? [],
    ...(costs === undefined ? {} : { cost: costs.summary(engine.now) }),
    ...(ledger === undefined || scenario.billing === undefined ? {} : { billing: billingSummary(ledger) }),
    ...(webhooks === undefined ? {} : { webhooks: webhooks.summary() }),
    ...(sandboxes === undefined ? {} : { sandboxes: sandboxes.summary() }),
    ...(functions === undefined ? {} : { functions: functions.summary() }),
    ...(Object.keys(fidelity).length === 0 ? {} : { fidelity }),
    ...(options.perJob === false ? {} : { jobs: finished }),
    ...(series === undefined ? {} : { series: series.finish(ledger?.postings ?? []) }),
    ...(trace.lines === undefined ? {} : { trace: trace.lines })
  }
}

/** The scenario's credits: granted at the start and later (a top-up arriving), each one waking what money held back. */
const grants = (
  scenario: Scenario,
  engine: Engine,
  ledger: Ledger,
  fundsChanged: () => void,
  trace: TraceHash,
  start: number
) => {
  const billing = scenario.billing!
  const grant = (name: string, amount: string) => {
    ledger.grant(`grant/${name}`, engine.now, parseMicroUsd(amount), name)
    trace.record(
      `${engine.now} billing Grant ${name} ${amount} available=${formatMicroUsd(ledger.available)} arrears=${
        formatMicroUsd(ledger.arrears)
      }`
    )
    fundsChanged()
  }
  grant("starter", billing.credits)
  billing.grants.forEach((later, index) =>
    engine.at(start + durationMs(later.at, 0), () => grant(`grant-${index + 1}`, later.amountUSD))
  )
}

const billingSummary = (ledger: Ledger): BillingSummary => ({
  credits: formatMicroUsd(ledger.credits),
  available: formatMicroUsd(ledger.available),
  held: formatMicroUsd(ledger.held),
  charged: formatMicroUsd(ledger.charged),
  arrears: formatMicroUsd(ledger.arrears)
})

/** The Poisson arrival process, the workload mix and the customer faults (suspends, cancels). */
const arrivals = (
  scenario: Scenario,
  engine: Engine,
  random: Prng,
  simulation: Simulation,
  jobs: SimKind<JobSpecType, JobStatusType>,
  specs: ReadonlyArray<JobSpecType>,
  start: number,
  counts: { jobs: number },
  submitted: (job: SimJob, settings: WorkloadSettings) => void
) => {
  const arrivalRandom = random.derive("arrivals")
  const mixRandom = random.derive("mix")
  const workloadRandom = random.derive("workloads")
  const customerRandom = random.derive("customers")
  const meanMs = durationMs(scenario.arrivals.meanInterarrival, 60_000)
  const horizonEnd = start + durationMs(scenario.horizon, 0)
  const limit = scenario.arrivals.count ?? Number.POSITIVE_INFINITY
  const totalWeight = scenario.workloads.reduce((sum, workload) => sum + workload.weight, 0)
  const pick = (): number => {
    let ticket = mixRandom.uniform() * totalWeight
    for (let index = 0; index < scenario.workloads.length; index++) {
      ticket -= scenario.workloads[index]!.weight
      if (ticket < 0) return index
    }
    return scenario.workloads.length - 1
  }
  const suspendForMs = durationMs(scenario.faults.suspendFor, 30 * 60_000)
  const arrive = () => {
    if (counts.jobs >= limit || engine.now >= horizonEnd) return
    const index = pick()
    const settings: WorkloadSettings = scenario.workloads[index]!
    const spec = specs[index]!
    // Joined: one flat string, which the Job keeps (a template's rope is twice its size and is read at every launch).
    const job = simulation.submit(
      jobs,
      settings.namespace,
      [settings.name, ++counts.jobs].join("-"),
      spec,
      drawWorkload(settings, workloadRandom)
    )
    submitted(job, settings)
    // Customers act some time within twice the workload's median run.
    const someTimeIntoTheRun = () =>
      Math.round(customerRandom.uniform() * 2 * durationMs(settings.durationMedian, 60_000))
    if (customerRandom.chance(scenario.faults.suspendRate)) {
      engine.after(someTimeIntoTheRun(), () => {
        if (job.deleted || isFinalPhase(job.status.phase ?? "Pending")) return
        simulation.update(job, { ...job.spec, state: "Suspended" })
        // The customer resumes what they suspended, unless it was cancelled meanwhile.
        engine.after(
          suspendForMs,
          () =>
            !job.deleted && job.spec.state === "Suspended" && simulation.update(job, { ...job.spec, state: "Running" })
        )
      })
    }
    if (customerRandom.chance(scenario.faults.cancelRate)) {
      engine.after(
        someTimeIntoTheRun(),
        () =>
          !job.deleted && !isFinalPhase(job.status.phase ?? "Pending") &&
          simulation.update(job, { ...job.spec, state: "Cancelled" })
      )
    }
    engine.after(Math.max(1, Math.round(arrivalRandom.exponential(meanMs))), arrive)
  }
  engine.after(Math.round(arrivalRandom.exponential(meanMs)), arrive)
}
