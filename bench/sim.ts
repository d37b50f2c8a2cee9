/**
 * The simulator's benchmarks, section by section (`npm run bench:sim -- [--section mm1] …`).
 *
 * mm1: the engine on the classic M/M/1 model (arrival rate 1.0, service rate 1.1, 10^6 customers), side by side in
 * one run with SimPy 3 (Debian python3-simpy3) and simjs (npm) running the same model: customers/s of each, the ratio
 * of ours to each, and each one's mean wait in the queue against the theoretical ρ / (μ − λ) = 9.09. The goal from
 * the issue: ≥ 10× SimPy and ≥ 2× simjs. Every implementation runs in a fresh process of its own, one after the
 * other, so that garbage collection, JIT state and CPU contention never cross from one to the next.
 *
 *   npm run bench:sim -- [--customers 1000000] [--seed 1] [--runs 1] [--section mm1]
 *
 * platform: the whole simulator — controller, placement, capacity models, trace — on scenarios/bench-platform.json:
 * 30 simulated days of a 10,000-host fleet taking about 10^6 Jobs (one every 2.592 s on average) with preemptions,
 * checkpoints, a preemption storm and a capacity drought. The goals from the issues: under 60 s on one core, under 70 s
 * with the checkers on. It runs in a child process (bench/sim/platform.ts) pinned to one CPU with `taskset -c <cpu>`
 * where taskset exists (CPU 0 unless `--cpu` names another, for a machine whose CPU 0 is busy; the garbage
 * collector's helper threads share that core too), once with the checkers off — the measurement — and once with them
 * on, and prints wall and CPU time, Jobs, attempts, preemptions, checkpoints, engine events and controller steps per
 * second, the peak resident memory and the trace hash.
 *
 *   npm run bench:sim -- --section platform [--checks both|off|on] [--arrivals N] [--pin on|off] [--cpu 0] [--runs 1]
 *
 * A section is an entry of `sections`: a name, a title and a `run` that prints its own report, selected with
 * `--section`.
 */
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { argument } from "./Arguments.ts"
import { theoreticalMeanWait } from "./sim/mm1.ts"
import type { PlatformResult } from "./sim/platform.ts"

export interface Options {
  /** The raw command line after the script, for sections that read flags of their own. */
  readonly argv: ReadonlyArray<string>
  readonly seed: number
  /** Runs per measurement; the median by wall time is reported. */
  readonly runs: number
}

export interface Section {
  readonly name: string
  readonly title: string
  readonly run: (options: Options) => Promise<void>
}

const root = join(import.meta.dirname, "..")

/** The outcome of one child process: its JSON line, or why there is none. */
type ChildOutcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly reason: string }

/** Runs a command to completion and parses the last line of its standard output as JSON. */
export const runJsonChild = (command: string, args: ReadonlyArray<string>): Promise<ChildOutcome> =>
  new Promise((resolve) => {
    const child = spawn(command, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    child.on("error", (error) => resolve({ ok: false, reason: error.message }))
    child.on("close", (code) => {
      const lastLine = (text: string): string => text.trim().split("\n").at(-1) ?? ""
      if (code !== 0) {
        resolve({ ok: false, reason: lastLine(stderr) || `exited with ${code}` })
        return
      }
      try {
        resolve({ ok: true, value: JSON.parse(lastLine(stdout)) })
      } catch {
        resolve({ ok: false, reason: `unreadable output: ${lastLine(stdout).slice(0, 200)}` })
      }
    })
  })

/** Pads a table to aligned columns, numbers right-aligned. */
export const formatTable = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? "").length)))
  return rows
    .map((row) =>
      row
        .map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)))
        .join("  ")
        .trimEnd()
    )
    .join("\n")
}

// ---------------------------------------------------------------------------------------------------------------
// Section mm1: the M/M/1 queue against SimPy 3 and simjs.

interface Mm1Measurement {
  readonly customers: number
  readonly meanWait: number
  readonly wallMs: number
}

interface Mm1Implementation {
  readonly name: string
  /** The minimum ratio of ours to this one that the issue asks for. */
  readonly goal?: number
  readonly missing: string
  readonly command: (customers: number, seed: number) => readonly [string, ReadonlyArray<string>]
}

const python = "/usr/bin/python3"

const mm1Implementations: ReadonlyArray<Mm1Implementation> = [
  {
    name: "nodus Engine",
    missing: "",
    command: (
      customers,
      seed
    ) => [process.execPath, [join(root, "bench/sim/mm1.ts"), "--customers", String(customers), "--seed", String(seed)]]
  },
  {
    name: "SimPy 3",
    goal: 10,
    missing: "SimPy 3 is not available (apt-get install python3-simpy3)",
    command: (customers, seed) => [python, [join(root, "bench/sim/mm1_simpy.py"), String(customers), String(seed)]]
  },
  {
    name: "simjs",
    goal: 2,
    missing: "simjs is not available (npm install --save-dev simjs@2.0.3)",
    command: (
      customers,
      seed
    ) => [process.execPath, [
      join(root, "bench/sim/mm1_simjs.ts"),
      "--customers",
      String(customers),
      "--seed",
      String(seed)
    ]]
  }
]

