/**
 * The one way tests wait for something that happens by itself (a controller's write, a delivery, a server's start):
 * look again and again until it has happened, or fail after a while, naming what did not happen and what was last
 * seen. Every wait names its bound where it needs another than the default.
 */

/** How long `eventually` waits by default, and how often it looks. */
export const eventuallyDefaults = { timeoutMs: 10_000, intervalMs: 50 } as const

export interface EventuallyOptions {
  /** How long to wait before failing; `eventuallyDefaults.timeoutMs` when absent. */
  readonly timeoutMs?: number
  /** How long to wait between looks; `eventuallyDefaults.intervalMs` when absent. */
  readonly intervalMs?: number
}

/**
 * Calls `check` until what it answers is done — by `until` when given, else any answer but undefined and false — and
 * returns that answer; past `timeoutMs`, fails with `what` and the last answer.
 */
export function eventually<A>(
  what: string,
  check: () => Promise<A> | A,
  options: EventuallyOptions & { readonly until: (value: A) => boolean }
): Promise<A>
export function eventually<A>(
  what: string,
  check: () => Promise<A | undefined | false> | A | undefined | false,
  options?: EventuallyOptions
): Promise<A>
export async function eventually<A>(
  what: string,
  check: () => Promise<A | undefined | false> | A | undefined | false,
  options: EventuallyOptions & { readonly until?: (value: A) => boolean } = {}
): Promise<A> {
  const timeoutMs = options.timeoutMs ?? eventuallyDefaults.timeoutMs
  const intervalMs = options.intervalMs ?? eventuallyDefaults.intervalMs
  const done = options.until ?? ((value: A | undefined | false) => value !== undefined && value !== false)
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (done(value as A)) return value as A
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what} (${timeoutMs} ms); last seen: ${shown(value)}`)
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}

const shown = (value: unknown): string => {
  try {
    return JSON.stringify(value)?.slice(0, 500) ?? String(value)
  } catch {
    return String(value)
  }
}
