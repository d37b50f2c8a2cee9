/**
 * `nodus sandbox shell` without a usable terminal (issue 29, item 17): with no tty it says so and points to
 * `nodus sandbox exec` instead of hanging; a terminal that reports 0×0 (or no size) asks for 80×24.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { join } from "node:path"
import { noTerminal, terminalSize } from "../../src/cli/SandboxShell.ts"

const root = join(import.meta.dirname, "..", "..")
const cli = join(root, "bin", "nodus.js")

describe("nodus sandbox shell", () => {
  it(
    "with stdin not a terminal: exits 2 at once, pointing to nodus sandbox exec (no server needed to say so)",
    async () => {
      const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("NODUS_")))
      // The server address is one nothing listens on: the answer must come before any connection is tried.
      const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
        const child = execFile(
          process.execPath,
          [cli, "sandbox", "shell", "box", "-n", "demo"],
          { cwd: root, env: { ...env, NODUS_ADDR: "http://127.0.0.1:9" }, timeout: 30_000 },
          (error, _stdout, stderr) =>
            resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stderr })
        )
        child.stdin?.end()
      })
      assert.strictEqual(result.code, 2, result.stderr)
      assert.include(result.stderr, "stdin is not a terminal")
      assert.include(result.stderr, "nodus sandbox exec")
      assert.notInclude(result.stderr, "ECONNREFUSED")
    },
    40_000
  )

  it("asks for 80×24 where the terminal says 0×0 or nothing, and its own size otherwise", () => {
    assert.deepStrictEqual(terminalSize({ columns: 0, rows: 0 }), { cols: 80, rows: 24 })
    assert.deepStrictEqual(terminalSize({}), { cols: 80, rows: 24 })
    assert.deepStrictEqual(terminalSize({ columns: 132, rows: 0 }), { cols: 132, rows: 24 })
    assert.deepStrictEqual(terminalSize({ columns: 5000, rows: 50 }), { cols: 1000, rows: 50 })
    assert.isUndefined(noTerminal({ isTTY: true }))
    assert.include(noTerminal({ isTTY: false }), "nodus sandbox exec")
  })
})
