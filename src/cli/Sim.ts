/**
 * `nodus sim <scenario>`: runs a scenario file headless, as fast as the engine goes, and writes its summary (totals,
 * trace hash, checker violations, the Functions' calls, latency and cost when the scenario has Functions, and, unless
 * `--per-job=false`, a row per Job) as JSON to `--out <file>` or stdout, with one line for humans on stderr (the
 * Functions' part included). Exit codes: 0 clean run, 1 the checkers found violations (printed), 2 bad
 * usage or a bad scenario file (the field path and what is wrong; never a stack trace).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { fidelityText } from "../backends/sim/Fidelity.ts"
import { runScenario, scenarioProblems, type Summary } from "../backends/sim/Run.ts"
import { parseScenario } from "../backends/sim/Scenario.ts"
import type { FunctionsSummary, Percentiles } from "../backends/sim/SimFunctions.ts"
import { loadCatalog } from "../data/CatalogData.ts"

/** The repository's scenarios (a bare name resolves here). */
export const scenariosDir = fileURLToPath(new URL("../../scenarios/", import.meta.url))

export const simUsage = `Usage: nodus sim <scenario> [flags]

Runs a scenario (a file, or a name under scenarios/, e.g. mixed-fleet) headless and prints its JSON summary.

Flags:
  --out <file>         write the JSON summary to <file> instead of stdout
  --seed <seed>        override the scenario's seed
  --no-check           do not run the checkers (faster; no violations are reported)
  --per-job=false      leave out the row per Job (for big runs)
  --trace <file>       write the event trace, one line per event (keeps every line in memory)

Exit status: 0 clean run, 1 checker violations (printed), 2 bad usage or scenario file.
`

class UsageError extends Error {}

interface SimFlags {
  readonly scenario: string
  readonly out: string | undefined
  readonly seed: string | undefined
  readonly check: boolean
  readonly perJob: boolean
  readonly trace: string | undefined
}

const booleanOf = (flag: string, text: string): boolean => {
  if (text === "true") return true
  if (text === "false") return false
  throw new UsageError(`--${flag} takes true or false, not ${JSON.stringify(text)}`)
}

const parseFlags = (args: ReadonlyArray<string>): SimFlags | "help" => {
  const positional: Array<string> = []
  const values: Record<string, string> = {}
  let check = true
  let perJob = true
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!
    if (arg === "--help" || arg === "-h") return "help"
    if (!arg.startsWith("--") || arg === "-") {
      positional.push(arg)
      continue
    }
    const equals = arg.indexOf("=")
    const name = equals === -1 ? arg.slice(2) : arg.slice(2, equals)
    const inline = equals === -1 ? undefined : arg.slice(equals + 1)
    switch (name) {
      case "no-check":
      case "no-per-job":
        if (inline !== undefined) throw new UsageError(`--${name} takes no value`)
        if (name === "no-check") check = false
        else perJob = false
        break
      case "check":
      case "per-job": {
        const value = inline ?? (args[index + 1] === "true" || args[index + 1] === "false" ? args[++index]! : "true")
        if (name === "check") check = booleanOf(name, value)
        else perJob = booleanOf(name, value)
        break
      }
      case "out":
      case "seed":
      case "trace": {
        const value = inline ?? args[++index]
        if (value === undefined || value === "") throw new UsageError(`--${name} needs a value`)
        values[name] = value
        break
      }
      default:
        throw new UsageError(`unknown flag --${name}`)
    }
  }
  if (positional.length === 0) throw new UsageError("which scenario? (a file, or a name under scenarios/)")
  if (positional.length > 1) throw new UsageError(`one scenario at a time, not ${positional.join(" ")}`)
  return { scenario: positional[0]!, out: values["out"], seed: values["seed"], check, perJob, trace: values["trace"] }
}

/** A path as given, else a bare name under scenarios/ (with or without `.json`). */
export const resolveScenario = (given: string): string | undefined => {
  const candidates = [resolve(given)]
  if (!given.includes("/")) candidates.push(join(scenariosDir, given), join(scenariosDir, `${given}.json`))
  return candidates.find((path) => existsSync(path) && !path.endsWith("/"))
}

const count = (value: number) => value.toLocaleString("en-US")

