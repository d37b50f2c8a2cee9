/**
 * The what-if report as one self-contained HTML file (docs/simulator.md, "Reports"): the report's data embedded as JSON
 * (`<script id="report-data" type="application/json">`), uPlot's script and style inlined, and a small script that
 * draws the charts from the data when the page opens. Nothing is fetched at view time. Pure: the same data and assets
 * give the same bytes (no dates, no timings).
 */
import type { ReportData, VariantResult } from "../backends/sim/WhatIf.ts"
import { reportPercentiles } from "../backends/sim/WhatIf.ts"
import { parseMicroUsd } from "../core/Money.ts"

export interface ReportAssets {
  /** uPlot's IIFE build (uplot/dist/uPlot.iife.min.js) and its style (uplot/dist/uPlot.min.css). */
  readonly uplotJs: string
  readonly uplotCss: string
}

/** One colour per variant, in order (the browser test finds each chart's first series by it). */
export const palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"] as const

/** The cost segments' colours (Boot, Running, Restore, Teardown, Covered) in the segments chart. */
export const segmentShades = ["#6baed6", "#1f77b4", "#d62728", "#9467bd", "#bbbbbb"] as const

/** The charts, by the id of their container. */
export const chartIds = ["cost-over-time", "queue-wait", "interruptions", "cost-segments", "completion"] as const

/** The chart of a trace replay's queueing delays against the recorded ones, drawn when the run replays a trace. */
export const fidelityChartId = "queue-delay-fidelity"

/** The recorded distribution's colour in the fidelity chart. */
export const recordedShade = "#222222"

