/**
 * The reconciler's keyed work queue (style.md §3, after Kubernetes' workqueue): a key is due now (`add`) or at a time
 * (`at`, the earliest wins), appears once however often it is added, and comes out in the order it became due. A key
 * whose reconcile failed comes back after a backoff that doubles from `backoffMsMin` to `backoffMsMax`, and starts
 * over once it succeeds. Time is whatever the caller passes (virtual under the simulator, the wall clock live).
 */

/** A failed reconcile is tried again after this, doubling on each further failure. */
export const backoffMsMin = 1_000

/** The longest wait before a failing key is tried again (a store outage, say). */
export const backoffMsMax = 5 * 60_000

interface Timer {
  readonly at: number
  readonly seq: number
  readonly key: string
}

const before = (a: Timer, b: Timer): boolean => a.at < b.at || (a.at === b.at && a.seq < b.seq)

export class WorkQueue {
  private readonly ready = new Set<string>()
  private readonly heap: Array<Timer> = []
  /** The time each key is due at (its earliest timer); a timer that does not match is stale. */
  private readonly due = new Map<string, number>()
  private readonly failures = new Map<string, number>()
  private sequence = 0
  /** Called when a key becomes due now or a timer is set (a backend on the wall clock waits for it). */
  onWork: (() => void) | undefined

  /** The key is due now. */
  add(key: string): void {
    this.ready.add(key)
    this.onWork?.()
  }

  /** The key is due at `time`, unless it is due earlier already. */
  at(key: string, time: number): void {
    const current = this.due.get(key)
    if (current !== undefined && current <= time) return
    this.due.set(key, time)
    this.push({ at: time, seq: this.sequence++, key })
    this.onWork?.()
  }

  /** The next key due by `now`, in the order keys became due; undefined when none is. */
  next(now: number): string | undefined {
    this.release(now)
    for (const key of this.ready) {
      this.ready.delete(key)
      return key
    }
    return undefined
  }

  /** When the next timer is due, if any. */
  nextAt(): number | undefined {
    this.dropStale()
    return this.heap[0]?.at
  }

  /** Whether a key is due now. */
  get hasReady(): boolean {
    return this.ready.size > 0
  }

  /** The key's reconcile failed at `now`: it comes back after its backoff. Answers when. */
  failed(key: string, now: number): number {
    const failures = (this.failures.get(key) ?? 0) + 1
    this.failures.set(key, failures)
    const delay = Math.min(backoffMsMax, backoffMsMin * 2 ** Math.min(failures - 1, 30))
    this.at(key, now + delay)
    return now + delay
  }

  succeeded(key: string): void {
    this.failures.delete(key)
  }

  /** Every key due now or by a timer. */
  keys(): Array<string> {
    return [...new Set([...this.ready, ...this.due.keys()])]
  }

  /** The key is gone: nothing of it stays queued. */
  forget(key: string): void {
    this.ready.delete(key)
    this.due.delete(key)
    this.failures.delete(key)
  }

  /** Timers due by `now` become ready, in time order. */
  private release(now: number): void {
    for (;;) {
      const top = this.heap[0]
      if (top === undefined || top.at > now) return
      this.pop()
      if (this.due.get(top.key) !== top.at) continue
      this.due.delete(top.key)
      this.ready.add(top.key)
    }
  }

  private dropStale(): void {
    for (;;) {
      const top = this.heap[0]
      if (top === undefined || this.due.get(top.key) === top.at) return
      this.pop()
    }
  }

  private push(timer: Timer): void {
    const heap = this.heap
    heap.push(timer)
    let index = heap.length - 1
    while (index > 0) {
      const parent = (index - 1) >> 1
      if (!before(heap[index]!, heap[parent]!)) break
      ;[heap[index], heap[parent]] = [heap[parent]!, heap[index]!]
      index = parent
    }
  }

  private pop(): void {
    const heap = this.heap
    const last = heap.pop()!
    if (heap.length === 0) return
    heap[0] = last
    let index = 0
    for (;;) {
      const left = index * 2 + 1
      const right = left + 1
      let smallest = index
      if (left < heap.length && before(heap[left]!, heap[smallest]!)) smallest = left
      if (right < heap.length && before(heap[right]!, heap[smallest]!)) smallest = right
      if (smallest === index) return
      ;[heap[index], heap[smallest]] = [heap[smallest]!, heap[index]!]
      index = smallest
    }
  }
}
