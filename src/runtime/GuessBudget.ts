/**
 * A bound on how many guesses of secret values a caller may have checked (docs/secrets.md, "SecretValueInEnv is not
 * an oracle"). SecretValueInEnv compares every literal env value of a write with the project's secret values, so its
 * answer tells the writer whether a string it chose is a secret value — values nobody may read through the API. A
 * write may carry thousands of literal values, and a dry run stores nothing, so without a bound a caller tests
 * thousands of guesses a second.
 *
 * So each principal may have at most `perWindow` distinct literal values compared per window. Values it sent before in
 * the window are free (a pipeline that resends LOG_LEVEL=debug costs nothing); a guess costs one. What is remembered is
 * a keyed digest of each value, under a key of this process, never the value. The bound is per server process.
 */
import { createHmac, randomBytes } from "node:crypto"

/** Distinct literal values a principal may have compared per window. */
export const guessesPerWindow = 1_000

/** The window: an hour from the principal's first charged value. */
export const guessWindowMs = 60 * 60 * 1_000

/** Principals remembered at once; past it, finished windows go first, then every window restarts. */
const principalsMax = 1_000

interface Window {
  readonly start: number
  readonly seen: Set<number>
}

export interface GuessBudget {
  /**
   * Charges the distinct `values` not seen yet in `principal`'s window, all or none: undefined when they fit, else
   * the seconds until the window ends (nothing is charged then).
   */
  readonly charge: (principal: string, values: ReadonlyArray<string>, now: number) => number | undefined
}

export const makeGuessBudget = (
  perWindow: number = guessesPerWindow,
  windowMs: number = guessWindowMs
): GuessBudget => {
  const key = randomBytes(32)
  const windows = new Map<string, Window>()
  // 48 bits of an HMAC: a collision (a guess counted as seen) is about one in 10^11 per pair.
  const digest = (value: string): number => createHmac("sha256", key).update(value).digest().readUIntBE(0, 6)

  const windowOf = (principal: string, now: number): Window => {
    const current = windows.get(principal)
    if (current !== undefined && now - current.start < windowMs) return current
    if (windows.size >= principalsMax) forgetFinished(now)
    const fresh = { start: now, seen: new Set<number>() }
    windows.set(principal, fresh)
    return fresh
  }

  const forgetFinished = (now: number): void => {
    for (const [principal, window] of windows) if (now - window.start >= windowMs) windows.delete(principal)
    if (windows.size >= principalsMax) windows.clear()
  }

  const charge = (principal: string, values: ReadonlyArray<string>, now: number): number | undefined => {
    const window = windowOf(principal, now)
    const fresh = new Set(values.map(digest).filter((value) => !window.seen.has(value)))
    if (window.seen.size + fresh.size > perWindow) {
      return Math.max(1, Math.ceil((window.start + windowMs - now) / 1_000))
    }
    for (const value of fresh) window.seen.add(value)
    return undefined
  }

  return { charge }
}