const isMm1Measurement = (value: unknown): value is Mm1Measurement =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as Mm1Measurement).customers === "number" &&
  typeof (value as Mm1Measurement).meanWait === "number" &&
  typeof (value as Mm1Measurement).wallMs === "number"

/** Runs one implementation `runs` times, each in a fresh process, and keeps the median by wall time. */
const measureMm1 = async (
  implementation: Mm1Implementation,
  customers: number,
  options: Options
): Promise<{ readonly ok: true; readonly value: Mm1Measurement } | { readonly ok: false; readonly reason: string }> => {
  if (implementation.command(customers, options.seed)[0] === python && !existsSync(python)) {
    return { ok: false, reason: `${implementation.missing}: ${python} not found` }
  }
  const measurements: Array<Mm1Measurement> = []
  for (let run = 0; run < options.runs; run++) {
    const [command, args] = implementation.command(customers, options.seed)
    const outcome = await runJsonChild(command, args)
    if (!outcome.ok) {
      return {
        ok: false,
        reason: implementation.missing === "" ? outcome.reason : `${implementation.missing}: ${outcome.reason}`
      }
    }
    if (!isMm1Measurement(outcome.value)) {
      return { ok: false, reason: `unexpected output ${JSON.stringify(outcome.value)}` }
    }
    measurements.push(outcome.value)
  }
  measurements.sort((a, b) => a.wallMs - b.wallMs)
  return { ok: true, value: measurements[Math.floor((measurements.length - 1) / 2)]! }
}

