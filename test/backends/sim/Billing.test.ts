/**
 * Billing in the simulator (docs/billing.md):
 * - the funding-runs-out scenario shows Funded False, the checkpoint, the stop and the events in order, then the
 *   top-up, funding_restored and the finish;
 * - over random simulated Jobs (preemptions, boot failures, node loss, suspends, cancels, deletes), every Job's ledger
 *   charges equal its runs' metered costs to the micro-USD, segment by segment, credits add up, and every hold ends.
 *
 * The estimates' calibration against simulated Jobs is in RunSampler.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Engine } from "../../../src/backends/sim/Engine.ts"
import { jobSimKind, type SimJob } from "../../../src/backends/sim/JobSim.ts"
import { Prng } from "../../../src/backends/sim/Prng.ts"
import { runScenario } from "../../../src/backends/sim/Run.ts"
import { parseScenario } from "../../../src/backends/sim/Scenario.ts"
import { SimCapacity, type SimProviderModel, type WorkloadModel } from "../../../src/backends/sim/SimCapacity.ts"
import { Simulation } from "../../../src/backends/sim/Simulation.ts"
import { Ledger, segments } from "../../../src/core/billing/Ledger.ts"
import { meterAttempt } from "../../../src/core/billing/Metering.ts"
import { currentPricebook, ruleOf } from "../../../src/core/billing/Pricebook.ts"
import type { Variant } from "../../../src/core/capacity/Offering.ts"
import { parseMicroUsd } from "../../../src/core/Money.ts"
import { loadCatalog } from "../../../src/data/CatalogData.ts"
import { admitJobSpec } from "../../../src/kinds/job/JobAdmission.ts"
import { catalog as testCatalog, hour, minute } from "../../core/Fixtures.ts"

const root = join(import.meta.dirname, "..", "..", "..")

describe("funding runs out mid-run", () => {
  const parsed = parseScenario(JSON.parse(readFileSync(join(root, "scenarios", "funding-runs-out.json"), "utf8")))
  if (!parsed.ok) throw new Error("scenario does not parse")
  const summary = runScenario(parsed.scenario, { catalog: loadCatalog(), keepTrace: true })

  it("runs clean, every Job finishes, and the ledger adds up", () => {
    assert.deepStrictEqual(summary.violations, [])
    assert.deepStrictEqual(summary.totals.byPhase, { Succeeded: 3 })
    const billing = summary.billing!
    assert.strictEqual(billing.credits, "25")
    assert.strictEqual(billing.held, "0")
    assert.strictEqual(billing.arrears, "0")
    assert.strictEqual(
      parseMicroUsd(billing.available) + parseMicroUsd(billing.charged),
      parseMicroUsd(billing.credits)
    )
    // Each Job's displayed cost is part of what the ledger charged, and together they are all of it.
    const total = summary.jobs!.reduce((sum, job) => sum + parseMicroUsd(job.costUSD!), 0n)
    assert.strictEqual(total, parseMicroUsd(billing.charged))
  })

  it("shows Funded False, the checkpoint, the stop and the events in order, then the top-up and the finish", () => {
    const lines = summary.trace!.filter((line) => line.includes("research/train-2 ") || line.includes(" billing "))
    const expected = [
      /train-2 Phase Running>Suspending FundingLost/,
      /train-2 Event job\.funding_lost FundingLost/,
      /train-2 Event job\.checkpointed/,
      /train-2 Stop train-2-0-1/,
      /train-2 Phase Suspending>Suspended FundingLost/,
      /billing Grant grant-1 20\.00/,
      /train-2 Event job\.funding_restored/,
      /train-2 Launch train-2-0-2/,
      /train-2 Event job\.succeeded/
    ]
    let from = 0
    for (const pattern of expected) {
      const at = lines.findIndex((line, index) => index >= from && pattern.test(line))
      assert.isAtLeast(at, 0, `${pattern} after line ${from}:\n${lines.slice(from).join("\n")}`)
      from = at + 1
    }
  })
})

// ---------------------------------------------------------------------------------------------------------------------
// Random simulated Jobs: charges equal metered costs

const models = (
  settings: { readonly preemptionMtbfMs: number; readonly bootFailureRate: number; readonly nodeLossMtbfMs: number }
) =>
(variant: Variant): SimProviderModel => ({
  capacity: 3,
  bootMedianMs: 2 * minute,
  bootSigma: 0.5,
  bootFailureRate: settings.bootFailureRate,
  preemptionMtbfMs: variant.interruptible ? settings.preemptionMtbfMs : undefined,
  preemptionTrace: undefined,
  nodeLossMtbfMs: settings.nodeLossMtbfMs,
  teardownMs: 45_000,
  warmStartMs: 5_000,
  restoreBytesPerSecond: 1 << 30
})

const workloadOf = (durationMs: number, failureRate: number, checkpointFailureRate = 0.1): WorkloadModel => ({
  durationMs,
  exitCode: 0,
  runFailureRate: failureRate,
  oomRate: 0,
  checkpointSizeBytes: 1 << 30,
  checkpointFailureRate,
  suspendCheckpointFailureRate: 0.2
})

const jobArbitrary = fc.record({
  gpu: fc.constantFrom("A10", "H100", "A100"),
  interruptible: fc.constantFrom("Never", "Allow", "Prefer"),
  continuity: fc.constantFrom("Checkpointed", "Restartable", "Ephemeral"),
  completions: fc.integer({ min: 1, max: 4 }),
  parallelism: fc.integer({ min: 1, max: 3 }),
  durationMinutes: fc.integer({ min: 1, max: 600 }),
  failureRate: fc.constantFrom(0, 0.2),
  arrivalMinutes: fc.integer({ min: 0, max: 600 }),
  suspendAfterMinutes: fc.option(fc.integer({ min: 1, max: 300 })),
  cancelAfterMinutes: fc.option(fc.integer({ min: 1, max: 900 })),
  deleteAfterMinutes: fc.option(fc.integer({ min: 1, max: 900 }), { freq: 4 }),
  maxCostUSD: fc.option(fc.constantFrom("1.00", "5.00", "40.00"))
})

describe("ledger charges equal metered costs", () => {
  it("over random simulated Jobs, to the micro-USD, segment by segment", () => {
    fc.assert(
      fc.property(
        fc.array(jobArbitrary, { minLength: 1, maxLength: 12 }),
        fc.record({
          preemptionMtbfMs: fc.integer({ min: hour, max: 12 * hour }),
          bootFailureRate: fc.constantFrom(0, 0.1),
          nodeLossMtbfMs: fc.integer({ min: 50 * hour, max: 500 * hour })
        }),
        fc.integer({ min: 1, max: 400 }),
        fc.string({ minLength: 1, maxLength: 8 }),
        (jobs, provider, creditsUSD, seed) => {
          const start = Date.parse("2026-03-01T00:00:00Z")
          const engine = new Engine(start)
          const capacity = new SimCapacity(engine, new Prng(seed).derive("capacity"), models(provider))
          const ledger = new Ledger()
          const pricebook = {
            ...currentPricebook,
            byProvider: { ...currentPricebook.byProvider, test: { incrementMs: minute, minimumMs: 5 * minute } }
          }
          ledger.grant("grant/starter", start, BigInt(creditsUSD) * 1_000_000n, "starter")
          const jobKind = jobSimKind()
          const simulation = new Simulation({
            kinds: [jobKind],
            engine,
            capacity,
            catalog: testCatalog,
            trace: { record: () => {} },
            billing: { ledger, pricebook }
          })
          const submitted = jobs.map((job, index) => {
            const spec = admitJobSpec({
              image: "x",
              resources: { gpu: { type: [job.gpu] } },
              placement: { interruptible: job.interruptible, queueTimeout: "0s" },
              recovery: { continuity: job.continuity, maxAttempts: 6 },
              completions: job.completions,
              parallelism: Math.min(job.parallelism, job.completions),
              ...(job.maxCostUSD === null ? {} : { maxCostUSD: job.maxCostUSD })
            })
            const entry = {
              spec,
              workload: workloadOf(job.durationMinutes * minute, job.failureRate),
              name: `job-${index}`,
              sim: undefined as SimJob | undefined
            }
            engine.at(start + job.arrivalMinutes * minute, () => {
              entry.sim = simulation.submit(jobKind, "demo", entry.name, spec, entry.workload)
              if (job.suspendAfterMinutes !== null) {
                engine.after(
                  job.suspendAfterMinutes * minute,
                  () => simulation.update(entry.sim!, { ...entry.sim!.spec, state: "Suspended" })
                )
                engine.after(
                  (job.suspendAfterMinutes + 60) * minute,
                  () => simulation.update(entry.sim!, { ...entry.sim!.spec, state: "Running" })
                )
              }
              if (job.cancelAfterMinutes !== null) {
                engine.after(
                  job.cancelAfterMinutes * minute,
                  () => simulation.update(entry.sim!, { ...entry.sim!.spec, state: "Cancelled" })
                )
              }
              // The owner deletes it: its runs are billed until their hosts are released (docs/billing.md).
              if (job.deleteAfterMinutes !== null) {
                engine.after(job.deleteAfterMinutes * minute, () => simulation.remove(entry.sim!))
              }
            })
            return entry
          })
          // A top-up half way: Jobs stopped for money resume.
          engine.at(start + 12 * hour, () => {
            ledger.grant("grant/topup", engine.now, 50_000_000n, "topup")
            simulation.fundsChanged()
          })
          engine.run(start + 40 * 24 * hour)
          const end = engine.now
          for (const entry of submitted) {
            const job = entry.sim
            if (job === undefined) {
              continue
            }
            const charges = ledger.chargesFor(job.uid)
            const metered = { Boot: 0n, Running: 0n, Restore: 0n, Teardown: 0n }
            for (const attempt of job.attempts) {
              const meter = meterAttempt(attempt, ruleOf(pricebook, attempt.variant), end)
              assert.isTrue(
                meter.final || attempt.releasedAt === undefined,
                `${entry.name}/${attempt.name} released but not final`
              )
              for (const segment of segments) {
                metered[segment] += meter.charges[segment]
              }
            }
            for (const segment of segments) {
              assert.strictEqual(
                charges.bySegment[segment],
                metered[segment],
                `${entry.name} ${segment}`
              )
            }
            // The display copy says the same (a deleted Job's status is no longer written).
            if (!job.deleted) {
              assert.strictEqual(
                parseMicroUsd(job.status.cost?.totalUSD ?? "0"),
                charges.total,
                `${entry.name} status.cost.totalUSD`
              )
            }
          }
          assert.strictEqual(ledger.available + ledger.held + ledger.charged - ledger.arrears, ledger.credits)
          assert.isTrue(ledger.available >= 0n)
          // Every run ended and was finished: no hold is left open, none had to expire.
          for (const hold of ledger.holds.values()) {
            assert.oneOf(hold.state, ["Captured", "Released"], `hold ${hold.id}`)
          }
        }
      ),
      { numRuns: 60, seed: 20261121 }
    )
  })
})
