/**
 * The estimate sampler on a worker thread (docs/billing.md, "Estimates"): the sampled part of an estimate costs
 * milliseconds of CPU, which on the event loop would hold every other request (issue: one long Job's dry run held
 * `/version` for 13 s). This layer runs the sampler in a `node:worker_threads` worker whose entry module the
 * composition root names (the simulator's: src/backends/sim/EstimateWorker.ts), so the runtime imports no backend.
 *
 * - One worker, started by the first request: on this two-core machine the event loop keeps the other core.
 * - At most `sampleQueueMax` requests wait for it or run on it; one more fails at once, and its estimate is left out
 *   (as when an estimate fails) instead of the queue growing without bound.
 * - A crash (the worker throws outside a request, or exits) fails every request it held, with the reason; the next
 *   request starts a new worker.
 * - The worker is terminated when the layer's scope closes, and it never keeps the process alive while idle.
 *
 * The messages are plain data (structured clone carries the bigints): `{ id, request }` in, `{ id, part }` or
 * `{ id, error }` back (`SampleMessage`, `SampleReply` in kinds/job/JobSampling.ts).
 */
import { Effect, Layer } from "effect"
import { Worker } from "node:worker_threads"
import type { SampledPart, SampleMessage, SampleReply, SampleRequest } from "../kinds/job/JobSampling.ts"
import { EstimateSampler, EstimateSamplerError } from "./EstimateSampler.ts"

/**
 * Requests that may wait for or run on the worker at once. A sampled part costs about 10 ms at most (bench:estimate),
 * so a full queue is under a second of work: past it the server is overloaded, and waiting longer helps no one.
 */
export const sampleQueueMax = 64

type Resume = (effect: Effect.Effect<SampledPart, EstimateSamplerError>) => void

/** One worker, started on demand, and the requests it holds. */
class SamplerThread {
  private worker: Worker | undefined
  private readonly pending = new Map<number, Resume>()
  private nextId = 0
  private stopped = false
  private readonly entry: URL
  private readonly queueMax: number

  constructor(entry: URL, queueMax: number) {
    this.entry = entry
    this.queueMax = queueMax
  }

  sample(request: SampleRequest): Effect.Effect<SampledPart, EstimateSamplerError> {
    return Effect.callback<SampledPart, EstimateSamplerError>((resume) => {
      if (this.stopped) {
        return resume(Effect.fail(new EstimateSamplerError({ message: "the estimate worker is stopped" })))
      }
      if (this.pending.size >= this.queueMax) {
        return resume(
          Effect.fail(
            new EstimateSamplerError({ message: `${this.queueMax} estimates are already waiting for the worker` })
          )
        )
      }
      const id = this.nextId++
      const worker = this.running()
      this.pending.set(id, resume)
      worker.ref()
      try {
        worker.postMessage({ id, request } satisfies SampleMessage)
      } catch (error) {
        this.settle(id)
        return resume(
          Effect.fail(
            new EstimateSamplerError({
              message: `the request could not be sent to the estimate worker: ${String(error)}`,
              cause: error
            })
          )
        )
      }
      // An interrupted request (its client went away) stops waiting; the worker's answer is then dropped.
      return Effect.sync(() => this.settle(id))
    })
  }

  /** Stops the worker for good and fails what it held. */
  stop(): Promise<unknown> {
    this.stopped = true
    const worker = this.worker
    this.worker = undefined
    this.failAll("the estimate worker stopped")
    return worker === undefined ? Promise.resolve() : worker.terminate()
  }

  private running(): Worker {
    if (this.worker !== undefined) return this.worker
    const worker = new Worker(this.entry)
    worker.on("message", (reply: SampleReply) => {
      const resume = this.settle(reply.id)
      if (resume === undefined) return
      resume(
        "part" in reply ? Effect.succeed(reply.part) : Effect.fail(new EstimateSamplerError({ message: reply.error }))
      )
    })
    worker.on("error", (error) => this.crashed(worker, `the estimate worker crashed: ${error.message}`))
    worker.on("exit", (code) => this.crashed(worker, `the estimate worker exited with code ${code}`))
    this.worker = worker
    return worker
  }

  /** Forgets request `id`, lets an idle worker leave the process free to exit, and answers who waited for it. */
  private settle(id: number): Resume | undefined {
    const resume = this.pending.get(id)
    this.pending.delete(id)
    if (this.pending.size === 0) this.worker?.unref()
    return resume
  }

  private crashed(worker: Worker, message: string): void {
    if (this.worker !== worker) return
    this.worker = undefined
    this.failAll(message)
  }

  private failAll(message: string): void {
    const waiting = [...this.pending.values()]
    this.pending.clear()
    for (const resume of waiting) resume(Effect.fail(new EstimateSamplerError({ message })))
  }
}

/** The EstimateSampler on one worker thread running `entry` (a module that answers SampleMessages). */
export const layer = (entry: URL, options: { readonly queueMax?: number } = {}) =>
  Layer.effect(
    EstimateSampler,
    Effect.map(
      Effect.acquireRelease(
        Effect.sync(() => new SamplerThread(entry, options.queueMax ?? sampleQueueMax)),
        (thread) => Effect.promise(() => thread.stop())
      ),
      (thread) => EstimateSampler.of({ sample: (request) => thread.sample(request) })
    )
  )