/** One line for humans: what happened, the trace hash and how fast. */
/** The Functions' part of the line for humans: calls by phase, queue wait and latency, what the ledger charged. */
export const functionsText = (functions: FunctionsSummary): string => {
  const { totals } = functions
  const phases = Object.entries(totals.byPhase).sort(([a], [b]) => (a < b ? -1 : 1)).map(([phase, calls]) =>
    `${count(calls)} ${phase}`
  ).join(", ")
  const ms = (p: Percentiles) => `${count(p.p50)}/${count(p.p95)}/${count(p.p99)} ms`
  return `${count(totals.functions)} functions, ${count(totals.calls)} calls (${phases || "none"}) on ${
    count(totals.workers)
  } workers, queue wait p50/p95/p99 ${ms(totals.queueWaitMs)}, end-to-end ${ms(totals.latencyMs)}, ` +
    `${totals.costUSD === undefined ? "" : `${totals.costUSD} USD charged, `}calls ${totals.callsCostUSD} USD`
}

export const humanSummary = (summary: Summary, wallMs: number): string => {
  const { totals } = summary
  const phases = Object.entries(totals.byPhase).sort(([a], [b]) => (a < b ? -1 : 1)).map(([phase, jobs]) =>
    `${count(jobs)} ${phase}`
  ).join(", ")
  const eventsPerSecond = wallMs > 0 ? Math.round((totals.engineEvents / wallMs) * 1000) : 0
  return `${summary.scenario} (seed ${JSON.stringify(summary.seed)}): ${count(totals.jobs)} jobs (${
    phases || "none"
  }), ` +
    `${count(totals.attempts)} attempts, ${count(totals.preemptions)} preemptions, ${
      count(totals.checkpoints)
    } checkpoints; ` +
    `trace ${summary.traceHash.slice(0, 16)} (${count(summary.traceLines)} lines); ` +
    `${(wallMs / 1000).toFixed(2)} s wall, ${count(totals.engineEvents)} engine events (${count(eventsPerSecond)}/s)` +
    (summary.functions === undefined ? "" : `; ${functionsText(summary.functions)}`) +
    (summary.fidelity === undefined ? "" : `; ${fidelityText(summary.fidelity)}`) +
    (summary.violations.length > 0 ? `; ${summary.violations.length} VIOLATIONS` : "")
}

/** Runs the command; returns the exit status. */
export const sim = (args: ReadonlyArray<string>): number => {
  const stderr = (line: string) => process.stderr.write(`${line}\n`)
  let flags: SimFlags | "help"
  try {
    flags = parseFlags(args)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    stderr(`nodus sim: ${error.message}\n\n${simUsage}`)
    return 2
  }
  if (flags === "help") {
    process.stdout.write(simUsage)
    return 0
  }
  const path = resolveScenario(flags.scenario)
  if (path === undefined) {
    stderr(`nodus sim: no scenario ${JSON.stringify(flags.scenario)} (not a file, nor a name under ${scenariosDir})`)
    return 2
  }
  let json: unknown
  try {
    json = JSON.parse(readFileSync(path, "utf8"))
  } catch (error) {
    stderr(
      `nodus sim: ${path}: ${error instanceof SyntaxError ? `not JSON: ${error.message}` : (error as Error).message}`
    )
    return 2
  }
  const parsed = parseScenario(json)
  const catalog = loadCatalog()
  const problems = parsed.ok ? scenarioProblems(parsed.scenario, catalog) : parsed.problems
  if (problems.length > 0) {
    stderr(`nodus sim: ${path} is not a valid scenario:`)
    for (const problem of problems) {
      stderr(`  ${problem.field === "" ? "(the file)" : problem.field}: ${problem.message}`)
    }
    return 2
  }
  if (!parsed.ok) return 2
  const started = performance.now()
  const summary = runScenario(parsed.scenario, {
    catalog,
    check: flags.check,
    perJob: flags.perJob,
    keepTrace: flags.trace !== undefined,
    ...(flags.seed === undefined ? {} : { seed: flags.seed })
  })
  const wallMs = performance.now() - started
  const { trace, ...rest } = summary
  const text = `${JSON.stringify(rest, null, 2)}\n`
  if (flags.out === undefined) process.stdout.write(text)
  else writeFileSync(flags.out, text)
  if (flags.trace !== undefined) {
    writeFileSync(flags.trace, trace === undefined || trace.length === 0 ? "" : `${trace.join("\n")}\n`)
  }
  stderr(humanSummary(summary, wallMs))
  if (summary.violations.length === 0) return 0
  stderr(
    `nodus sim: the checkers found ${summary.violations.length} violation(s) (seed ${JSON.stringify(summary.seed)}):`
  )
  for (const violation of summary.violations) stderr(`  ${JSON.stringify(violation)}`)
  return 1
}
