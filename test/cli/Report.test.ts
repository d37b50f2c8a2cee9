/**
 * `nodus report` (docs/simulator.md, "Reports"): the what-if variants of a scenario run from the same seed into one
 * self-contained HTML file. Checked in a real browser (Debian's chromium through playwright-core): the page draws every
 * chart (a canvas with pixels of its first series' colour), logs no console error and fetches nothing; the totals
 * table's savings are the baseline's ledger total less each variant's; the same seed gives the same embedded data.
 * Variants' patches are merge patches checked like the scenario's own Job specs.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { chromium } from "playwright-core"
import { parseVariants, type ReportData, runWhatIf } from "../../src/backends/sim/WhatIf.ts"
import { chartIds, fidelityChartId, palette, recordedShade, segmentShades } from "../../src/cli/ReportHtml.ts"
import { parseMicroUsd } from "../../src/core/Money.ts"
import { loadCatalog } from "../../src/data/CatalogData.ts"

const root = join(import.meta.dirname, "..", "..")
const node = join(root, "node_modules", ".bin", "node")
const cli = join(root, "bin", "nodus.js")
const chromiumPath = "/usr/bin/chromium"
const catalog = loadCatalog()

/** spot-trace-replay with its variants, cut to its first 60 arrivals so a report takes seconds. */
const smallScenario = (): Record<string, unknown> => {
  const file = JSON.parse(readFileSync(join(root, "scenarios", "spot-trace-replay.json"), "utf8")) as Record<
    string,
    unknown
  >
  return { ...file, arrivals: { ...(file["arrivals"] as object), count: 60 }, horizon: "48h", drain: "96h" }
}

const run = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      node,
      [cli, ...args],
      { cwd: root, timeout: 60_000 },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
    )
  })

/** Pixels of a chart's canvas: painted ones, and those of one of `colours` (opaque, within 8 per channel). */
const chartPixels = (page: import("playwright-core").Page, id: string, colours: ReadonlyArray<ReadonlyArray<number>>) =>
  page.evaluate(([id, colours]) => {
    // The test is type-checked without the DOM library: the little of it used here, typed where it is used.
    const page = globalThis as unknown as { document: { querySelector: (selector: string) => Canvas | null } }
    const canvas = page.document.querySelector(`#${id} canvas`)
    if (canvas === null) return { canvas: false, width: 0, matching: 0, painted: 0 }
    const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data
    let matching = 0
    let painted = 0
    for (let at = 0; at < pixels.length; at += 4) {
      if (pixels[at + 3]! === 0) continue
      painted++
      if (
        pixels[at + 3]! > 200 &&
        colours.some(([r, g, b]) =>
          Math.abs(pixels[at]! - r!) < 8 && Math.abs(pixels[at + 1]! - g!) < 8 && Math.abs(pixels[at + 2]! - b!) < 8
        )
      ) matching++
    }
    return { canvas: true, width: canvas.width, matching, painted }
  }, [id, colours] as const)

const rgbOf = (hex: string) => [1, 3, 5].map((at) => parseInt(hex.slice(at, at + 2), 16))

interface Canvas {
  readonly width: number
  readonly height: number
  getContext(
    kind: "2d"
  ): { getImageData(x: number, y: number, width: number, height: number): { readonly data: Uint8ClampedArray } }
}

const embedded = (html: string): ReportData => {
  const match = /<script id="report-data" type="application\/json">(.*?)<\/script>/su.exec(html)
  assert.isNotNull(match, "the report embeds its data")
  return JSON.parse(match![1]!) as ReportData
}

