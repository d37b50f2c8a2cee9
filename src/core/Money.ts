/**
 * Money inside nodus is an integer count of micro-USD held in a bigint (docs/kinds/Offering.md; spec: Conventions 2).
 * The ledger counts micro-USD, and floats would lose cents when rates are summed over many hours. Money reaches the
 * API as a decimal USD string with at most six decimals. These two functions convert between the string and the
 * bigint without rounding, so parsing what was formatted always gives back the same value. Pure.
 */
import { Decimal } from "decimal.js"

const microPerUsd = 1_000_000n
const decimals = 6
const plainDecimal = /^-?[0-9]+(\.[0-9]+)?$/u

/** A decimal USD string of an exact micro-USD amount: 23920000n → "23.92", 5289200n → "5.2892", 0n → "0". */
export const formatMicroUsd = (micro: bigint): string => {
  const sign = micro < 0n ? "-" : ""
  const magnitude = micro < 0n ? -micro : micro
  const whole = magnitude / microPerUsd
  const fraction = (magnitude % microPerUsd).toString().padStart(decimals, "0").replace(/0+$/u, "")
  return fraction === "" ? `${sign}${whole}` : `${sign}${whole}.${fraction}`
}

/**
 * The exact micro-USD amount of a plain decimal string ("23.92", "5.289200", "-0.5"). Throws on anything else:
 * exponents, empty text, or more than six decimals that are not zero, since those would have to be rounded.
 */
export const parseMicroUsd = (text: string): bigint => {
  if (!plainDecimal.test(text)) throw new Error(`not a decimal USD amount: "${text}"`)
  const amount = new Decimal(text)
  if (amount.decimalPlaces() > decimals) throw new Error(`USD amount "${text}" has more than ${decimals} decimals`)
  // toFixed is exact at any length (unlike arithmetic, which rounds to Decimal's precision); dropping the point
  // leaves the count of micro-USD.
  return BigInt(amount.toFixed(decimals).replace(".", ""))
}

/** `parseMicroUsd`, or undefined for text that is no decimal USD amount (stored text of an older schema, an edit). */
export const tryParseMicroUsd = (text: string): bigint | undefined => {
  try {
    return parseMicroUsd(text)
  } catch {
    return undefined
  }
}

/** The smaller of two amounts. */
export const minMicro = (a: bigint, b: bigint): bigint => (a < b ? a : b)
