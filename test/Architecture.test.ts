/**
 * The layering of docs/architecture.md, held: every relative import of every file under src/ goes where the page's
 * "What may import what" table allows, neither the layers nor the files import each other in a cycle, and the core
 * reads no clock, draws no random number and does no I/O. The table is read from the page itself, so the page and the
 * code cannot drift apart. Names are held too: every service key says the path of the file that declares it, and
 * every source path a comment names exists.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { filesUnder } from "./support/SourceFiles.ts"

const root = join(import.meta.dirname, "..")
const src = join(root, "src")

/**
 * The layer of a file: its top folder under src/, one level deeper for core and backends (`core` for core's own
 * files). A kind's folder (src/kinds/<kind>/) spans three layers: its schemas (`*Schema.ts`, the vocabulary the core's
 * billing and capacity read too), its pure parts (machine, program, estimate, its entry in the registry of served
 * kinds) and its `http/` folder above the runtime (subresources, their OpenAPI operations), whose registry
 * (src/kinds/Registry.ts) is of that layer too.
 */
const layerOf = (file: string): string => {
  const parts = relative(src, file).split("/")
  if (parts[0] === "core" || parts[0] === "backends") return parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts[0]!
  if (parts[0] === "kinds") {
    if (parts.slice(1, -1).includes("http") || parts.slice(1).join("/") === "Registry.ts") return "kinds/http"
    return parts[parts.length - 1]!.endsWith("Schema.ts") ? "kinds/schema" : "kinds"
  }
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

/** The cycles of a directed graph, one per back edge met by a depth-first search (a grey node met again closes one). */
const cyclesOf = (edges: ReadonlyMap<string, ReadonlySet<string>>): Array<Array<string>> => {
  const colour = new Map<string, "grey" | "black">()
  const cycles: Array<Array<string>> = []
  const visit = (node: string, path: Array<string>) => {
    colour.set(node, "grey")
    for (const next of edges.get(node) ?? []) {
      if (colour.get(next) === "grey") cycles.push([...path.slice(path.indexOf(next)), node, next])
      else if (colour.get(next) === undefined) visit(next, [...path, node])
    }
    colour.set(node, "black")
  }
  for (const node of [...edges.keys()].sort()) if (colour.get(node) === undefined) visit(node, [])
  return cycles
}

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

  it("has no import cycle between layers", () => {
    // Between layers, not folders: a kind's folder holds files of three layers (its schema below the core's billing,
    // its machine above it), and the files among themselves are held acyclic below.
    const edges = new Map<string, Set<string>>()
    for (const file of files) {
      for (const target of importsOf(file)) {
        const from = layerOf(file)
        const to = layerOf(target)
        if (from !== to) edges.set(from, (edges.get(from) ?? new Set()).add(to))
      }
    }
    assert.deepStrictEqual(cyclesOf(edges).map((cycle) => cycle.join(" → ")), [])
  })

  it("keeps the core pure: no I/O modules, no clock reads, no Math.random", () => {
    const impure: Array<string> = []
    for (
      const file of files.filter((path) =>
        layerOf(path).startsWith("core") || layerOf(path) === "kinds" || layerOf(path) === "kinds/schema"
      )
    ) {
      const text = readFileSync(file, "utf8")
      if (/from\s+"node:/u.test(text)) impure.push(`${relative(root, file)} imports a node: module`)
      if (/\bMath\.random\b/u.test(text)) impure.push(`${relative(root, file)} calls Math.random`)
      if (/\bDate\.now\b|new Date\(\)/u.test(text)) impure.push(`${relative(root, file)} reads the clock`)
    }
    assert.deepStrictEqual(impure, [])
  })
})

/**
 * File-level cycles that other work in flight removes (issue 30: the OpenAPI builder takes each kind's operations from
 * its registration). Each entry names a file of the cycle; the test fails
 * when an entry no longer matches any cycle, so the list can only shrink.
 */
const cyclesBeingRemoved: ReadonlyArray<string> = []

