/**
 * The texts a Job's status shows on every controller step, and their readings back: durations ("1h30m") and RFC 3339
 * times. The simulator's platform benchmark runs 10^7 steps, and these conversions were a large share of them, so each
 * is memoized. They are pure functions of their argument: a memo only remembers answers, and every cache is bounded.
 */
import { formatDurationMs, parseDurationMs } from "./Units.ts"

const durations = new Map<string, number | null>()

/** `parseDurationMs(text)`, or `fallback` when absent or malformed. */
export const durationMs = (text: string | undefined, fallback: number): number => {
  if (text === undefined) return fallback
  let ms = durations.get(text)
  if (ms === undefined) {
    ms = parseDurationMs(text) ?? null
    if (durations.size >= 4096) durations.clear()
    durations.set(text, ms)
  }
  return ms ?? fallback
}

const isoSlots = 65536
const isoTimes = new Float64Array(isoSlots).fill(Number.NaN)
const isoTexts: Array<string> = new Array<string>(isoSlots).fill("")
const parsedTimes = new Map<string, number>()

const durationTexts = new Map<number, string>()

/** `formatDurationMs(ms)`, memoized (the checkpoint interval is shown on every step of a running Job). */
export const durationText = (ms: number): string => {
  let text = durationTexts.get(ms)
  if (text === undefined) {
    text = formatDurationMs(ms)
    if (durationTexts.size >= 4096) durationTexts.clear()
    durationTexts.set(ms, text)
  }
  return text
}

const dayMs = 86_400_000
/** The character codes of a day's "YYYY-MM-DDT", by day since 1970. */
const dayPrefixes = new Map<number, ReadonlyArray<number>>()

const dayPrefixOf = (day: number): ReadonlyArray<number> => {
  let prefix = dayPrefixes.get(day)
  if (prefix === undefined) {
    const text = new Date(day * dayMs).toISOString()
    prefix = Array.from({ length: 11 }, (_, index) => text.charCodeAt(index))
    if (dayPrefixes.size >= 4096) dayPrefixes.clear()
    dayPrefixes.set(day, prefix)
  }
  return prefix
}

/** The character code of the decimal digit `value % 10`. */
const digit = (value: number): number => 48 + (value % 10)

/**
 * `new Date(ms).toISOString()` for a whole millisecond from 1970 to 9999 (a simulation's times): the date part per day
 * from `toISOString` itself, the time of day from arithmetic, the 24 characters made in one call. fromCharCode makes
 * one flat string (a template would keep a rope of its pieces in the status; a join makes the array of its pieces
 * first, and took half as long again). Anything else goes to `toISOString`.
 */
const formatIso = (ms: number): string => {
  if (!(Number.isInteger(ms) && ms >= 0 && ms < 253_402_300_800_000)) return new Date(ms).toISOString()
  const day = Math.floor(ms / dayMs)
  const p = dayPrefixOf(day)
  let rest = ms - day * dayMs
  const millis = rest % 1000
  rest = (rest - millis) / 1000
  const seconds = rest % 60
  rest = (rest - seconds) / 60
  const minutes = rest % 60
  const hours = (rest - minutes) / 60
  return String.fromCharCode(
    p[0]!,
    p[1]!,
    p[2]!,
    p[3]!,
    p[4]!,
    p[5]!,
    p[6]!,
    p[7]!,
    p[8]!,
    p[9]!,
    p[10]!,
    digit((hours / 10) | 0),
    digit(hours),
    58,
    digit((minutes / 10) | 0),
    digit(minutes),
    58,
    digit((seconds / 10) | 0),
    digit(seconds),
    46,
    digit((millis / 100) | 0),
    digit((millis / 10) | 0),
    digit(millis),
    90
  )
}

/** `new Date(ms).toISOString()`, memoized in a direct-mapped table (a time is shown on every step of its Job). */
export const iso = (ms: number): string => {
  const slot = ms & (isoSlots - 1)
  if (isoTimes[slot] === ms) return isoTexts[slot]!
  const text = formatIso(ms)
  isoTimes[slot] = ms
  isoTexts[slot] = text
  return text
}

/** `Date.parse(text)`, memoized. */
export const parseTimeOf = (text: string): number => {
  let ms = parsedTimes.get(text)
  if (ms === undefined) {
    ms = Date.parse(text)
    if (parsedTimes.size >= 65536) parsedTimes.clear()
    parsedTimes.set(text, ms)
  }
  return ms
}

/** `Date.parse(text)` of an optional text. */
export const parseTime = (text: string | undefined) => (text === undefined ? undefined : parseTimeOf(text))
