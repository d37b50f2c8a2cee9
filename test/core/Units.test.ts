/**
 * The value grammars of the spec's strings (Conventions 2): durations, Kubernetes quantities and USD amounts, each
 * against values whose meaning Kubernetes and Go fix, and the text each grammar refuses.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { compareUsd, formatDurationMs, isUsd, parseDurationMs, parseQuantity } from "../../src/core/Units.ts"

describe("durations", () => {
  const parsed: ReadonlyArray<readonly [string, number]> = [
    ["0", 0],
    ["0s", 0],
    ["30s", 30_000],
    ["1h30m", 5_400_000],
    ["168h", 604_800_000],
    ["0.5s", 500],
    [".5m", 30_000],
    ["1500ms", 1_500],
    ["2m1s", 121_000]
  ]
  for (const [text, milliseconds] of parsed) {
    it(`reads ${text} as ${milliseconds} ms`, () => assert.strictEqual(parseDurationMs(text), milliseconds))
  }

  for (const text of ["", "1", "-5s", "5 s", "5d", "1h-30m", "s", "1.2.3s"]) {
    it(`refuses ${JSON.stringify(text)}`, () => assert.isUndefined(parseDurationMs(text)))
  }

  it("formats whole milliseconds as the shortest Go text, which reads back the same", () => {
    assert.strictEqual(formatDurationMs(90_000), "1m30s")
    assert.strictEqual(formatDurationMs(0), "0s")
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10 * 365 * 86_400_000 }),
        (milliseconds) => parseDurationMs(formatDurationMs(milliseconds)) === milliseconds
      )
    )
  })
})

describe("quantities", () => {
  const parsed: ReadonlyArray<readonly [string, number]> = [
    ["2", 2],
    ["500m", 0.5],
    ["16Gi", 16 * 2 ** 30],
    ["1Ti", 2 ** 40],
    ["1k", 1_000],
    ["1M", 1e6],
    ["1e3", 1_000],
    ["1E", 1e18],
    ["1E3", 1_000],
    ["2Ei", 2 * 2 ** 60],
    ["99999999999999999999Ei", 99999999999999999999 * 2 ** 60],
    ["1.5Gi", 1.5 * 2 ** 30]
  ]
  for (const [text, value] of parsed) {
    it(`reads ${text} as ${value}`, () => assert.strictEqual(parseQuantity(text), value))
  }

  for (const text of ["", "-1", "1 Gi", "1GB", "Gi", "1.2.3"]) {
    it(`refuses ${JSON.stringify(text)}`, () => assert.isUndefined(parseQuantity(text)))
  }
})

describe("USD amounts", () => {
  it("accepts decimal strings with at most six decimals and nothing else", () => {
    for (const text of ["0", "12.50", "0.000001", "1000000"]) assert.isTrue(isUsd(text), text)
    for (const text of ["", "-1", "01", "1.", "1.0000001", "1e3", " 1", "1,00", "$1"]) assert.isFalse(isUsd(text), text)
  })

  it("compares exactly, beyond what a float can tell apart", () => {
    assert.strictEqual(compareUsd("9007199254740993.000001", "9007199254740993"), 1)
    assert.strictEqual(compareUsd("0.1", "0.100000"), 0)
    assert.strictEqual(compareUsd("9.99", "10"), -1)
  })
})
