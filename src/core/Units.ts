/**
 * The value grammars the spec writes as strings (Conventions 2): durations ("30s", "15m", "24h", "168h"), Kubernetes
 * quantities ("16Gi", "500m", "2") and USD amounts (decimal strings). Each parser returns undefined for text that is
 * not in its grammar, so schemas can say exactly what is wrong. Pure.
 */
import { Decimal } from "decimal.js"
import { lastValues } from "./Memo.ts"

const durationUnitsMs: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000
}

const durationPart = /([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)/gu
const durationWhole = /^(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|ms|s|m|h))+$/u

/**
 * Milliseconds of a Go-style duration ("1h30m", "0.5s", "0s"), the form Kubernetes and the spec use; undefined when
 * the text is not one. Negative durations are not durations here: no field of the spec takes one.
 */
export const parseDurationMs = (text: string): number | undefined => {
  if (text.length > parsedDurationTextMax) return parseDuration(text)
  return parsedDurations(text, () => parseDuration(text))
}

const parsedDurationTextMax = 32
// A spec's few durations ("24h", "2m", "168h") are read at every admission and estimate: the last short ones are kept.
const parsedDurations = lastValues<number | undefined>(1_024)

const parseDuration = (text: string): number | undefined => {
  if (text === "0") return 0
  if (!durationWhole.test(text)) return undefined
  let total = 0
  for (const [, amount, unit] of text.matchAll(durationPart)) total += Number(amount) * durationUnitsMs[unit!]!
  return total
}

/** The shortest Go-style text of a whole number of milliseconds (for messages): 90000 → "1m30s". */
export const formatDurationMs = (milliseconds: number): string => {
  if (milliseconds === 0) return "0s"
  const parts: Array<string> = []
  let rest = milliseconds
  for (const [unit, size] of [["h", 3_600_000], ["m", 60_000], ["s", 1_000], ["ms", 1]] as const) {
    const count = Math.floor(rest / size)
    if (count > 0) parts.push(`${count}${unit}`)
    rest -= count * size
  }
  return parts.join("")
}

const binarySuffixes: Readonly<Record<string, number>> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60
}
const decimalSuffixes: Readonly<Record<string, number>> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18
}
const quantityPattern = /^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$/u

/**
 * The value of a Kubernetes quantity in base units (bytes for memory and disk, cores for CPU): "16Gi" → 17179869184,
 * "500m" → 0.5, "1e3" → 1000. Undefined when the text is not a non-negative quantity.
 */
export const parseQuantity = (text: string): number | undefined => {
  const match = quantityPattern.exec(text)
  if (match === null) return undefined
  const amount = Number(match[1])
  const suffix = match[2] ?? ""
  // "E" alone is exa and "Ei" exbi; "E3" or "e3" is a decimal exponent.
  const exponent = suffix.length > 1 && suffix !== "Ei" && (suffix[0] === "e" || suffix[0] === "E")
  if (exponent) return amount * 10 ** Number(suffix.slice(1))
  return amount * (binarySuffixes[suffix] ?? decimalSuffixes[suffix] ?? Number.NaN)
}

/** USD amounts at the API edge: non-negative decimal strings with at most six decimals (the ledger's micro-USD). */
export const usdPattern = /^(0|[1-9][0-9]*)(\.[0-9]{1,6})?$/u

export const isUsd = (text: string): boolean => usdPattern.test(text)

/** Compares two USD strings exactly (-1, 0, 1). */
export const compareUsd = (a: string, b: string): number => new Decimal(a).comparedTo(new Decimal(b))