describe("what-if variants", () => {
  it("a variant is a merge patch of the Job templates (RFC 7396), checked like the scenario's own specs", () => {
    const file = smallScenario()
    const parsed = parseVariants(file, catalog)
    assert.isTrue(parsed.ok)
    if (!parsed.ok) return
    assert.strictEqual(parsed.variants[0]!.name, "as-written")
    const byName = new Map(parsed.variants.map((variant) => [variant.name, variant.scenario]))
    const jobOf = (variant: string, workload: string) =>
      byName.get(variant)!.workloads.find((settings) => settings.name === workload)!.job
    assert.deepInclude(jobOf("on-demand", "sweep")["placement"] as object, { interruptible: "Never", profile: "Cost" })
    assert.deepInclude(jobOf("all-ephemeral", "pretrain")["recovery"] as object, {
      continuity: "Ephemeral",
      maxAttempts: 12
    })
    assert.notProperty(jobOf("all-ephemeral", "pretrain")["recovery"] as object, "checkpoint")
    assert.strictEqual(jobOf("pretrain-capped", "pretrain")["maxCostUSD"], "150")

    const bad = parseVariants({
      ...file,
      variants: [
        { name: "x", workloads: { nosuch: {} } },
        { name: "x", job: { recovery: { continuity: "Sometimes" } } }
      ]
    }, catalog)
    assert.isFalse(bad.ok)
    if (bad.ok) return
    const fields = bad.problems.map((problem) => problem.field)
    assert.include(fields, "variants[0].workloads.nosuch")
    assert.include(fields, "variants[1].name")
    assert.isTrue(
      fields.some((field) => field.startsWith("variants[1]: workloads[0].job.recovery.continuity")),
      fields.join(", ")
    )
  })

  it("a __proto__ member of a variant's patch is a field like any other: refused, never a prototype", () => {
    // Before the variants used core/meta/MergePatch, `result[key] = …` made the member the patched Job's prototype:
    // the variant parsed, and every spec field the file left unset read through to the patch's.
    const hostile = JSON.parse(`{"name": "hostile", "job": {"__proto__": {"maxCostUSD": "1"}}}`) as object
    const parsed = parseVariants({ ...smallScenario(), variants: [hostile] }, catalog)
    assert.isFalse(parsed.ok)
    if (parsed.ok) return
    const fields = parsed.problems.map((problem) => problem.field)
    assert.include(fields, "variants[0]: workloads[0].job.__proto__", fields.join(", "))
    assert.isUndefined(({} as { maxCostUSD?: unknown }).maxCostUSD)
  })

  it("the same seed gives the same report data; savings are the baseline's ledger total less each variant's", () => {
    const parsed = parseVariants(smallScenario(), catalog)
    if (!parsed.ok) return assert.fail(JSON.stringify(parsed.problems))
    const first = runWhatIf(parsed.scenario, parsed.variants, { catalog })
    const second = runWhatIf(parsed.scenario, parsed.variants, { catalog })
    assert.strictEqual(JSON.stringify(second), JSON.stringify(first))
    const baseline = parseMicroUsd(first.variants[0]!.cost.total.totalUSD)
    for (const variant of first.variants) {
      assert.strictEqual(
        parseMicroUsd(variant.savingsUSD),
        baseline - parseMicroUsd(variant.cost.total.totalUSD),
        variant.name
      )
      assert.strictEqual(variant.violations, 0, variant.name)
    }
    // Running on demand only costs more than the scenario's spot capacity: a what-if that moves money.
    assert.isTrue(parseMicroUsd(first.variants.find((variant) => variant.name === "on-demand")!.savingsUSD) < 0n)
    const other = runWhatIf(parsed.scenario, parsed.variants, { catalog, seed: "another" })
    assert.notStrictEqual(
      JSON.stringify(other.variants.map((variant) => variant.traceHash)),
      JSON.stringify(first.variants.map((variant) => variant.traceHash))
    )
  })
})

