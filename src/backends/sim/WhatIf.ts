/**
 * What-if runs (docs/simulator.md, "Reports"): a scenario's `variants` each patch the workloads' Job templates (their
 * interruptible policy, profile, continuity, maxCostUSD cap, …) and run from the same seed; the report's data is what
 * each run's ledger charged (Costs.ts), its series over time (Series.ts), its queue waits and completion times as
 * percentiles, and the savings of each variant against the baseline (the first), exact in micro-USD. Virtual time and
 * ledger sums only: the same scenario and seed give the same data, byte for byte.
 */
import type { Offering } from "../../core/capacity/Offering.ts"
import type { Json, JsonObject } from "../../core/Json.ts"
import * as MergePatch from "../../core/meta/MergePatch.ts"
import { formatMicroUsd, parseMicroUsd } from "../../core/Money.ts"
import { durationMs } from "../../core/StatusText.ts"
import type { CostSummary } from "./Costs.ts"
import type { Fidelity } from "./Fidelity.ts"
import { runScenario, scenarioProblems, type Summary } from "./Run.ts"
import { parseScenario, type Scenario, type ScenarioProblem } from "./Scenario.ts"
import type { RunSeries } from "./Series.ts"

export interface Variant {
  readonly name: string
  readonly description: string | undefined
  readonly scenario: Scenario
}

export type ParsedVariants =
  | { readonly ok: true; readonly scenario: Scenario; readonly variants: ReadonlyArray<Variant> }
  | { readonly ok: false; readonly problems: ReadonlyArray<ScenarioProblem> }

/**
 * A scenario file's variants, each the file with its Job templates patched and decoded as strictly as the file (a
 * problem names the variant's field, `variants[1].workloads.sweep.recovery.continuity`). A file without variants has
 * one: itself, named `as-written`.
 */
export const parseVariants = (input: unknown, catalog: ReadonlyArray<Offering>): ParsedVariants => {
  const parsed = parseScenario(input)
  if (!parsed.ok) return parsed
  const base = parsed.scenario
  const problems: Array<ScenarioProblem> = [...scenarioProblems(base, catalog)]
  if (problems.length > 0) return { ok: false, problems }
  if (base.variants.length === 0) {
    return {
      ok: true,
      scenario: base,
      variants: [{ name: "as-written", description: "The scenario as written.", scenario: base }]
    }
  }
  const file = input as JsonObject
  const names = new Set<string>()
  const variants: Array<Variant> = []
  base.variants.forEach((settings, index) => {
    const at = `variants[${index}]`
    if (names.has(settings.name)) {
      problems.push({ field: `${at}.name`, message: `another variant is named ${JSON.stringify(settings.name)}` })
    }
    names.add(settings.name)
    const known = new Set([...base.workloads, ...base.traceWorkloads].map((workload) => workload.name))
    for (const name of Object.keys(settings.workloads)) {
      if (!known.has(name)) {
        problems.push({
          field: `${at}.workloads.${name}`,
          message: `no workload named ${JSON.stringify(name)} (the scenario has ${[...known].join(", ")})`
        })
      }
    }
    const patch = (list: Json | undefined) =>
      ((list ?? []) as ReadonlyArray<JsonObject>).map((workload) => {
        const own = settings.workloads[String(workload["name"])]
        const job = MergePatch.apply(
          MergePatch.apply(workload["job"], settings.job as JsonObject),
          (own ?? {}) as JsonObject
        )
        return { ...workload, job }
      })
    const { variants: _, ...rest } = file
    const patched = parseScenario({
      ...rest,
      workloads: patch(file["workloads"]),
      ...(file["traceWorkloads"] === undefined ? {} : { traceWorkloads: patch(file["traceWorkloads"]) }),
      ...(Object.keys(settings.fleet).length === 0
        ? {}
        : { fleet: MergePatch.apply(file["fleet"], settings.fleet as JsonObject) })
    })
    if (!patched.ok) {
      // A patched Job spec's problem is the variant's: the variant, then the field of the file its patch made wrong.
      for (const problem of patched.problems) {
        problems.push({ field: `${at}: ${problem.field}`, message: problem.message })
      }
      return
    }
    variants.push({ name: settings.name, description: settings.description, scenario: patched.scenario })
  })
  return problems.length > 0 ? { ok: false, problems } : { ok: true, scenario: base, variants }
}

/** Percentiles of an ascending list (nearest rank), in the list's unit; undefined when empty. */
export const percentile = (ascending: ReadonlyArray<number>, p: number): number | undefined =>
  ascending.length === 0
    ? undefined
    : ascending[Math.min(ascending.length - 1, Math.max(0, Math.ceil((p / 100) * ascending.length) - 1))]

