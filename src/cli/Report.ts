/**
 * `nodus report <scenario> [--out report.html] [--seed S]`: runs the scenario's what-if variants from the same seed
 * (backends/sim/WhatIf.ts) and writes one self-contained HTML file (ReportHtml.ts) with uPlot inlined from the npm
 * package, so the page opens with no network. While it runs, a progress bar on stderr (simulated days done, engine
 * events per second), drawn only when stderr is a terminal. Exit codes: 0 written, 1 the checkers found violations
 * (the report is written and shows them), 2 bad usage or a bad scenario file (the field path and what is wrong).
 */
import { readFileSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { fidelityText } from "../backends/sim/Fidelity.ts"
import { parseVariants, runWhatIf, type WhatIfProgress } from "../backends/sim/WhatIf.ts"
import { loadCatalog } from "../data/CatalogData.ts"
import { renderReport, type ReportAssets } from "./ReportHtml.ts"
import { resolveScenario, scenariosDir } from "./Sim.ts"

export const reportUsage = `Usage: nodus report <scenario> [flags]

Runs a scenario's what-if variants (its "variants"; the first is the baseline) from the same seed and writes one
self-contained HTML report: cost over time, queue waits, preemptions and restores, cost by segment, completion-time
percentiles and the savings of each variant against the baseline.

Flags:
  --out <file>    where to write the report (default report.html)
  --seed <seed>   override the scenario's seed

Exit status: 0 written, 1 checker violations (written too), 2 bad usage or scenario file.
`

/** uPlot's script and style from the npm package, read from where Node resolves it. */
export const uplotAssets = (): ReportAssets => {
  const require = createRequire(import.meta.url)
  const dist = (file: string) => readFileSync(require.resolve(`uplot/dist/${file}`), "utf8")
  return { uplotJs: dist("uPlot.iife.min.js"), uplotCss: dist("uPlot.min.css") }
}

const dayMs = 86_400_000

/** A progress line: `[███░░░░] variant 2/4 allow-all · day 3.5 of 21 · 41,200 events/s`, redrawn in place. */
export const progressLine = (progress: WhatIfProgress, eventsPerSecond: number, width = 24): string => {
  const done = (progress.variant + Math.min(1, progress.doneMs / progress.spanMs)) / progress.variants
  const filled = Math.round(done * width)
  return `[${"█".repeat(filled)}${"░".repeat(width - filled)}] variant ${
    progress.variant + 1
  }/${progress.variants} ${progress.name} · ` +
    `day ${(progress.doneMs / dayMs).toFixed(1)} of ${(progress.spanMs / dayMs).toFixed(0)} · ${
      Math.round(eventsPerSecond).toLocaleString("en-US")
    } events/s`
}

/** Runs the command; returns the exit status. */
export const report = (args: ReadonlyArray<string>): number => {
  const stderr = (line: string) => process.stderr.write(`${line}\n`)
  const fail = (message: string) => {
    stderr(`nodus report: ${message}`)
    return 2
  }
  const positional: Array<string> = []
  const values: Record<string, string> = {}
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!
    if (arg === "--help" || arg === "-h") {
      process.stdout.write(reportUsage)
      return 0
    }
    if (!arg.startsWith("--")) {
      positional.push(arg)
      continue
    }
    const equals = arg.indexOf("=")
    const name = equals === -1 ? arg.slice(2) : arg.slice(2, equals)
    if (name !== "out" && name !== "seed") return fail(`unknown flag --${name}\n\n${reportUsage}`)
    const value = equals === -1 ? args[++index] : arg.slice(equals + 1)
    if (value === undefined || value === "") return fail(`--${name} needs a value`)
    values[name] = value
  }
  if (positional.length !== 1) {
    return fail(
      `${
        positional.length === 0 ? "which scenario?" : `one scenario at a time, not ${positional.join(" ")}`
      }\n\n${reportUsage}`
    )
  }
  const path = resolveScenario(positional[0]!)
  if (path === undefined) {
    return fail(`no scenario ${JSON.stringify(positional[0])} (not a file, nor a name under ${scenariosDir})`)
  }
  let json: unknown
  try {
    json = JSON.parse(readFileSync(path, "utf8"))
  } catch (error) {
    return fail(`${path}: ${error instanceof SyntaxError ? `not JSON: ${error.message}` : (error as Error).message}`)
  }
  const catalog = loadCatalog()
  const parsed = parseVariants(json, catalog)
  if (!parsed.ok) {
    stderr(`nodus report: ${path} is not a valid scenario:`)
    for (const problem of parsed.problems) {
      stderr(`  ${problem.field === "" ? "(the file)" : problem.field}: ${problem.message}`)
    }
    return 2
  }
  const tty = process.stderr.isTTY === true
  const started = performance.now()
  let lastDraw = started
  let before = { at: started, events: 0, variant: -1 }
  let rate = 0
  const data = runWhatIf(parsed.scenario, parsed.variants, {
    catalog,
    ...(values["seed"] === undefined ? {} : { seed: values["seed"] }),
    ...(tty ?
      {
        progress: (progress: WhatIfProgress) => {
          const now = performance.now()
          if (progress.variant !== before.variant) before = { at: now, events: 0, variant: progress.variant }
          if (now - lastDraw < 100 && progress.doneMs < progress.spanMs) return
          if (now > before.at) rate = ((progress.events - before.events) / (now - before.at)) * 1000
          before = { at: now, events: progress.events, variant: progress.variant }
          lastDraw = now
          process.stderr.write(`\r\x1b[2K${progressLine(progress, rate)}`)
        }
      } :
      {})
  })
  if (tty) process.stderr.write("\r\x1b[2K")
  const out = values["out"] ?? "report.html"
  writeFileSync(out, renderReport(data, uplotAssets()))
  const violations = data.variants.reduce((sum, variant) => sum + variant.violations, 0)
  stderr(
    `${data.scenario}: ${data.variants.length} variant(s) from seed ${JSON.stringify(data.seed)} in ${
      ((performance.now() - started) / 1000).toFixed(1)
    } s; ` +
      data.variants.map((variant) => `${variant.name} ${variant.cost.total.totalUSD} USD`).join(", ") +
      `; wrote ${out}` +
      (violations > 0 ? `; ${violations} checker VIOLATIONS` : "")
  )
  const baseline = data.variants[0]!
  if (baseline.fidelity !== undefined) stderr(`${baseline.name}: ${fidelityText(baseline.fidelity)}`)
  return violations > 0 ? 1 : 0
}
