/**
 * The layering of docs/architecture.md, held: every relative import of every file under src/ goes where the page's
 * "What may import what" table allows, the folders import each other without a cycle, and the core reads no clock,
 * draws no random number and does no I/O. The table is read from the page itself, so the page and the code cannot
 * drift apart.
 */
import { assert, describe, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"

const root = join(import.meta.dirname, "..")
const src = join(root, "src")

/** Every .ts file under a directory. */
const filesUnder = (directory: string): Array<string> =>
  readdirSync(directory, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? filesUnder(join(directory, entry.name))
      : entry.name.endsWith(".ts")
      ? [join(directory, entry.name)]
      : []
  )

/** The layer of a file: its top folder under src/, one level deeper for core and backends (`core` for core's own files). */
const layerOf = (file: string): string => {
  const parts = relative(src, file).split("/")
  if (parts[0] === "core" || parts[0] === "backends") return parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts[0]!
  return parts[0]!
}

/** The relative imports of a file (static, dynamic and type-only), as absolute paths. */
const importsOf = (file: string): Array<string> => {
  const text = readFileSync(file, "utf8")
  const found: Array<string> = []
  for (const match of text.matchAll(/(?:from|import\()\s*"(\.{1,2}\/[^"]+)"/gu)) {
    found.push(resolve(dirname(file), match[1]!))
  }
  return found
}

/** The "What may import what" table of docs/architecture.md. */
const rules = (): ReadonlyMap<string, ReadonlySet<string>> => {
  const page = readFileSync(join(root, "docs", "architecture.md"), "utf8")
  const section = page.slice(page.indexOf("## What may import what"))
  const table = new Map<string, ReadonlySet<string>>()
  for (const line of section.split("\n")) {
    const row = /^\| `([^`]+)` \|(.*)\|$/u.exec(line)
    if (row === null) continue
    table.set(row[1]!, new Set([...row[2]!.matchAll(/`([^`]+)`/gu)].map((entry) => entry[1]!)))
  }
  return table
}

const files = filesUnder(src)

describe("docs/architecture.md: the layers", () => {
  const table = rules()

  it("names a rule for every layer the code has", () => {
    assert.isAtLeast(table.size, 10, "the table was read")
    const layers = new Set(files.map(layerOf))
    for (const layer of layers) assert.isTrue(table.has(layer), `layer ${layer} has no row in the table`)
  })

  it("every import goes where the table allows", () => {
    const broken: Array<string> = []
    for (const file of files) {
      const from = layerOf(file)
      for (const target of importsOf(file)) {
        const to = layerOf(target)
        if (to !== from && !table.get(from)?.has(to)) {
          broken.push(`${relative(root, file)} (${from}) imports ${relative(root, target)} (${to})`)
        }
      }
    }
    assert.deepStrictEqual(broken, [])
  })

  it("has no import cycle between folders", () => {
    const edges = new Map<string, Set<string>>()
    for (const file of files) {
      for (const target of importsOf(file)) {
        const from = dirname(relative(src, file))
        const to = dirname(relative(src, target))
        if (from !== to) edges.set(from, (edges.get(from) ?? new Set()).add(to))
      }
    }
    // Depth-first search with colours: a grey node met again closes a cycle.
    const colour = new Map<string, "grey" | "black">()
    const cycles: Array<string> = []
    const visit = (node: string, path: Array<string>) => {
      colour.set(node, "grey")
      for (const next of edges.get(node) ?? []) {
        if (colour.get(next) === "grey") cycles.push([...path, node, next].join(" → "))
        else if (colour.get(next) === undefined) visit(next, [...path, node])
      }
      colour.set(node, "black")
    }
    for (const node of edges.keys()) if (colour.get(node) === undefined) visit(node, [])
    assert.deepStrictEqual(cycles, [])
  })

  it("keeps the core pure: no I/O modules, no clock reads, no Math.random", () => {
    const impure: Array<string> = []
    for (const file of files.filter((path) => layerOf(path).startsWith("core"))) {
      const text = readFileSync(file, "utf8")
      if (/from\s+"node:/u.test(text)) impure.push(`${relative(root, file)} imports a node: module`)
      if (/\bMath\.random\b/u.test(text)) impure.push(`${relative(root, file)} calls Math.random`)
      if (/\bDate\.now\b|new Date\(\)/u.test(text)) impure.push(`${relative(root, file)} reads the clock`)
    }
    assert.deepStrictEqual(impure, [])
  })
})
