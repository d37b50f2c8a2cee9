/**
 * The discrete-event engine: a priority queue of callbacks ordered by (time, sequence) over virtual milliseconds.
 * Two events at the same instant run in the order they were scheduled, so a run is a pure function of the scenario
 * and the seed (issue: "the same scenario + seed gives a byte-identical event trace").
 *
 * The queue is a binary heap over parallel arrays; the engine is the simulator's hot loop (10^7 events per benchmark
 * run), so it allocates nothing per event beyond the caller's closure — and a caller that schedules one function for
 * many subjects passes the subject as the event's argument instead of making a closure per event. Events scheduled
 * for the current instant (`after(0)`, half of the platform benchmark's) skip the heap: they wait in a first-in
 * first-out list, which is their order, since each comes after everything scheduled before it — and the heap's events
 * at this instant were all scheduled before the clock reached it, so they run first. Events are never removed: a
 * callback whose subject has moved on checks that itself (an epoch or state guard), which is cheaper than a
 * cancellation set and keeps the order of the remaining events untouched.
 */
export type Callback = () => void

/**
 * A callback scheduled with its argument (`at(time, callback, arg)`); it is given the event's ticket too, the number
 * `at` answered when it was scheduled (a subject that keeps the ticket of its one pending event knows it from a stale
 * one).
 */
type Scheduled = (arg: never, ticket: number) => void

/** What a run event's place in the list holds until the list starts over (so it keeps nothing alive). */
const noCallback: Scheduled = () => {}

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
  /**
   * The events scheduled at the current instant while it is current, in their order, from `nowHead` to `nowTail`. The
   * arrays keep their length when the list empties (truncating them would make them again at every instant).
   */
  private nowCallbacks: Array<Scheduled> = []
  private nowArgs: Array<unknown> = []
  private nowSeqs: Array<number> = []
  private nowHead = 0
  private nowTail = 0

  /** The virtual time the engine started at. */
  readonly epochMs: number

  constructor(epochMs = 0) {
    this.epochMs = epochMs
    this.now = epochMs
  }

  get pending(): number {
    return this.times.length + this.nowTail - this.nowHead
  }

  /** Runs `callback` at absolute time `at` (never before now), with `arg` when given; answers the event's ticket. */
  at(at: number, callback: Callback): number
  at<A>(at: number, callback: (arg: A, ticket: number) => void, arg: A): number
  at(at: number, callback: Scheduled, arg?: unknown): number {
    return this.push(at < this.now ? this.now : at, callback, arg)
  }

  /** Runs `callback` after `delayMs` of virtual time, with `arg` when given; answers the event's ticket. */
  after(delayMs: number, callback: Callback): number
  after<A>(delayMs: number, callback: (arg: A, ticket: number) => void, arg: A): number
  after(delayMs: number, callback: Scheduled, arg?: unknown): number {
    return this.push(this.now + (delayMs > 0 ? delayMs : 0), callback, arg)
  }

  /** Time of the next event, or undefined when the queue is empty. */
  peekTime(): number | undefined {
    if (this.nowHead < this.nowTail) return this.now
    return this.times.length === 0 ? undefined : this.times[0]
  }

  /** Runs one event; false when there was none. */
  step(): boolean {
    const times = this.times
    // The heap's events at this instant come before the list's (the heap never holds one before now).
    if (times.length > 0 && (times[0] === this.now || this.nowHead === this.nowTail)) {
      const time = times[0]!
      const callback = this.callbacks[0]! as (arg: unknown, ticket: number) => void
      const arg = this.args[0]
      const seq = this.seqs[0]!
      this.pop()
      this.now = time
      this.processed++
      callback(arg, seq)
      return true
    }
    const head = this.nowHead
    if (head === this.nowTail) return false
    const callback = this.nowCallbacks[head]! as (arg: unknown, ticket: number) => void
    const arg = this.nowArgs[head]
    const seq = this.nowSeqs[head]!
    // The place keeps nothing alive; a drained list starts over at its beginning.
    this.nowCallbacks[head] = noCallback
    this.nowArgs[head] = undefined
    if (head + 1 === this.nowTail) this.nowHead = this.nowTail = 0
    else this.nowHead = head + 1
    this.processed++
    callback(arg, seq)
    return true
  }

  /** Runs every event due at or before `until` (all of them when omitted), then sets the clock to `until`. */
  run(until = Number.POSITIVE_INFINITY): void {
    for (;;) {
      const next = this.nowHead < this.nowTail ? this.now : this.times.length > 0 ? this.times[0]! : undefined
      if (next === undefined || next > until) break
      this.step()
    }
    if (until !== Number.POSITIVE_INFINITY && until > this.now) this.now = until
  }

  private push(time: number, callback: Scheduled, arg: unknown): number {
    const seq = this.nextSeq++
    if (time === this.now) {
      const tail = this.nowTail++
      if (tail < this.nowCallbacks.length) {
        this.nowCallbacks[tail] = callback
        this.nowArgs[tail] = arg
        this.nowSeqs[tail] = seq
      } else {
        this.nowCallbacks.push(callback)
        this.nowArgs.push(arg)
        this.nowSeqs.push(seq)
      }
      return seq
    }
    const times = this.times
    const seqs = this.seqs
    const callbacks = this.callbacks
    const args = this.args
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
    return seq
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
      if (
        right < size && (times[right]! < times[left]! || (times[right] === times[left] && seqs[right]! < seqs[left]!))
      ) child = right
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
