/**
 * Regenerates the committed example reports (reports/README.md): `nodus report` of two shipped scenarios from their
 * own seeds, so the same code gives the same files byte for byte, and a screenshot of each in headless Chromium
 * (Debian's chromium through playwright-core, as test/cli/Report.test.ts opens them). `npm run reports`;
 * `--no-screenshots` skips the browser (a PNG depends on the browser's version and fonts, the HTML does not).
 */
import { existsSync, statSync } from "node:fs"
import { join } from "node:path"
import { chromium } from "playwright-core"
import { report } from "../src/cli/Report.ts"

const here = import.meta.dirname
const chromiumPath = "/usr/bin/chromium"
/** The committed reports: scenario, and the part of the page its screenshot shows. */
const examples = [
  { scenario: "spot-trace-replay", shot: { selector: "body", height: 1500 } },
  { scenario: "alibaba-gpu-replay", shot: { selector: "#delay-fidelity", height: 1300 } }
] as const

const screenshots = !process.argv.includes("--no-screenshots")
let status = 0
for (const { scenario } of examples) {
  const out = join(here, `${scenario}.html`)
  const code = report([scenario, "--out", out])
  if (code !== 0) status = code
  process.stderr.write(`${out}: ${statSync(out).size.toLocaleString("en-US")} bytes\n`)
}

if (screenshots) {
  if (!existsSync(chromiumPath)) {
    process.stderr.write(`no ${chromiumPath}: screenshots skipped (apt-get install chromium, or --no-screenshots)\n`)
    process.exit(status === 0 ? 1 : status)
  }
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] })
  try {
    for (const { scenario, shot } of examples) {
      const page = await browser.newPage({ viewport: { width: 1200, height: shot.height } })
      await page.goto(`file://${join(here, `${scenario}.html`)}`)
      await page.waitForSelector("body[data-drawn=true]")
      // The top of the page, or from the named part down: what the README shows.
      const top = shot.selector === "body"
        ? 0
        : await page.$eval(shot.selector, (element) => Math.max(0, element.getBoundingClientRect().top - 60))
      const png = join(here, `${scenario}.png`)
      await page.screenshot({ path: png, clip: { x: 0, y: top, width: 1200, height: shot.height }, fullPage: true })
      process.stderr.write(`${png}: ${statSync(png).size.toLocaleString("en-US")} bytes\n`)
    }
  } finally {
    await browser.close()
  }
}
process.exit(status)
