// The generic HTTP layer names no kind (issue 30; docs/architecture.md, "Adding a kind"): what a kind adds to the API
// is its registration in src/kinds/<kind>/http/, listed in src/kinds/Registry.ts. This test reads every file of
// src/http/ without its comments and fails on a kind's name or plural there: as a whole string ("serviceaccounts",
// "Job"), or as a word of an identifier or import path (makeSandboxApi, ./FunctionMap.ts). Prose inside a message is
// not a name the code dispatches on, and is left alone.
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { kinds } from "../../src/kinds/Kinds.ts"
import { filesUnder } from "../support/SourceFiles.ts"

const root = join(import.meta.dirname, "..", "..")
const http = join(root, "src", "http")

/**
 * The kinds the check looks for: every kind of the API but three whose names are also words of the generic layer's
 * own: Node and Agent (the node agent protocol the layer serves for the backends, /agent/v1/…, runtime/NodeAgents.ts,
 * and a request's User-Agent) and App (the HTTP app, `app`).
 */
const unchecked = new Set(["Node", "Agent", "App"])
const checked = kinds.filter((info) => !unchecked.has(info.kind))
const names = new Set(checked.flatMap((info) => [info.kind, info.plural]))
const lowerNames = new Set(checked.flatMap((info) => [info.kind.toLowerCase(), info.plural]))

/** The text without its comments, string contents apart: [code, strings]. */
export const split = (text: string): { readonly code: string; readonly strings: ReadonlyArray<string> } => {
  let code = ""
  const strings: Array<string> = []
  let index = 0
  while (index < text.length) {
    const char = text[index]!
    const next = text[index + 1]
    if (char === "/" && next === "/") {
      while (index < text.length && text[index] !== "\n") index++
    } else if (char === "/" && next === "*") {
      index = text.indexOf("*/", index + 2) + 2
    } else if (char === "\"" || char === "'" || char === "`") {
      let end = index + 1
      while (end < text.length && text[end] !== char) end += text[end] === "\\" ? 2 : 1
      strings.push(text.slice(index + 1, end))
      code += " "
      index = end + 1
    } else {
      code += char
      index++
    }
  }
  return { code, strings }
}

/** The words of an identifier or path: makeSandboxApi → make, Sandbox, Api. */
const wordsOf = (token: string): Array<string> => token.split(/[^A-Za-z]+|(?<=[a-z])(?=[A-Z])/u).filter(Boolean)

/** The kind names a file's code holds. */
export const kindNamesIn = (text: string): Array<string> => {
  const { code, strings } = split(text)
  const found: Array<string> = []
  for (const identifier of code.match(/[A-Za-z_$][\w$]*/gu) ?? []) {
    if (identifier === "function") continue
    for (const word of wordsOf(identifier)) {
      if (names.has(word) || lowerNames.has(word)) found.push(`${word} (in ${identifier})`)
    }
  }
  for (const text of strings) {
    if (names.has(text) || lowerNames.has(text)) found.push(`"${text}"`)
    // An import path or a file named in code: its segments are identifiers.
    if (/^\.{1,2}\//u.test(text)) {
      for (const word of text.split("/").flatMap(wordsOf)) if (names.has(word)) found.push(`${word} (in "${text}")`)
    }
  }
  return found
}

describe("the generic HTTP layer", () => {
  it("the check finds a kind named in code, as a string, an identifier or an import", () => {
    assert.deepStrictEqual(kindNamesIn(`if (info.plural === "serviceaccounts") return`), [`"serviceaccounts"`])
    assert.deepStrictEqual(kindNamesIn(`const api = makeSandboxApi(x)`), ["Sandbox (in makeSandboxApi)"])
    assert.deepStrictEqual(kindNamesIn(`import { x } from "../kinds/job/http/JobApi.ts"`), [
      `Job (in "../kinds/job/http/JobApi.ts")`
    ])
    assert.deepStrictEqual(kindNamesIn(`const volumes = 1`), ["volumes (in volumes)"])
    // Comments, prose in a message and the keyword `function` are not names the code dispatches on.
    assert.deepStrictEqual(
      kindNamesIn(`// a Job's log\nconst f = function() { return "a Job that ran" }`),
      []
    )
  })

  it("names no kind in src/http/", () => {
    const files = filesUnder(http)
    assert.isAtLeast(files.length, 10, "the layer's files were read")
    const found = files.flatMap((file) =>
      kindNamesIn(readFileSync(file, "utf8")).map((name) => `${relative(root, file)}: ${name}`)
    )
    assert.deepStrictEqual(found, [])
  })
})
