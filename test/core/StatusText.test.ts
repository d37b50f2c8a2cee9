/** The memoized status texts agree with the plain conversions they stand for, cached or not. */
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { durationMs, durationText, iso, parseTime } from "../../src/core/StatusText.ts"
import { formatDurationMs, parseDurationMs } from "../../src/core/Units.ts"

describe("status texts", () => {
  it("iso is toISOString for any whole millisecond, twice (the second time from the cache)", () => {
    fc.assert(
      fc.property(fc.integer({ min: -8.64e15, max: 8.64e15 }), (ms) => {
        const expected = new Date(ms).toISOString()
        expect(iso(ms)).toBe(expected)
        expect(iso(ms)).toBe(expected)
        expect(parseTime(expected)).toBe(ms)
      }),
      { numRuns: 2000 }
    )
  })

  it("iso is toISOString for any whole millisecond of 1970-9999 (formatted from its parts)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 253_402_300_799_999 }), (ms) => {
        expect(iso(ms)).toBe(new Date(ms).toISOString())
      }),
      { numRuns: 5000 }
    )
  })

  it("durations read and print as Units does", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 10 ** 10 }), (ms) => {
      const text = formatDurationMs(ms)
      expect(durationText(ms)).toBe(text)
      expect(durationMs(text, -1)).toBe(parseDurationMs(text))
    }))
    expect(durationMs("not a duration", 42)).toBe(42)
    expect(durationMs(undefined, 7)).toBe(7)
  })
})