describe("the files", () => {
  it("import each other without a cycle", () => {
    const edges = new Map<string, Set<string>>()
    for (const file of files) {
      const from = relative(src, file)
      edges.set(from, new Set(importsOf(file).map((target) => relative(src, target))))
    }
    const cycles = cyclesOf(edges)
    const pending = (cycle: ReadonlyArray<string>) => cyclesBeingRemoved.some((file) => cycle.includes(file))
    assert.deepStrictEqual(cycles.filter((cycle) => !pending(cycle)).map((cycle) => cycle.join(" → ")), [])
    for (const file of cyclesBeingRemoved) {
      assert.isTrue(cycles.some((cycle) => cycle.includes(file)), `${file} is in no cycle now: drop it from the list`)
    }
  })

  it("of the Python client import each other without a cycle", () => {
    // `from .x import …`, `from . import x` and `import .x` inside clients/python/nodus, at any indentation (a
    // function-level import closes a cycle as surely as one at the top).
    const folder = join(root, "clients", "python", "nodus")
    const modules = readdirSync(folder).filter((name) => name.endsWith(".py")).map((name) => name.slice(0, -3))
    const edges = new Map<string, Set<string>>()
    for (const module of modules) {
      const text = readFileSync(join(folder, `${module}.py`), "utf8")
      const targets = new Set<string>()
      for (const line of text.matchAll(/^\s*from \.(\w*) import ([\w, ()]+)/gmu)) {
        if (line[1] !== "") targets.add(line[1]!)
        else for (const name of line[2]!.split(/[\s,()]+/u)) if (modules.includes(name)) targets.add(name)
      }
      edges.set(module, targets)
    }
    assert.isAtLeast([...edges.values()].reduce((sum, targets) => sum + targets.size, 0), 5, "the imports were read")
    assert.deepStrictEqual(cyclesOf(edges).map((cycle) => cycle.join(" → ")), [])
  })

  it("declare each service under a key that is the file's path", () => {
    // `Context.Service<…>()("nodus/…")`, `Context.Reference<…>("nodus/…", …)` and the like: the string the type
    // arguments are applied to is the key. A key says where its service lives: <folder>/<File>.ts declares
    // "nodus/<folder>/<File>".
    const wrong: Array<string> = []
    let keys = 0
    for (const file of files) {
      const text = readFileSync(file, "utf8")
      const expected = `nodus/${relative(src, file).replace(/\.ts$/u, "")}`
      for (
        const declaration of text.matchAll(
          /\bContext\.(?:Service|Reference|Tag|Key)\b[\s\S]*?>(?:\(\))?\(\s*"([^"]*)"/gu
        )
      ) {
        keys += 1
        if (declaration[1] !== expected) {
          wrong.push(`${relative(root, file)} declares "${declaration[1]}", not "${expected}"`)
        }
      }
    }
    assert.isAtLeast(keys, 20, "the keys were read")
    assert.deepStrictEqual(wrong, [])
  })

  it("name in their comments only source paths that exist", () => {
    // A path in a comment is either spelled from the repository root (src/core/Json.ts) or from src/ and starts with
    // one of its folders (core/meta/Strategy.ts, runtime). Kubernetes group versions (core/v1) are not paths.
    const folders = readdirSync(src, { withFileTypes: true }).filter((entry) => entry.isDirectory())
    const pattern = new RegExp(
      `(?<![\\w./@-])(?:src/)?(?:${folders.map((entry) => entry.name).join("|")})/[\\w./-]*\\w`,
      "gu"
    )
    const missing: Array<string> = []
    let checked = 0
    for (const file of [...files, ...filesUnder(join(root, "test"))]) {
      const text = readFileSync(file, "utf8")
      for (const comment of text.matchAll(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/gu)) {
        for (const named of comment[0].matchAll(pattern)) {
          const path = named[0].replace(/^src\//u, "")
          if (/\/v\d+(?:alpha\d*|beta\d*)?$/u.test(path)) continue
          checked += 1
          if (existsSync(join(src, path)) || existsSync(join(src, `${path}.ts`))) continue
          const line = text.slice(0, comment.index + named.index).split("\n").length
          missing.push(`${relative(root, file)}:${line} names ${named[0]}`)
        }
      }
    }
    assert.isAtLeast(checked, 50, "the comments were read")
    assert.deepStrictEqual(missing, [])
  })
})