const mm1Section: Section = {
  name: "mm1",
  title: "M/M/1 (λ = 1.0, μ = 1.1): nodus Engine vs SimPy 3 vs simjs",
  run: async (options) => {
    const customers = Number(argument("customers", "1000000", options.argv))
    process.stdout.write(
      `${
        customers.toLocaleString("en-US")
      } customers, seed ${options.seed}, ${options.runs} run(s) each in a fresh process (median); ` +
        `theoretical mean wait in queue ρ/(μ−λ) = ${theoreticalMeanWait.toFixed(2)}\n\n`
    )
    const results: Array<
      { readonly implementation: Mm1Implementation; readonly outcome: Awaited<ReturnType<typeof measureMm1>> }
    > = []
    for (const implementation of mm1Implementations) {
      results.push({ implementation, outcome: await measureMm1(implementation, customers, options) })
    }
    const ours = results[0]!.outcome
    const oursRate = ours.ok ? (ours.value.customers / ours.value.wallMs) * 1000 : Number.NaN
    const rows: Array<Array<string>> = [[
      "implementation",
      "customers",
      "wall s",
      "customers/s",
      "ours ÷ it",
      "mean wait",
      "vs 9.09"
    ]]
    const notes: Array<string> = []
    for (const { implementation, outcome } of results) {
      if (!outcome.ok) {
        rows.push([implementation.name, "-", "-", "-", "-", "-", "-"])
        notes.push(`${implementation.name}: ${outcome.reason}`)
        continue
      }
      const { value } = outcome
      const rate = (value.customers / value.wallMs) * 1000
      const ratio = oursRate / rate
      const error = (value.meanWait - theoreticalMeanWait) / theoreticalMeanWait
      rows.push([
        implementation.name,
        value.customers.toLocaleString("en-US"),
        (value.wallMs / 1000).toFixed(2),
        Math.round(rate).toLocaleString("en-US"),
        `${ratio.toFixed(1)}×`,
        value.meanWait.toFixed(3),
        `${error >= 0 ? "+" : ""}${(error * 100).toFixed(1)} %`
      ])
      if (implementation.goal !== undefined && ours.ok) {
        notes.push(
          `goal ≥ ${implementation.goal}× ${implementation.name}: ${
            ratio >= implementation.goal ? "met" : "NOT met"
          } (${ratio.toFixed(1)}×)`
        )
      }
    }
    process.stdout.write(`${formatTable(rows)}\n\n${notes.join("\n")}\n`)
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Section platform: 30 days, 10,000 hosts, 10^6 Jobs.

/** The goals of the issue: under 60 s on one core with the checkers off, under 70 s with them on. */
const platformGoalMs = 60_000
const platformCheckedGoalMs = 70_000

const taskset = ["/usr/bin/taskset", "/bin/taskset"].find((path) => existsSync(path))

const isPlatformResult = (value: unknown): value is PlatformResult =>
  typeof value === "object" && value !== null && typeof (value as PlatformResult).wallMs === "number" &&
  typeof (value as PlatformResult).traceHash === "string"

/** Runs the platform scenario `runs` times, each in a fresh process, and keeps the median by wall time. */
const measurePlatform = async (
  check: boolean,
  pin: boolean,
  cpu: string,
  arrivals: string,
  options: Options
): Promise<{ readonly ok: true; readonly value: PlatformResult } | { readonly ok: false; readonly reason: string }> => {
  const measurements: Array<PlatformResult> = []
  for (let run = 0; run < options.runs; run++) {
    const args = [
      "--max-old-space-size=4096",
      join(root, "bench/sim/platform.ts"),
      ...(check ? [] : ["--no-check"]),
      ...(arrivals === "" ? [] : ["--arrivals", arrivals])
    ]
    const outcome = pin && taskset !== undefined
      ? await runJsonChild(taskset, ["-c", cpu, process.execPath, ...args])
      : await runJsonChild(process.execPath, args)
    if (!outcome.ok) return outcome
    if (!isPlatformResult(outcome.value)) {
      return { ok: false, reason: `unexpected output ${JSON.stringify(outcome.value).slice(0, 200)}` }
    }
    measurements.push(outcome.value)
  }
  measurements.sort((a, b) => a.wallMs - b.wallMs)
  return { ok: true, value: measurements[Math.floor((measurements.length - 1) / 2)]! }
}

const platformSection: Section = {
  name: "platform",
  title:
    "30 simulated days, 10,000 hosts, 10^6 Jobs with preemptions and checkpoints (goals: under 60 s on one core, 70 s with the checkers)",
  run: async (options) => {
    const checks = argument("checks", "both", options.argv)
    const arrivals = argument("arrivals", "", options.argv)
    const pin = argument("pin", "on", options.argv) !== "off"
    const cpu = argument("cpu", "0", options.argv)
    const modes = checks === "on" ? [true] : checks === "off" ? [false] : [false, true]
    const pinned = pin && taskset !== undefined
    process.stdout.write(
      `scenarios/bench-platform.json${
        arrivals === "" ? "" : `, first ${Number(arrivals).toLocaleString("en-US")} arrivals`
      }; ` +
        `${options.runs} run(s) each in a fresh process (median); ${
          pinned ? `pinned to one CPU (taskset -c ${cpu})` : "not pinned"
        }\n\n`
    )
    const count = (value: number) => Math.round(value).toLocaleString("en-US")
    const rows: Array<Array<string>> = [[
      "checkers",
      "wall s",
      "CPU s",
      "Jobs",
      "attempts",
      "preemptions",
      "checkpoints",
      "engine events",
      "events/s",
      "steps/s",
      "peak RSS MB"
    ]]
    const notes: Array<string> = []
    for (const check of modes) {
      const outcome = await measurePlatform(check, pin, cpu, arrivals, options)
      const name = check ? "on" : "off"
      if (!outcome.ok) {
        rows.push([name, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"])
        notes.push(`checkers ${name}: ${outcome.reason}`)
        continue
      }
      const result = outcome.value
      const seconds = result.wallMs / 1000
      rows.push([
        name,
        seconds.toFixed(1),
        (result.cpuMs / 1000).toFixed(1),
        count(result.jobs),
        count(result.attempts),
        count(result.preemptions),
        count(result.checkpoints),
        count(result.engineEvents),
        count(result.engineEvents / seconds),
        count(result.controllerSteps / seconds),
        count(result.maxRssBytes / 2 ** 20)
      ])
      notes.push(
        `checkers ${name}: trace ${result.traceHash} (${count(result.traceLines)} lines), ${
          count(result.controllerSteps)
        } controller steps ` +
          `and ${count(result.skippedSteps)} capacity looks answered without one, ${result.violations} violation(s); ` +
          `phases ${Object.entries(result.byPhase).map(([phase, jobs]) => `${phase} ${count(jobs)}`).join(", ")}`
      )
      if (arrivals === "") {
        const goalMs = check ? platformCheckedGoalMs : platformGoalMs
        notes.push(
          `goal under ${goalMs / 1000} s on one core, checkers ${name}: ${
            result.wallMs < goalMs ? "met" : "NOT met"
          } (${seconds.toFixed(1)} s)`
        )
      }
    }
    process.stdout.write(`${formatTable(rows)}\n\n${notes.join("\n")}\n`)
  }
}

// ---------------------------------------------------------------------------------------------------------------

/** Every section, in the order `npm run bench:sim` runs them. */
export const sections: Array<Section> = [mm1Section, platformSection]

export const main = async (argv: ReadonlyArray<string>): Promise<void> => {
  const options: Options = {
    argv,
    seed: Number(argument("seed", "1", argv)),
    runs: Math.max(1, Number(argument("runs", "1", argv)))
  }
  const only = argument("section", "", argv)
  const selected = only === "" ? sections : sections.filter((section) => section.name === only)
  if (selected.length === 0) {
    process.stderr.write(`no section ${only}; sections: ${sections.map((section) => section.name).join(", ")}\n`)
    process.exitCode = 2
    return
  }
  for (const section of selected) {
    process.stdout.write(`== ${section.name}: ${section.title}\n`)
    await section.run(options)
    process.stdout.write("\n")
  }
}

if (import.meta.main) await main(process.argv.slice(2))
