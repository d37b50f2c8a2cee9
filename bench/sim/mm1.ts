/**
 * The classic M/M/1 queue on our discrete-event engine: Poisson arrivals at rate 1, one FIFO server with exponential
 * service at rate 1.1 (utilisation ρ = 0.909), so the mean wait in the queue is ρ / (μ − λ) = 9.09. Written the way a
 * user of the engine writes a model: each customer is a closure that arrives, asks a FIFO server for service, records
 * its wait when the server takes it and schedules its departure with `engine.after`. The same model runs in SimPy 3
 * (mm1_simpy.py) and simjs (mm1_simjs.ts); `npm run bench:sim` runs the three side by side.
 *
 *   node bench/sim/mm1.ts [--customers 1000000] [--seed 1]   prints {"customers", "meanWait", "wallMs"}
 */
import { Engine } from "../../src/backends/sim/Engine.ts"
import { Prng } from "../../src/backends/sim/Prng.ts"
import { argument } from "../Arguments.ts"

export const arrivalRate = 1.0
export const serviceRate = 1.1
/** Mean wait in the queue (not counting service): ρ / (μ − λ). */
export const theoreticalMeanWait = arrivalRate / serviceRate / (serviceRate - arrivalRate)

export interface Mm1Result {
  readonly customers: number
  readonly meanWait: number
  readonly wallMs: number
}

/** A single FIFO server: `acquire` runs the callback once the server is free for it, `release` hands it on. */
class FifoServer {
  private busy = false
  private readonly waiting: Array<() => void> = []

  acquire(callback: () => void): void {
    if (this.busy) {
      this.waiting.push(callback)
    } else {
      this.busy = true
      callback()
    }
  }

  release(): void {
    const next = this.waiting.shift()
    if (next === undefined) this.busy = false
    else next()
  }
}

export const runMm1 = (options: { readonly customers: number; readonly seed: string }): Mm1Result => {
  const started = performance.now()
  const engine = new Engine()
  const prng = new Prng(options.seed)
  const arrivals = prng.derive("arrivals")
  const services = prng.derive("service")
  const server = new FifoServer()
  let arrived = 0
  let served = 0
  let totalWait = 0

  const customer = (): void => {
    const arrivedAt = engine.now
    server.acquire(() => {
      totalWait += engine.now - arrivedAt
      served++
      engine.after(services.exponential(1 / serviceRate), () => server.release())
    })
  }

  const arrive = (): void => {
    arrived++
    if (arrived < options.customers) engine.after(arrivals.exponential(1 / arrivalRate), arrive)
    customer()
  }

  if (options.customers > 0) engine.after(arrivals.exponential(1 / arrivalRate), arrive)
  engine.run()
  return { customers: served, meanWait: served === 0 ? 0 : totalWait / served, wallMs: performance.now() - started }
}

if (import.meta.main) {
  const result = runMm1({ customers: Number(argument("customers", "1000000")), seed: argument("seed", "1") })
  process.stdout.write(`${JSON.stringify(result)}\n`)
}
