/**
 * The trace hash is the sha256 of the trace's lines in UTF-8, each followed by "\n", however the lines are gathered
 * on the way to the hash (Simulation.ts, TraceHash): lines of any length (longer than its chunk too), any characters
 * (several bytes of UTF-8, surrogate pairs), any count (across many chunks), a digest taken in the middle of a run
 * that leaves the rest of the run's digest unchanged, and a line given in its parts (`line`) hashed as the line made
 * from them.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { createHash } from "node:crypto"
import { TraceHash, traceLine } from "../../../src/backends/sim/Simulation.ts"

const expected = (lines: ReadonlyArray<string>): string =>
  createHash("sha256").update(lines.map((line) => `${line}\n`).join("")).digest("hex")

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
    assert.strictEqual(
      trace.digest(),
      expected(["1767225600000 data/etl-1 Created", "", "1767225600000 data/etl-1 Launch etl-1-0-1 cpu"])
    )
  })

  it("hashes many chunks, long lines and characters of several bytes as their UTF-8", () => {
    const lines: Array<string> = []
    for (let index = 0; index < 20_000; index++) {
      lines.push(
        `${1_767_225_600_000 + index * 977} research/finetune-${index} Event job.checkpointed Checkpointed: ${
          index % 7 === 0 ? "≤ é 😀" : "saved"
        }`
      )
    }
    lines.splice(5_000, 0, "x".repeat(70_000), "€".repeat(30_000), "😀".repeat(20_000), "")
    assert.strictEqual(hashed(lines).digest(), expected(lines))
  })

  it("hashes a line given in its parts as the line made from them, mixed with whole lines", () => {
    const part = fc.oneof(
      fc.constantFrom("", " ", "Event ", ": ", ">", "job.checkpointed"),
      fc.string({ maxLength: 30 }),
      fc.string({ unit: "binary", maxLength: 30 }),
      fc.string({ maxLength: 30000 })
    )
    const now = fc.oneof(
      fc.integer({ min: 0, max: 2 ** 53 - 1 }),
      fc.constantFrom(0, 9, 10, 99, 100, 1_767_225_600_000, -1, 0.5, -0, 2 ** 53),
      fc.double()
    )
    const entry = fc.oneof(
      fc.record({ now, subject: fc.string({ maxLength: 40 }), parts: fc.array(part, { minLength: 1, maxLength: 6 }) }),
      fc.string({ maxLength: 100 })
    )
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 60 }), (entries) => {
        const trace = new TraceHash()
        const made = new TraceHash(true)
        const lines: Array<string> = []
        for (const entry of entries) {
          if (typeof entry === "string") {
            trace.record(entry)
            made.record(entry)
            lines.push(entry)
            continue
          }
          const [a, b, c, d, e, f] = entry.parts as [string, string?, string?, string?, string?, string?]
          trace.line(entry.now, entry.subject, a, b, c, d, e, f)
          traceLine(made, entry.now, entry.subject, a, b, c, d, e, f)
          lines.push(`${entry.now} ${entry.subject} ${entry.parts.join("")}`)
        }
        assert.strictEqual(trace.count, lines.length)
        assert.deepStrictEqual(made.lines, lines)
        assert.strictEqual(trace.digest(), expected(lines))
        assert.strictEqual(made.digest(), expected(lines))
      }),
      { numRuns: 300 }
    )
  })

  it("gives the same digest for any lines, and a digest taken midway leaves the final one unchanged", () => {
    const line = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.string({ unit: "grapheme", maxLength: 40 }),
      fc.string({ unit: "binary", maxLength: 3000 })
    )
    fc.assert(
      fc.property(fc.array(line, { maxLength: 300 }), fc.nat(300), (lines, at) => {
        const trace = new TraceHash(true)
        lines.forEach((entry, index) => {
          if (index === at) assert.strictEqual(trace.digest(), expected(lines.slice(0, at)))
          trace.record(entry)
        })
        assert.strictEqual(trace.digest(), expected(lines))
        assert.deepStrictEqual(trace.lines, lines)
      }),
      { numRuns: 200 }
    )
  })
})
