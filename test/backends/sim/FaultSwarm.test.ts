/**
 * The fault swarm: many seeds, each a scenario with random fault settings (FaultSwarm.ts), every one run under the
 * checkers. A failing seed is printed with its violations; add it to `regressions` below so it is run on every CI
 * from then on. NODUS_SWARM_SEEDS=<n> runs more seeds (400 were clean when the swarm was written).
 */
import { describe, expect, it } from "vitest"
import { runScenario } from "../../../src/backends/sim/Run.ts"
import { loadCatalog } from "../../../src/data/CatalogData.ts"
import { swarmScenario } from "./FaultSwarm.ts"

const catalog = loadCatalog()
const seeds = Number(process.env["NODUS_SWARM_SEEDS"] ?? 40)

/** Seeds that once broke a rule, with what they found. */
const regressions: ReadonlyArray<{ readonly seed: string; readonly found: string }> = [
  { seed: "56", found: "a Job cancelled while suspended showed a timeoutTime without its suspended time" },
  { seed: "62", found: "a Restartable Job lost its progress cursor on every preemption and never finished" },
  { seed: "93", found: "an interrupted run counted as progress although it left nothing to restore" },
  { seed: "10", found: "an overloaded fleet needed more than the drain budget (budget raised to 4000h)" }
]

const violationsOf = (seed: string) => {
  const summary = runScenario(swarmScenario(seed), { catalog, perJob: false })
  if (summary.violations.length > 0) {
    console.error(
      `fault swarm seed ${JSON.stringify(seed)} failed:`,
      JSON.stringify(summary.violations.slice(0, 5), null, 2)
    )
  }
  return summary
}

describe("fault swarm", () => {
  it(`holds every checker over ${seeds} seeds of random faults`, () => {
    let attempts = 0
    let preemptions = 0
    for (let seed = 0; seed < seeds; seed++) {
      const summary = violationsOf(`${seed}`)
      expect(summary.violations, `seed ${seed}`).toEqual([])
      attempts += summary.totals.attempts
      preemptions += summary.totals.preemptions + summary.totals.nodeLosses
    }
    // The swarm must actually exercise recovery, or a clean run proves nothing.
    expect(preemptions).toBeGreaterThan(seeds)
    expect(attempts).toBeGreaterThan(seeds * 20)
  }, 120_000)

  it.each(regressions)("regression seed $seed: $found", ({ seed }) => {
    expect(violationsOf(seed).violations).toEqual([])
  })
})
