/**
 * The README stays a page a newcomer reads in five minutes, and the documentation's entry points stay true: the
 * README is at most 200 lines; every relative link of the README, docs/index.md, docs/benchmarks.md and CHANGELOG.md
 * names a file that exists (and a heading of it, for a link with an anchor); docs/index.md lists every page of docs/;
 * the README's configuration table names every setting of `nodus serve`; docs/benchmarks.md has a section for every
 * `npm run bench:*` script.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { settings } from "../src/server/Config.ts"

const root = join(import.meta.dirname, "..")
const read = (path: string): string => readFileSync(join(root, path), "utf8")

/** The README's most lines (issue 30: read in five minutes). */
const readmeLinesMax = 200

/** GitHub's anchor of a heading: lower case, punctuation other than `-` and `_` dropped, spaces to hyphens. */
const anchorOf = (heading: string): string =>
  heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")

/** The anchors of a Markdown file's headings (outside code blocks). */
const anchorsOf = (text: string): Set<string> => {
  const anchors = new Set<string>()
  let inCode = false
  for (const line of text.split("\n")) {
    if (line.startsWith("```")) inCode = !inCode
    const heading = /^#{1,6}\s+(.*)$/.exec(line)
    if (!inCode && heading !== null) anchors.add(anchorOf(heading[1]!))
  }
  return anchors
}

/** The targets of a Markdown file's inline links and images, outside code blocks and code spans. */
const linksOf = (text: string): Array<string> => {
  const links: Array<string> = []
  let inCode = false
  for (const line of text.split("\n")) {
    if (line.startsWith("```")) {
      inCode = !inCode
      continue
    }
    if (inCode) continue
    for (const match of line.replace(/`[^`]*`/g, "").matchAll(/\]\(([^)\s]+)\)/g)) links.push(match[1]!)
  }
  return links
}

/** What is wrong with each relative link of a file (empty when every link resolves). */
const brokenLinks = (file: string): Array<string> =>
  linksOf(read(file)).filter((link) => !/^[a-z][a-z0-9+.-]*:/i.test(link)).flatMap((link) => {
    const [path, anchor] = link.split("#", 2) as [string, string | undefined]
    const target = path === "" ? join(root, file) : resolve(root, dirname(file), path)
    if (!existsSync(target)) return [`${file}: ${link} (no file ${relative(root, target)})`]
    if (anchor !== undefined && target.endsWith(".md") && !anchorsOf(readFileSync(target, "utf8")).has(anchor)) {
      return [`${file}: ${link} (no heading with the anchor #${anchor})`]
    }
    return []
  })

describe("README and the documentation's entry points", () => {
  it("knows GitHub's anchors and finds links outside code", () => {
    assert.strictEqual(anchorOf("Headless runs (`nodus sim`)"), "headless-runs-nodus-sim")
    assert.strictEqual(anchorOf("API (`npm run bench:api`)"), "api-npm-run-benchapi")
    assert.deepStrictEqual(
      linksOf("[a](x.md) `[b](y.md)` [c](https://e.org) ![d](i.png#z)\n```\n[e](no.md)\n```\n[f](g.md#h)"),
      ["x.md", "https://e.org", "i.png#z", "g.md#h"]
    )
  })

  it(`keeps the README within ${readmeLinesMax} lines`, () => {
    const lines = read("README.md").trimEnd().split("\n").length
    assert.isAtMost(lines, readmeLinesMax, `README.md has ${lines} lines`)
  })

  it("links only to files and headings that exist", () => {
    for (const file of ["README.md", "docs/index.md", "docs/benchmarks.md", "CHANGELOG.md"]) {
      assert.isAbove(linksOf(read(file)).length, 0, `${file} has no links`)
      assert.deepStrictEqual(brokenLinks(file), [])
    }
  })

  it("lists every page of docs/ in docs/index.md", () => {
    const listed = new Set(linksOf(read("docs/index.md")).map((link) => link.split("#")[0]))
    const pages = [
      ...readdirSync(join(root, "docs")).filter((name) => name.endsWith(".md") && name !== "index.md"),
      ...readdirSync(join(root, "docs", "kinds")).filter((name) => name.endsWith(".md")).map((name) => `kinds/${name}`)
    ]
    assert.isAbove(pages.length, 40)
    assert.deepStrictEqual(pages.filter((page) => !listed.has(page)), [])
  })

  it("names every setting of nodus serve in the README's configuration table", () => {
    const readme = read("README.md")
    const table = readme.slice(
      readme.indexOf("## Configuration"),
      readme.indexOf("\n## ", readme.indexOf("## Configuration") + 1)
    )
    const missing = settings.filter((setting) =>
      !table.includes(`\`${setting.env}\``) || !table.includes(`\`${setting.flag}\``)
    )
    assert.deepStrictEqual(missing.map((setting) => setting.flag), [])
  })

  it("gives every bench script a section in docs/benchmarks.md", () => {
    const scripts = Object.keys(JSON.parse(read("package.json")).scripts as Record<string, string>)
      .filter((name) => name.startsWith("bench:"))
    assert.isAtLeast(scripts.length, 11)
    const headings = read("docs/benchmarks.md").split("\n").filter((line) => line.startsWith("## "))
    assert.deepStrictEqual(scripts.filter((name) => !headings.some((line) => line.includes(`npm run ${name}`))), [])
  })
})
