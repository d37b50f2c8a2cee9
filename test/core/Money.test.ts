// Unit and property tests for src/core/Money.ts. Micro-USD bigints and decimal USD strings must convert both ways
// without rounding. The output has to satisfy the API's USD grammar, and parsing must refuse text it could only
// round.

import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { formatMicroUsd, parseMicroUsd } from "../../src/core/Money.ts"
import { isUsd } from "../../src/core/Units.ts"

describe("formatMicroUsd", () => {
  it.each([
    [23_920_000n, "23.92"],
    [5_289_200n, "5.2892"],
    [0n, "0"],
    [1n, "0.000001"],
    [1_000_000n, "1"],
    [40_965_750n, "40.96575"],
    [123_194_960n, "123.19496"],
    [-1_500_000n, "-1.5"]
  ])("%s micro-USD is %s", (micro, text) => {
    expect(formatMicroUsd(micro)).toBe(text)
  })
})

describe("parseMicroUsd", () => {
  it.each([
    ["23.92", 23_920_000n],
    ["5.289200", 5_289_200n],
    ["0", 0n],
    ["0.000001", 1n],
    ["16.936000", 16_936_000n],
    ["40.96575", 40_965_750n],
    ["1.0000000", 1_000_000n],
    ["-0.5", -500_000n],
    ["98765432109876543210.123456", 98_765_432_109_876_543_210_123_456n]
  ])("%s is %s micro-USD", (text, micro) => {
    expect(parseMicroUsd(text)).toBe(micro)
  })

  it.each(["1.0000001", "0.1234567", "1e3", "", " 1", "1.", ".5", "abc", "1,5", "Infinity", "0x10"])(
    "refuses %j",
    (text) => {
      expect(() => parseMicroUsd(text)).toThrow()
    }
  )
})

describe("round trips", () => {
  it("format then parse gives back every bigint", () => {
    fc.assert(fc.property(fc.bigInt(), (micro) => {
      expect(parseMicroUsd(formatMicroUsd(micro))).toBe(micro)
    }))
  })

  it("a non-negative amount formats to an API USD string", () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 10n ** 15n }), (micro) => {
      expect(isUsd(formatMicroUsd(micro))).toBe(true)
    }))
  })

  it("parse then format gives back canonical text", () => {
    const canonical = fc.tuple(fc.bigInt({ min: 0n, max: 10n ** 12n }), fc.integer({ min: 0, max: 999_999 })).map((
      [whole, fraction]
    ) => fraction === 0 ? `${whole}` : `${whole}.${`${fraction}`.padStart(6, "0").replace(/0+$/u, "")}`)
    fc.assert(fc.property(canonical, (text) => {
      expect(formatMicroUsd(parseMicroUsd(text))).toBe(text)
    }))
  })
})