describe("nodus report in a browser", () => {
  it("writes one self-contained HTML file whose every chart draws, with no console error and no request", {
    timeout: 60_000
  }, async () => {
    assert.isTrue(existsSync(chromiumPath), `Debian's chromium at ${chromiumPath} (.ci/run installs it)`)
    const dir = mkdtempSync(join(tmpdir(), "nodus-report-"))
    const scenario = join(dir, "small.json")
    writeFileSync(scenario, JSON.stringify(smallScenario()))
    const out = join(dir, "report.html")
    const result = await run(["report", scenario, "--out", out])
    assert.strictEqual(result.code, 0, result.stderr)
    assert.strictEqual(result.stderr.includes("\r"), false, "no progress bar when stderr is not a terminal")
    const html = readFileSync(out, "utf8")
    assert.notMatch(html, /<script[^>]+src=|<link[^>]+href=/u, "nothing loaded from elsewhere")
    const data = embedded(html)

    const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"], timeout: 30_000 })
    try {
      const page = await browser.newPage({ viewport: { width: 1200, height: 900 } })
      const errors: Array<string> = []
      const requests: Array<string> = []
      page.on("console", (message) => message.type() === "error" && errors.push(message.text()))
      page.on("pageerror", (error) => errors.push(String(error)))
      page.on("request", (request) => !request.url().startsWith("file://") && requests.push(request.url()))
      await page.goto(`file://${out}`, { timeout: 20_000 })
      await page.waitForSelector("body[data-drawn=true]", { timeout: 20_000 })
      assert.deepStrictEqual(errors, [])
      assert.deepStrictEqual(requests, [])

      // Every chart: a canvas with pixels of the series' colours (the variants', the segments'), not only axes and grid
      // (drawn in greys). Variants that ran alike draw over each other, so any series colour counts.
      const colours = [...palette, ...segmentShades].map(rgbOf)
      for (const id of chartIds) {
        const found = await chartPixels(page, id, colours)
        assert.isTrue(found.canvas && found.width > 0, `${id}: a canvas`)
        assert.isAbove(found.painted, 0, `${id}: something drawn`)
        assert.isAbove(found.matching, 50, `${id}: its series drawn`)
      }

      // The totals table: each variant's cost and savings as the data says, the savings the difference of ledger
      // totals.
      const rows = await page.$$eval("#totals tbody tr", (trs) =>
        trs.map((tr) => ({
          variant: tr.getAttribute("data-variant"),
          cost: tr.querySelector("td.usd")!.getAttribute("data-usd"),
          savings: tr.querySelector("td.savings")!.getAttribute("data-usd")
        })))
      assert.deepStrictEqual(rows.map((row) => row.variant), data.variants.map((variant) => variant.name))
      const baseline = parseMicroUsd(rows[0]!.cost!)
      for (const row of rows) {
        const variant = data.variants.find((entry) => entry.name === row.variant)!
        assert.strictEqual(row.cost, variant.cost.total.totalUSD)
        assert.strictEqual(parseMicroUsd(row.savings!), baseline - parseMicroUsd(row.cost!), row.variant!)
      }

      // Fidelity: every spot-trace-driven variant of every what-if variant, "N of N preemption instants reproduced",
      // as the run's data says (computed from the trace file and the run's attempts:
      // test/backends/sim/TraceReplay.test.ts).
      const fidelity = await page.$$eval("#preemption-fidelity tbody tr", (trs) =>
        trs.map((tr) => ({
          variant: tr.getAttribute("data-variant"),
          reproduced: Number(tr.getAttribute("data-reproduced")),
          instants: Number(tr.getAttribute("data-instants")),
          text: tr.textContent ?? ""
        })))
      const expected = data.variants.flatMap((variant) =>
        (variant.fidelity?.preemptions ?? []).map((entry) => ({ variant: variant.name, entry }))
      )
      assert.isAbove(expected.length, 0, "the spot replay's variants have fidelity figures")
      assert.deepStrictEqual(
        fidelity.map((row) => [row.variant, row.reproduced, row.instants]),
        expected.map(({ variant, entry }) => [variant, entry.reproduced, entry.instants])
      )
      for (const row of fidelity) {
        assert.include(row.text, `${row.reproduced} of ${row.instants} preemption instants reproduced`)
      }
    } finally {
      await browser.close()
    }

    // Again from the same seed: the same data (the page has no timings in it).
    const again = await run(["report", scenario, "--out", join(dir, "again.html")])
    assert.strictEqual(again.code, 0, again.stderr)
    assert.strictEqual(JSON.stringify(embedded(readFileSync(join(dir, "again.html"), "utf8"))), JSON.stringify(data))
  })

  it(
    "a trace replay's report shows its queueing delays against the recorded ones, and the same seed writes the same file",
    { timeout: 60_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "nodus-report-"))
      const out = join(dir, "alibaba.html")
      const result = await run(["report", "alibaba-gpu-replay", "--out", out])
      assert.strictEqual(result.code, 0, result.stderr)
      const html = readFileSync(out, "utf8")
      // Small enough to commit (reports/): the series are hourly and the queue waits percentiles.
      assert.isBelow(html.length, 300_000)
      const data = embedded(html)
      const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"], timeout: 30_000 })
      try {
        const page = await browser.newPage({ viewport: { width: 1200, height: 900 } })
        const errors: Array<string> = []
        page.on("console", (message) => message.type() === "error" && errors.push(message.text()))
        page.on("pageerror", (error) => errors.push(String(error)))
        await page.goto(`file://${out}`, { timeout: 20_000 })
        await page.waitForSelector("body[data-drawn=true]", { timeout: 20_000 })
        assert.deepStrictEqual(errors, [])
        const recorded = await chartPixels(page, fidelityChartId, [rgbOf(recordedShade)])
        assert.isTrue(recorded.canvas, "the fidelity chart has a canvas")
        assert.isAbove(recorded.matching, 50, "the recorded distribution is drawn")
        const variants = await chartPixels(page, fidelityChartId, palette.map(rgbOf))
        assert.isAbove(variants.matching, 50, "the simulated distributions are drawn")
        const rows = await page.$$eval(
          "#delay-fidelity tbody tr",
          (trs) =>
            trs.map((tr) => ({ variant: tr.getAttribute("data-variant"), ks: Number(tr.getAttribute("data-ks")) }))
        )
        assert.deepStrictEqual(
          rows,
          data.variants.map((variant) => ({ variant: variant.name, ks: variant.fidelity!.queueDelay!.ks }))
        )
        assert.isAbove(
          await page.$$eval("#left-out li", (items) => items.length),
          0
        )
      } finally {
        await browser.close()
      }
      const again = join(dir, "again.html")
      assert.strictEqual((await run(["report", "alibaba-gpu-replay", "--out", again])).code, 0)
      assert.strictEqual(readFileSync(again, "utf8"), html)
    }
  )

  it("a bad variant exits 2 naming its field", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nodus-report-"))
    const scenario = join(dir, "bad.json")
    writeFileSync(
      scenario,
      JSON.stringify({ ...smallScenario(), variants: [{ name: "a", workloads: { nosuch: {} } }] })
    )
    const result = await run(["report", scenario, "--out", join(dir, "r.html")])
    assert.strictEqual(result.code, 2)
    assert.match(result.stderr, /variants\[0\]\.workloads\.nosuch: no workload named "nosuch"/u)
    assert.isFalse(existsSync(join(dir, "r.html")))
  })
})