const escapeHtml = (text: string): string =>
  text.replace(/&/gu, "&amp;").replace(/</gu, "&lt;").replace(/>/gu, "&gt;").replace(/"/gu, "&quot;")

/** JSON inside a script element: `<` escaped so no `</script>` (or comment opener) can end it early. */
const scriptJson = (value: unknown): string => JSON.stringify(value).replace(/</gu, "\\u003c")

const usd = (text: string): string => {
  const micro = parseMicroUsd(text)
  const dollars = Number(micro) / 1e6
  return `${dollars < 0 ? "−" : ""}$${
    Math.abs(dollars).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })
  }`
}

const duration = (seconds: number | null | undefined): string => {
  if (seconds === null || seconds === undefined) return "–"
  if (seconds < 90) return `${Math.round(seconds)} s`
  if (seconds < 90 * 60) return `${(seconds / 60).toFixed(1)} min`
  return `${(seconds / 3600).toFixed(1)} h`
}

const percentOf = (
  part: bigint,
  whole: bigint
): string => (whole === 0n ? "–" : `${((Number(part) / Number(whole)) * 100).toFixed(1)}%`)

const totalsRow = (variant: VariantResult, baselineMicro: bigint, index: number): string => {
  const savings = parseMicroUsd(variant.savingsUSD)
  const cells = [
    `<th scope="row"><span class="swatch" style="background:${palette[index % palette.length]}"></span>${
      escapeHtml(variant.name)
    }</th>`,
    `<td>${variant.totals.jobs}</td>`,
    `<td>${variant.totals.byPhase["Succeeded"] ?? 0}</td>`,
    `<td>${variant.totals.preemptions}</td>`,
    `<td>${variant.totals.restores}</td>`,
    `<td class="usd" data-usd="${variant.cost.total.totalUSD}">${usd(variant.cost.total.totalUSD)}</td>`,
    `<td class="usd savings" data-usd="${variant.savingsUSD}">${
      index === 0 ? "baseline" : usd(variant.savingsUSD)
    }</td>`,
    `<td>${index === 0 ? "" : percentOf(savings, baselineMicro)}</td>`,
    `<td>${duration(variant.queueWaitSeconds["p50"])} / ${duration(variant.queueWaitSeconds["p90"])}</td>`,
    `<td>${duration(variant.completionSeconds["p50"])} / ${duration(variant.completionSeconds["p90"])}</td>`,
    `<td class="usd">${usd(variant.cost.total.covered.usd)}</td>`,
    `<td>${variant.violations}</td>`
  ]
  return `<tr data-variant="${escapeHtml(variant.name)}">${cells.join("")}</tr>`
}

/** The page's own script: reads the embedded data and draws every chart with uPlot. */
const drawScript = `
(() => {
  const data = JSON.parse(document.getElementById("report-data").textContent)
  const palette = ${JSON.stringify(palette)}
  const variants = data.variants
  const colour = (i) => palette[i % palette.length]
  const width = () => Math.max(480, Math.min(1100, document.body.clientWidth - 40))
  const money = (v) => v == null ? "" : "$" + v.toLocaleString("en-US", { maximumFractionDigits: 2 })
  const plot = (id, options, rows) => new uPlot({ width: width(), height: 300, ...options }, rows, document.getElementById(id))
  const hours = Math.max(...variants.map((v) => v.series.costUSD.length), 1)
  const start = Date.parse(data.virtualStart) / 1000
  const bucket = variants[0].series.bucketMs / 1000
  const times = Array.from({ length: hours }, (_, i) => start + (i + 1) * bucket)
  const padded = (values) => times.map((_, i) => i < values.length ? values[i] : values.length === 0 ? 0 : values[values.length - 1])
  const counts = (values) => { let sum = 0; return times.map((_, i) => (sum += values[i] ?? 0)) }

  plot("cost-over-time", {
    title: "Cost over time (USD charged, cumulative)",
    series: [{}, ...variants.map((v, i) => ({ label: v.name, stroke: colour(i), width: 2, value: (u, x) => money(x) }))],
    axes: [{}, { values: (u, ticks) => ticks.map(money), size: 80 }]
  }, [times, ...variants.map((v) => padded(v.series.costUSD))])

  const ps = Array.from({ length: 101 }, (_, i) => i)
  plot("queue-wait", {
    title: "Queue wait distribution (minutes from creation to first launch, by percentile of Jobs)",
    scales: { x: { time: false } },
    series: [{ label: "percentile" }, ...variants.map((v, i) => ({ label: v.name, stroke: colour(i), width: 2 }))],
    axes: [{ values: (u, ticks) => ticks.map((t) => "p" + t) }, { size: 60 }]
  }, [ps, ...variants.map((v) => ps.map((p) => v.queueWaitCurve.length === 0 ? null : v.queueWaitCurve[p] / 60))])

  const delays = variants.filter((v) => v.fidelity && v.fidelity.queueDelay && v.fidelity.queueDelay.curves.recorded.length > 0)
  if (delays.length > 0) {
    // Seconds on a log scale: most recorded delays are seconds, a few hours; 0 is drawn at 0.1 s.
    const floor = (s) => Math.max(0.1, s)
    plot("${fidelityChartId}", {
      title: "Queueing delay, recorded and simulated (seconds from creation to placement, by percentile of the replayed pods; log scale)",
      scales: { x: { time: false }, y: { distr: 3 } },
      series: [{ label: "percentile" }, { label: "recorded (trace)", stroke: "${recordedShade}", width: 2, dash: [6, 4] },
        ...delays.map((v) => ({ label: v.name + " (simulated)", stroke: colour(variants.indexOf(v)), width: 2 }))],
      axes: [{ values: (u, ticks) => ticks.map((t) => "p" + t) }, { size: 80 }]
    }, [ps, delays[0].fidelity.queueDelay.curves.recorded.map(floor), ...delays.map((v) => v.fidelity.queueDelay.curves.simulated.map(floor))])
  }

  plot("interruptions", {
    title: "Preemptions (solid) and restores (dashed), cumulative",
    series: [{}, ...variants.flatMap((v, i) => [
      { label: v.name + " preemptions", stroke: colour(i), width: 2 },
      { label: v.name + " restores", stroke: colour(i), width: 1.5, dash: [6, 4] }
    ])]
  }, [times, ...variants.flatMap((v) => [counts(v.series.preemptions), counts(v.series.restores)])])

  const segments = ["Boot", "Running", "Restore", "Teardown", "Covered"]
  const shades = ${JSON.stringify(segmentShades)}
  const own = variants.map((v) => segments.map((s) => Number(s === "Covered" ? v.cost.total.covered.usd : v.cost.total.bySegment[s])))
  const stacked = segments.map((_, k) => own.map((values) => values.slice(0, k + 1).reduce((a, b) => a + b, 0)))
  const xs = variants.map((_, i) => i)
  const bars = uPlot.paths.bars({ size: [0.6, 120] })
  // Stacked bars: the tallest stack (every segment) is drawn first, each lower segment over it.
  const order = segments.map((_, k) => segments.length - 1 - k)
  plot("cost-segments", {
    title: "Cost by segment (USD; covered: what nodus paid for, at the run's rate)",
    scales: { x: { time: false, range: [-0.5, variants.length - 0.5] } },
    series: [{ label: "variant", value: (u, x) => x == null ? "" : variants[x].name },
      ...order.map((k) => ({ label: segments[k], fill: shades[k], stroke: shades[k], paths: bars, points: { show: false },
        value: (u, x, s, idx) => idx == null ? "" : money(own[idx][k]) }))],
    axes: [{ values: (u, ticks) => ticks.map((t) => Number.isInteger(t) && variants[t] ? variants[t].name : ""), splits: () => xs },
      { values: (u, ticks) => ticks.map(money), size: 80 }]
  }, [xs, ...order.map((k) => stacked[k])])

  const jp = ${JSON.stringify(reportPercentiles)}
  plot("completion", {
    title: "Job completion time percentiles (hours from creation, Succeeded Jobs)",
    scales: { x: { time: false } },
    series: [{ label: "percentile", value: (u, x) => x == null ? "" : "p" + jp[x] },
      ...variants.map((v, i) => ({ label: v.name, stroke: colour(i), width: 2, points: { show: true, size: 8, fill: colour(i) } }))],
    axes: [{ values: (u, ticks) => ticks.map((t) => Number.isInteger(t) && jp[t] !== undefined ? "p" + jp[t] : ""), splits: () => jp.map((_, i) => i) }, {}]
  }, [jp.map((_, i) => i), ...variants.map((v) => jp.map((p) => { const s = v.completionSeconds["p" + p]; return s == null ? null : s / 3600 }))])
  document.body.dataset.drawn = "true"
})()
`

const seconds = (value: number): string => `${value.toLocaleString("en-US", { maximumFractionDigits: 1 })} s`

/**
 * The fidelity section (docs/simulator.md, "Fidelity"): per variant, its spot replays' preemption instants against the
 * traces' ("N of N preemption instants reproduced") and its trace replays' queueing delays against the recorded ones.
 */
const fidelitySection = (data: ReportData): string => {
  const withPreemptions = data.variants.filter((variant) => (variant.fidelity?.preemptions ?? []).length > 0)
  const withDelays = data.variants.filter((variant) => variant.fidelity?.queueDelay !== undefined)
  if (withPreemptions.length === 0 && withDelays.length === 0) return ""
  const parts = [`<h2>Fidelity: the replay against its trace</h2>`]
  if (withPreemptions.length > 0) {
    const rows = withPreemptions.flatMap((variant) =>
      variant.fidelity!.preemptions!.map((entry) =>
        `<tr class="preemption-fidelity" data-variant="${
          escapeHtml(variant.name)
        }" data-reproduced="${entry.reproduced}" data-instants="${entry.instants}"><th scope="row">${
          escapeHtml(variant.name)
        }</th>` +
        `<td>${escapeHtml(entry.variant)}</td><td>${escapeHtml(entry.trace)}</td>` +
        `<td><b>${entry.reproduced} of ${entry.instants}</b> preemption instants reproduced</td><td>${entry.dropsInRun}</td><td>${entry.preemptions}</td><td>${entry.offTrace}</td></tr>`
      )
    )
    parts.push(
      `<p>Preemptions: the instants at which each spot trace drops to 0, read from the trace file, at which a host of its
variant was running; reproduced when every such host was preempted at that millisecond. Off the trace: preemptions at any other instant.</p>
<table id="preemption-fidelity">
<thead><tr><th>variant</th><th>capacity</th><th>trace</th><th>instants</th><th>drops in the run</th><th>preemptions</th><th>off the trace</th></tr></thead>
<tbody>
${rows.join("\n")}
</tbody>
</table>`
    )
  }
  if (withDelays.length > 0) {
    const rows = withDelays.map((variant) => {
      const delay = variant.fidelity!.queueDelay!
      return `<tr class="delay-fidelity" data-variant="${
        escapeHtml(variant.name)
      }" data-ks="${delay.ks}" data-mean-error="${delay.meanError}"><th scope="row">${escapeHtml(variant.name)}</th>` +
        `<td>${delay.pods}${delay.notLaunched > 0 ? ` (${delay.notLaunched} never launched)` : ""}</td>` +
        `<td>${seconds(delay.recordedMean)}</td><td>${seconds(delay.simulatedMean)}</td><td>${
          seconds(delay.meanError)
        }</td><td>${seconds(delay.meanAbsoluteError)}</td>` +
        `<td><b>${delay.ks.toFixed(3)}</b></td>` +
        `<td>${seconds(delay.recorded.p50)} / ${seconds(delay.recorded.p90)} / ${seconds(delay.recorded.p99)}</td>` +
        `<td>${seconds(delay.simulated.p50)} / ${seconds(delay.simulated.p90)} / ${
          seconds(delay.simulated.p99)
        }</td></tr>`
    })
    const leftOut = withDelays[0]!.fidelity!.queueDelay!.leftOut.map((item) => `<li>${escapeHtml(item)}</li>`).join(
      "\n"
    )
    parts.push(
      `<p>Queueing delay: each replayed pod's simulated delay (its Job's creation to its first launch) against the recorded one
(scheduled − creation), over the pods the trace placed: mean error (simulated − recorded) and the two-sample Kolmogorov–Smirnov distance
between the two distributions (0: the same, 1: disjoint).</p>
<table id="delay-fidelity">
<thead><tr><th>variant</th><th>pods</th><th>recorded mean</th><th>simulated mean</th><th>mean error</th><th>mean |error|</th><th>KS distance</th><th>recorded p50 / p90 / p99</th><th>simulated p50 / p90 / p99</th></tr></thead>
<tbody>
${rows.join("\n")}
</tbody>
</table>
<p>What the model leaves out:</p>
<ul id="left-out">
${leftOut}
</ul>
<section class="chart" id="${fidelityChartId}"></section>`
    )
  }
  return parts.join("\n")
}

export const renderReport = (data: ReportData, assets: ReportAssets): string => {
  const baselineMicro = parseMicroUsd(data.variants[0]!.cost.total.totalUSD)
  const variantRows = data.variants.map((variant, index) =>
    `<li><b style="color:${palette[index % palette.length]}">${escapeHtml(variant.name)}</b>${
      variant.description === undefined ? "" : `: ${escapeHtml(variant.description)}`
    }</li>`
  ).join("\n")
  const sections = chartIds.map((id) => `<section class="chart" id="${id}"></section>`).join("\n")
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(data.scenario)}: what-if report</title>
<style>${assets.uplotCss}</style>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 20px; color: #222; }
table { border-collapse: collapse; margin: 12px 0 24px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child { text-align: left; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; }
.chart { margin: 18px 0; }
</style>
</head>
<body>
<h1>${escapeHtml(data.scenario)}: what-if report</h1>
${data.description === undefined ? "" : `<p>${escapeHtml(data.description)}</p>`}
<p>Seed <code>${escapeHtml(data.seed)}</code>, from ${
    escapeHtml(data.virtualStart)
  } (virtual time). Every variant ran from the same seed; costs are the
ledger's charges with pricebook <code>${
    escapeHtml(data.variants[0]!.cost.pricebook)
  }</code>; savings are against the baseline, <b>${escapeHtml(data.baseline)}</b>.</p>
<ul>
${variantRows}
</ul>
<table id="totals">
<thead><tr><th>variant</th><th>Jobs</th><th>Succeeded</th><th>preemptions</th><th>restores</th><th>cost</th><th>savings</th><th>%</th><th>queue wait p50 / p90</th><th>completion p50 / p90</th><th>covered</th><th>violations</th></tr></thead>
<tbody>
${data.variants.map((variant, index) => totalsRow(variant, baselineMicro, index)).join("\n")}
</tbody>
</table>
${sections}
${fidelitySection(data)}
<script id="report-data" type="application/json">${scriptJson(data)}</script>
<script>${assets.uplotJs.replace(/<\/script/giu, "<\\/script")}</script>
<script>${drawScript}</script>
</body>
</html>
`
}
