/**
 * The M/M/1 model of bench/sim/mm1.ts in simjs 2.0.3 (npm `simjs`, SIM.JS rewritten with ES2015 classes), written
 * the way its documentation writes one: an Entity whose `start` issues a customer and re-arms itself with
 * `setTimer(…).done(this.start)`, each customer `useFacility(server, serviceTime)` on a FCFS Facility, and the mean
 * wait read from the facility's queue statistics (time from joining the FIFO to being taken by the server).
 * Random variates come from simjs's own seeded Mersenne Twister.
 *
 *   node bench/sim/mm1_simjs.ts [--customers 1000000] [--seed 1]   prints {"customers", "meanWait", "wallMs"}
 *
 * simjs ships a browserify bundle without a CommonJS export: it hands its classes over only through `window.Sim`,
 * so `load` gives it a stand-in `window` for the duration of the require.
 */
import { createRequire } from "node:module"
import { argument } from "../Arguments.ts"

interface Request {
  done(callback: (this: never) => void, context?: object): Request
}
interface Entity {
  setTimer(duration: number): Request
  useFacility(facility: Facility, duration: number): Request
  time(): number
}
interface Facility {
  queueStats(): { readonly durationSeries: { average(): number; count(): number } }
}
interface Simulation {
  addEntity(klass: EntityClass, name?: string): Entity
  simulate(endTime: number): boolean
}
type EntityClass = new(sim: Simulation, name?: string) => Entity
interface Simjs {
  readonly Sim: new() => Simulation
  readonly Entity: EntityClass
  readonly Facility: (new(name: string, discipline?: number, servers?: number) => Facility) & { readonly FCFS: number }
  readonly Random: new(seed: number) => { exponential(lambda: number): number }
}

/** simjs's classes, or why they could not be loaded. */
export const load = (): Simjs | string => {
  const global = globalThis as { window?: { Sim?: Simjs } | undefined }
  const hadWindow = "window" in global
  const saved = global.window
  global.window = {}
  try {
    createRequire(import.meta.url)("simjs")
    return global.window.Sim ?? "the simjs bundle did not set window.Sim"
  } catch (error) {
    return `cannot load simjs: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`
  } finally {
    if (hadWindow) global.window = saved
    else delete global.window
  }
}

export const runMm1Simjs = (Simjs: Simjs, options: { readonly customers: number; readonly seed: number }) => {
  const started = performance.now()
  const sim = new Simjs.Sim()
  const server = new Simjs.Facility("server", Simjs.Facility.FCFS, 1)
  const random = new Simjs.Random(options.seed)
  let arrived = 0
  let served = 0

  class Source extends Simjs.Entity {
    start(): void {
      this.setTimer(random.exponential(1.0)).done(this.arrive)
    }

    arrive(): void {
      arrived++
      this.useFacility(server, random.exponential(1.1)).done(() => {
        served++
      })
      if (arrived < options.customers) this.setTimer(random.exponential(1.0)).done(this.arrive)
    }
  }

  if (options.customers > 0) sim.addEntity(Source)
  sim.simulate(Number.POSITIVE_INFINITY)
  return {
    customers: served,
    meanWait: server.queueStats().durationSeries.average(),
    wallMs: performance.now() - started
  }
}

if (import.meta.main) {
  const Simjs = load()
  if (typeof Simjs === "string") {
    process.stderr.write(`${Simjs}\n`)
    process.exit(2)
  }
  const result = runMm1Simjs(Simjs, {
    customers: Number(argument("customers", "1000000")),
    seed: Number(argument("seed", "1"))
  })
  process.stdout.write(`${JSON.stringify(result)}\n`)
}
