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
const twoDigits = Array.from({ length: 100 }, (_, value) => String(value).padStart(2, "0"))
const threeDigits = Array.from({ length: 1000 }, (_, value) => String(value).padStart(3, "0"))
const dayPrefixes = new Map<number, string>()

/**
 * `new Date(ms).toISOString()` for a whole millisecond from 1970 to 9999 (a simulation's times): the date part per day
 * from `toISOString` itself, the time of day from arithmetic. Anything else goes to `toISOString`.
 */
const formatIso = (ms: number): string => {
  if (!(Number.isInteger(ms) && ms >= 0 && ms < 253_402_300_800_000)) return new Date(ms).toISOString()
  const day = Math.floor(ms / dayMs)
  let prefix = dayPrefixes.get(day)
  if (prefix === undefined) {
    prefix = new Date(day * dayMs).toISOString().slice(0, 11)
    if (dayPrefixes.size >= 4096) dayPrefixes.clear()
    dayPrefixes.set(day, prefix)
  }
  let rest = ms - day * dayMs
  const millis = rest % 1000
  rest = (rest - millis) / 1000
  const seconds = rest % 60
  rest = (rest - seconds) / 60
  const minutes = rest % 60
  // join makes one flat string (49 bytes); a template would keep a rope of its pieces (about 260 bytes) in the status.
  return [prefix, twoDigits[(rest - minutes) / 60], ":", twoDigits[minutes], ":", twoDigits[seconds], ".", threeDigits[millis], "Z"].join("")
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
