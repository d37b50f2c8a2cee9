/**
 * The discrete-event engine: a priority queue of callbacks ordered by (time, sequence) over virtual milliseconds.
 * Two events at the same instant run in the order they were scheduled, so a run is a pure function of the scenario
 * and the seed (issue: "the same scenario + seed gives a byte-identical event trace").
 *
 * The queue is a binary heap over parallel arrays; the engine is the simulator's hot loop (10^7 events per benchmark
 * run), so it allocates nothing per event beyond the caller's closure — and a caller that schedules one function for
 * many subjects passes the subject as the event's argument instead of making a closure per event. Events are never removed: a
 * callback whose subject has moved on checks that itself (an epoch or state guard), which is cheaper than a
 * cancellation set and keeps the order of the remaining events untouched.
 */
export type Callback = () => void

/** A callback scheduled with its argument (`at(time, callback, arg)`). */
type Scheduled = (arg: never) => void

export class Engine {
  /** Virtual time in milliseconds since the scenario's epoch. */
  now = 0
  /** Events run so far. */
  processed = 0
  private times: Array<number> = []
  private seqs: Array<number> = []
  private callbacks: Array<Scheduled> = []
  private args: Array<unknown> = []
  private nextSeq = 0

  /** The virtual time the engine started at. */
  readonly epochMs: number

  constructor(epochMs = 0) {
    this.epochMs = epochMs
    this.now = epochMs
  }

  get pending(): number {
    return this.times.length
  }

  /** Runs `callback` at absolute time `at` (never before now), with `arg` when given. */
  at(at: number, callback: Callback): void
  at<A>(at: number, callback: (arg: A) => void, arg: A): void
  at(at: number, callback: Scheduled, arg?: unknown): void {
    this.push(at < this.now ? this.now : at, callback, arg)
  }

  /** Runs `callback` after `delayMs` of virtual time, with `arg` when given. */
  after(delayMs: number, callback: Callback): void
  after<A>(delayMs: number, callback: (arg: A) => void, arg: A): void
  after(delayMs: number, callback: Scheduled, arg?: unknown): void {
    this.push(this.now + (delayMs > 0 ? delayMs : 0), callback, arg)
  }

  /** Time of the next event, or undefined when the queue is empty. */
  peekTime(): number | undefined {
    return this.times.length === 0 ? undefined : this.times[0]
  }

  /** Runs one event; false when there was none. */
  step(): boolean {
    if (this.times.length === 0) return false
    const time = this.times[0]!
    const callback = this.callbacks[0]! as (arg: unknown) => void
    const arg = this.args[0]
    this.pop()
    this.now = time
    this.processed++
    callback(arg)
    return true
  }

  /** Runs every event due at or before `until` (all of them when omitted), then sets the clock to `until`. */
  run(until = Number.POSITIVE_INFINITY): void {
    while (this.times.length > 0 && this.times[0]! <= until) this.step()
    if (until !== Number.POSITIVE_INFINITY && until > this.now) this.now = until
  }

  private push(time: number, callback: Scheduled, arg: unknown): void {
    const times = this.times
    const seqs = this.seqs
    const callbacks = this.callbacks
    const args = this.args
    const seq = this.nextSeq++
    let index = times.length
    times.push(time)
    seqs.push(seq)
    callbacks.push(callback)
    args.push(arg)
    while (index > 0) {
      const parent = (index - 1) >> 1
      const parentTime = times[parent]!
      if (parentTime < time || (parentTime === time && seqs[parent]! < seq)) break
      times[index] = parentTime
      seqs[index] = seqs[parent]!
      callbacks[index] = callbacks[parent]!
      args[index] = args[parent]
      index = parent
    }
    times[index] = time
    seqs[index] = seq
    callbacks[index] = callback
    args[index] = arg
  }

  private pop(): void {
    const times = this.times
    const seqs = this.seqs
    const callbacks = this.callbacks
    const args = this.args
    const lastTime = times.pop()!
    const lastSeq = seqs.pop()!
    const lastCallback = callbacks.pop()!
    const lastArg = args.pop()
    const size = times.length
    if (size === 0) return
    let index = 0
    for (;;) {
      const left = 2 * index + 1
      if (left >= size) break
      const right = left + 1
      let child = left
      if (right < size && (times[right]! < times[left]! || (times[right] === times[left] && seqs[right]! < seqs[left]!))) child = right
      const childTime = times[child]!
      if (lastTime < childTime || (lastTime === childTime && lastSeq < seqs[child]!)) break
      times[index] = childTime
      seqs[index] = seqs[child]!
      callbacks[index] = callbacks[child]!
      args[index] = args[child]
      index = child
    }
    times[index] = lastTime
    seqs[index] = lastSeq
    callbacks[index] = lastCallback
    args[index] = lastArg
  }
}