export const reportPercentiles = [50, 75, 90, 95, 99] as const

export interface VariantResult {
  readonly name: string
  readonly description: string | undefined
  readonly totals:
    & Pick<Summary["totals"], "jobs" | "byPhase" | "attempts" | "preemptions" | "nodeLosses" | "checkpoints">
    & {
      /** Replacement runs after a lost capacity. */
      readonly restores: number
    }
  readonly violations: number
  readonly traceHash: string
  readonly cost: CostSummary
  /** The baseline's total less this variant's (USD, exact); positive: this variant costs less. */
  readonly savingsUSD: string
  /** The run over time; its queue waits as `queueWaitCurve` (every Job's list would make a report megabytes). */
  readonly series: Omit<RunSeries, "queueWaitSeconds" | "completionSeconds">
  /** Queue wait in seconds at every percentile of the Jobs that launched, p0 to p100 (101 values; empty: none). */
  readonly queueWaitCurve: ReadonlyArray<number>
  /** How closely the run follows the traces it replays (Run.ts `Fidelity`), when it replays some. */
  readonly fidelity?: Fidelity
  /** Seconds, at `reportPercentiles`. */
  readonly queueWaitSeconds: Readonly<Record<string, number | null>>
  readonly completionSeconds: Readonly<Record<string, number | null>>
}

export interface ReportData {
  readonly scenario: string
  readonly description: string | undefined
  readonly seed: string
  readonly virtualStart: string
  readonly baseline: string
  readonly variants: ReadonlyArray<VariantResult>
}

export interface WhatIfProgress {
  readonly variant: number
  readonly variants: number
  readonly name: string
  /** Virtual ms this variant has run, of `spanMs`. */
  readonly doneMs: number
  readonly spanMs: number
  readonly events: number
}

const percentilesOf = (ascending: ReadonlyArray<number>) =>
  Object.fromEntries(reportPercentiles.map((p) => [`p${p}`, percentile(ascending, p) ?? null]))

/** Runs every variant from the same seed (or `seed`), in order, and gathers the report's data. */
export const runWhatIf = (
  scenario: Scenario,
  variants: ReadonlyArray<Variant>,
  options: {
    readonly catalog: ReadonlyArray<Offering>
    readonly seed?: string
    readonly progress?: (progress: WhatIfProgress) => void
  }
): ReportData => {
  const runs = variants.map((variant, index) => {
    const start = Date.parse(variant.scenario.start)
    const spanMs = durationMs(variant.scenario.horizon, 0) + durationMs(variant.scenario.drain, 0)
    const summary = runScenario(variant.scenario, {
      catalog: options.catalog,
      perJob: false,
      series: true,
      ...(options.seed === undefined ? {} : { seed: options.seed }),
      ...(options.progress === undefined ? {} : {
        progress: (now: number, events: number) =>
          options.progress!({
            variant: index,
            variants: variants.length,
            name: variant.name,
            doneMs: now - start,
            spanMs,
            events
          })
      })
    })
    return { variant, summary }
  })
  const baselineMicro = parseMicroUsd(runs[0]!.summary.cost!.total.totalUSD)
  return {
    scenario: scenario.name,
    description: scenario.description,
    seed: runs[0]!.summary.seed,
    virtualStart: runs[0]!.summary.virtualStart,
    baseline: variants[0]!.name,
    variants: runs.map(({ variant, summary }): VariantResult => {
      const { queueWaitSeconds, completionSeconds, ...series } = summary.series!
      const { jobs, byPhase, attempts, preemptions, nodeLosses, checkpoints } = summary.totals
      return {
        name: variant.name,
        description: variant.description,
        totals: {
          jobs,
          byPhase,
          attempts,
          preemptions,
          nodeLosses,
          restores: series.restores.reduce((sum, count) => sum + count, 0),
          checkpoints
        },
        violations: summary.violations.length,
        traceHash: summary.traceHash,
        cost: summary.cost!,
        savingsUSD: formatMicroUsd(baselineMicro - parseMicroUsd(summary.cost!.total.totalUSD)),
        series,
        queueWaitCurve: queueWaitSeconds.length === 0
          ? []
          : Array.from({ length: 101 }, (_, p) => percentile(queueWaitSeconds, p)!),
        ...(summary.fidelity === undefined ? {} : { fidelity: summary.fidelity }),
        queueWaitSeconds: percentilesOf(queueWaitSeconds),
        completionSeconds: percentilesOf(completionSeconds)
      }
    })
  }
}
