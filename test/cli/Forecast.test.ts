/**
 * `nodus forecast` as a process (docs/simulator.md, "Forecast"): on the repository's copy of the Alibaba GPU v2023
 * trace it prints the forecast and the backtest's coverage, and the coverage it prints is the one recomputed here from
 * the trace's pods — whatever it is, never a hoped-for value. A small pod list of the trace's format forecasts a
 * shortfall against a capacity under its demand; bad usage and a malformed file exit 2 naming the problem.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { ForecastReport } from "../../src/cli/Forecast.ts"
import { backtest, busyFromMs, hourlyPeakDemand, hourMs } from "../../src/core/capacity/Forecast.ts"
import { alibabaClusterGpus, demandOf, loadAlibabaPods } from "../../src/data/AlibabaGpuTrace.ts"

const root = join(import.meta.dirname, "..", "..")
const node = join(root, "node_modules", ".bin", "node")
const cli = join(root, "bin", "nodus.js")

const run = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      node,
      [cli, "forecast", ...args],
      { cwd: root, timeout: 60_000 },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
    )
  })

const header =
  "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"

describe("nodus forecast", () => {
  it("prints the Alibaba trace's forecast and backtest coverage, as recomputed from its pods", async () => {
    const { code, stdout } = await run(["--json"])
    assert.strictEqual(code, 0)
    const report = JSON.parse(stdout) as ForecastReport
    // Recomputed in this process from the same pods: the hourly demand of the busy part, scored the same way.
    const intervals = loadAlibabaPods().map(demandOf).filter((interval) => interval.milliGpus > 0)
    const fromMs = busyFromMs(intervals)
    const toMs = Math.ceil(Math.max(...intervals.map((interval) => interval.endMs)) / hourMs) * hourMs
    const history = hourlyPeakDemand(intervals, fromMs, toMs)
    assert.strictEqual(report.history.hours, history.length)
    assert.deepStrictEqual(
      report.backtest,
      backtest(history, { horizonHours: 168, windowHours: 336, firstHour: Math.floor(fromMs / hourMs) })
    )
    for (const coverage of [report.backtest.fixed, report.backtest.rolling]) {
      assert.isTrue(coverage.p90 >= 0 && coverage.p90 <= 1, `coverage ${coverage.p90} is a share`)
      assert.strictEqual(coverage.p90, coverage.underP90 / coverage.hours)
    }
    assert.strictEqual(report.capacityGpus, alibabaClusterGpus())
    assert.strictEqual(report.status.horizon, "168h")
    assert.strictEqual(report.status.peakDemandGPUs.p90, Math.ceil(report.forecast.peakDemandGPUs.p90))

    const human = await run([])
    assert.strictEqual(human.code, 0)
    const percent = (share: number) => `${(share * 100).toFixed(1)}%`
    assert.include(
      human.stdout,
      `at or under p90 ${report.backtest.fixed.underP90}/${report.backtest.fixed.hours} hours (${
        percent(report.backtest.fixed.p90)
      })`
    )
    assert.include(human.stdout, `refitted every 168 h: at or under p90 ${report.backtest.rolling.underP90}/`)
    assert.include(human.stdout, "peakDemandGPUs p50")
  })

  it("forecasts a shortfall of a pod list of the trace's format against a capacity under its demand", async () => {
    // Two days of a pod holding 3 GPUs from hour 10 to hour 12 of each day, over one holding 1 GPU throughout.
    const rows = [`p-base,1000,1024,1,1000,,LS,Running,0,${48 * 3600},0`]
    for (const day of [0, 1]) {
      rows.push(
        `p-${day},1000,1024,3,1000,,LS,Succeeded,${(day * 24 + 10) * 3600},${(day * 24 + 12) * 3600},${
          (day * 24 + 10) * 3600
        }`
      )
    }
    const file = join(mkdtempSync(join(tmpdir(), "nodus-forecast-")), "pods.csv")
    writeFileSync(file, [header, ...rows, ""].join("\n"))
    const { code, stdout, stderr } = await run([
      "--trace",
      file,
      "--horizon",
      "24h",
      "--capacity-gpus",
      "2",
      "--start",
      "2026-01-01T00:00:00Z",
      "--json"
    ])
    assert.strictEqual(code, 0, stderr)
    const report = JSON.parse(stdout) as ForecastReport
    assert.deepStrictEqual(report.forecast.peakDemandGPUs, { p50: 4, p90: 4 })
    // The history ends at 48 h (2026-01-03T00:00Z); hour 10 of the next day is 10 hours on.
    assert.strictEqual(report.forecast.shortfallHour, 10)
    assert.strictEqual(report.status.shortfallTime, "2026-01-03T10:00:00.000Z")
    assert.strictEqual(report.status.generatedTime, "2026-01-03T00:00:00.000Z")
    // The second day repeats the first: its forecast from the first covers every hour.
    assert.strictEqual(report.backtest.fixed.p90, 1)
  })

  it("exits 2 on bad usage and on a malformed trace, naming what is wrong", async () => {
    const horizon = await run(["--horizon", "12h"])
    assert.strictEqual(horizon.code, 2)
    assert.include(horizon.stderr, "--horizon takes whole hours from 24h to 720h")
    const file = join(mkdtempSync(join(tmpdir(), "nodus-forecast-")), "pods.csv")
    writeFileSync(
      file,
      [header, "p-0,1000,1024,1,1000,,LS,Running,0,100,0", "p-1,1000,1024,one,1000,,LS,Running,0,100,0", ""].join("\n")
    )
    const malformed = await run(["--trace", file])
    assert.strictEqual(malformed.code, 2)
    assert.include(malformed.stderr, `${file}:3: num_gpu "one" is not a whole number`)
  })
})
