/**
 * The platform benchmark's run, in a process of its own (`npm run bench:sim -- --section platform` starts it): the
 * scenario scenarios/bench-platform.json — 30 simulated days of a 10,000-host fleet taking about 10^6 Jobs with
 * preemptions, checkpoints, a preemption storm and a capacity drought — run headless by `runScenario`, with no
 * per-Job rows and unbilled (`bill: false`: it measures the engine and the controller; a billed run takes about 5x as
 * long at 20,000 arrivals). Prints one JSON line: the totals, the trace hash, wall and CPU time, and the peak resident
 * memory.
 *
 *   node bench/sim/platform.ts [--scenario scenarios/bench-platform.json] [--no-check] [--arrivals N] [--seed S]
 *
 * `--arrivals N` stops after N Jobs (a shorter run of the same scenario, for profiling).
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { runScenario } from "../../src/backends/sim/Run.ts"
import { parseScenario } from "../../src/backends/sim/Scenario.ts"
import { loadCatalog } from "../../src/data/CatalogData.ts"

export interface PlatformResult {
  readonly scenario: string
  readonly seed: string
  readonly check: boolean
  readonly wallMs: number
  readonly cpuMs: number
  readonly maxRssBytes: number
  readonly jobs: number
  readonly byPhase: Readonly<Record<string, number>>
  readonly attempts: number
  readonly preemptions: number
  readonly nodeLosses: number
  readonly checkpoints: number
  readonly engineEvents: number
  readonly controllerSteps: number
  readonly skippedSteps: number
  readonly traceHash: string
  readonly traceLines: number
  readonly violations: number
}

const flag = (argv: ReadonlyArray<string>, name: string): string | undefined => {
  const index = argv.indexOf(`--${name}`)
  return index === -1 ? undefined : argv[index + 1]
}

export const runPlatform = (argv: ReadonlyArray<string>): PlatformResult => {
  const file = flag(argv, "scenario") ?? join(import.meta.dirname, "../../scenarios/bench-platform.json")
  const parsed = parseScenario(JSON.parse(readFileSync(file, "utf8")))
  if (!parsed.ok) {
    throw new Error(`${file}: ${parsed.problems.map((problem) => `${problem.field}: ${problem.message}`).join("; ")}`)
  }
  const arrivals = flag(argv, "arrivals")
  const scenario = arrivals === undefined
    ? parsed.scenario
    : { ...parsed.scenario, arrivals: { ...parsed.scenario.arrivals, count: Number(arrivals) } }
  const check = !argv.includes("--no-check")
  const seed = flag(argv, "seed")
  const catalog = loadCatalog()
  const cpu = process.cpuUsage()
  const started = performance.now()
  const summary = runScenario(scenario, {
    catalog,
    perJob: false,
    check,
    bill: false,
    ...(seed === undefined ? {} : { seed })
  })
  const wallMs = performance.now() - started
  const used = process.cpuUsage(cpu)
  const { totals } = summary
  return {
    scenario: summary.scenario,
    seed: summary.seed,
    check,
    wallMs,
    cpuMs: (used.user + used.system) / 1000,
    // resourceUsage().maxRSS is in kibibytes.
    maxRssBytes: process.resourceUsage().maxRSS * 1024,
    jobs: totals.jobs,
    byPhase: totals.byPhase,
    attempts: totals.attempts,
    preemptions: totals.preemptions,
    nodeLosses: totals.nodeLosses,
    checkpoints: totals.checkpoints,
    engineEvents: totals.engineEvents,
    controllerSteps: totals.controllerSteps,
    skippedSteps: totals.skippedSteps,
    traceHash: summary.traceHash,
    traceLines: summary.traceLines,
    violations: summary.violations.length
  }
}

if (import.meta.main) process.stdout.write(`${JSON.stringify(runPlatform(process.argv.slice(2)))}\n`)
