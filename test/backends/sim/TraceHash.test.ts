/**
 * The trace hash is the sha256 of the trace's lines in UTF-8, each followed by "\n", however the lines are gathered
 * on the way to the hash (Simulation.ts, TraceHash): lines of any length (longer than its chunk too), any characters
 * (several bytes of UTF-8, surrogate pairs), any count (across many chunks), and a digest taken in the middle of a run
 * that leaves the rest of the run's digest unchanged.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { createHash } from "node:crypto"
import { TraceHash } from "../../../src/backends/sim/Simulation.ts"

const expected = (lines: ReadonlyArray<string>): string => createHash("sha256").update(lines.map((line) => `${line}\n`).join("")).digest("hex")

const hashed = (lines: ReadonlyArray<string>): TraceHash => {
  const trace = new TraceHash()
  for (const line of lines) trace.record(line)
  return trace
}

describe("TraceHash", () => {
  it("is the sha256 of the lines, each followed by a newline", () => {
    assert.strictEqual(new TraceHash().digest(), createHash("sha256").update("").digest("hex"))
    assert.strictEqual(hashed(["a"]).digest(), createHash("sha256").update("a\n").digest("hex"))
    const trace = hashed(["1767225600000 data/etl-1 Created", "", "1767225600000 data/etl-1 Launch etl-1-0-1 cpu"])
    assert.strictEqual(trace.count, 3)
    assert.strictEqual(trace.digest(), expected(["1767225600000 data/etl-1 Created", "", "1767225600000 data/etl-1 Launch etl-1-0-1 cpu"]))
  })

  it("hashes many chunks, long lines and characters of several bytes as their UTF-8", () => {
    const lines: Array<string> = []
    for (let index = 0; index < 20_000; index++) lines.push(`${1_767_225_600_000 + index * 977} research/finetune-${index} Event job.checkpointed Checkpointed: ${index % 7 === 0 ? "≤ é 😀" : "saved"}`)
    lines.splice(5_000, 0, "x".repeat(70_000), "€".repeat(30_000), "😀".repeat(20_000), "")
    assert.strictEqual(hashed(lines).digest(), expected(lines))
  })

  it("gives the same digest for any lines, and a digest taken midway leaves the final one unchanged", () => {
    const line = fc.oneof(fc.string({ maxLength: 200 }), fc.string({ unit: "grapheme", maxLength: 40 }), fc.string({ unit: "binary", maxLength: 3000 }))
    fc.assert(fc.property(fc.array(line, { maxLength: 300 }), fc.nat(300), (lines, at) => {
      const trace = new TraceHash(true)
      lines.forEach((entry, index) => {
        if (index === at) assert.strictEqual(trace.digest(), expected(lines.slice(0, at)))
        trace.record(entry)
      })
      assert.strictEqual(trace.digest(), expected(lines))
      assert.deepStrictEqual(trace.lines, lines)
    }), { numRuns: 200 })
  })
})
