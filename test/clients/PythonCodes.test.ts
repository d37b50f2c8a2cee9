// The Python client's table of error codes (clients/python/nodus/_codes.py) is generated from the one registry
// (src/core/meta/ErrorCodes.ts) by clients/python/codegen.ts: a code added, moved to another client class, or made
// retryable in the registry fails this test until the table is regenerated (`node clients/python/codegen.ts`), and
// until docs/clients.md's error table lists it under its class.
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { pythonCodesModule, pythonCodesPath } from "../../clients/python/codegen.ts"
import { errorCodeList, errorCodes } from "../../src/core/meta/ErrorCodes.ts"

describe("the Python client's error-code table", () => {
  it("is exactly what the generator writes from the registry", () => {
    assert.strictEqual(
      readFileSync(pythonCodesPath, "utf8"),
      pythonCodesModule(),
      "run: node clients/python/codegen.ts"
    )
  })

  it("has one row per registered code with its client class, HTTP status and retryability", () => {
    const text = pythonCodesModule()
    for (const code of errorCodeList) {
      const info = errorCodes[code]
      assert.include(
        text,
        `    "${code}": ("${info.clientError}", ${info.httpStatus}, ${info.retryable ? "True" : "False"}),\n`
      )
    }
    assert.strictEqual(text.split("\n").filter((line) => line.startsWith("    \"")).length, errorCodeList.length)
  })
})

describe("docs/clients.md's error table", () => {
  it("lists under each class exactly the registered codes the registry gives it", () => {
    const page = readFileSync(join(import.meta.dirname, "..", "..", "docs", "clients.md"), "utf8")
    const documented = new Map(
      page.split("\n")
        .map((line) => /^\| `([A-Za-z]+)` \| ([^|]+) \|/u.exec(line))
        .filter((match) => match !== null)
        .map((match) => [match[1]!, match[2]!.startsWith("(") ? [] : match[2]!.split(", ").map((code) => code.trim())])
    )
    const expected = new Map<string, Array<string>>()
    for (const code of errorCodeList) {
      expected.set(errorCodes[code].clientError, [...(expected.get(errorCodes[code].clientError) ?? []), code])
    }
    for (const [name, codes] of expected) assert.deepStrictEqual(documented.get(name), codes, name)
    for (const name of ["ConfigurationError", "SignatureError"]) assert.deepStrictEqual(documented.get(name), [], name)
  })
})
