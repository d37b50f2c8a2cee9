// The Python client's table of error codes (clients/python/nodus/_codes.py) is generated from the one registry
// (src/core/meta/ErrorCodes.ts) by clients/python/codegen.ts: a code added, moved to another client class, or made
// retryable in the registry fails this test until the table is regenerated (`node clients/python/codegen.ts`).
import { readFileSync } from "node:fs"
import { assert, describe, it } from "@effect/vitest"
import { pythonCodesModule, pythonCodesPath } from "../../clients/python/codegen.ts"
import { errorCodeList, errorCodes } from "../../src/core/meta/ErrorCodes.ts"

describe("the Python client's error-code table", () => {
  it("is exactly what the generator writes from the registry", () => {
    assert.strictEqual(readFileSync(pythonCodesPath, "utf8"), pythonCodesModule(), "run: node clients/python/codegen.ts")
  })

  it("has one row per registered code with its client class, HTTP status and retryability", () => {
    const text = pythonCodesModule()
    for (const code of errorCodeList) {
      const info = errorCodes[code]
      assert.include(text, `    "${code}": ("${info.clientError}", ${info.httpStatus}, ${info.retryable ? "True" : "False"}),\n`)
    }
    assert.strictEqual(text.split("\n").filter((line) => line.startsWith("    \"")).length, errorCodeList.length)
  })
})
