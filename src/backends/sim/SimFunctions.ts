/**
 * Functions and their FunctionCalls in a headless scenario (docs/simulator.md, "Function scenarios"): each Function of
 * the scenario is one more kind of the simulator's list (`kind`, a SimObject.ts `SimKind`), stepped by the one
 * reconcile loop (Simulation.ts) through the reconcile core with the core's Function machine
 * (kinds/function/FunctionMachine.ts), over the same engine, capacity and ledger as the scenario's Jobs and
 * Sandboxes. It gets a Poisson process of calls, queued on its warm workers by the same pure model as the runtime's
 * dispatcher (kinds/function/FunctionQueue.ts), each call moved by the FunctionCall machine. The workers answer calls
 * as the sim backend's do (SimWorkers.ts: a call runs its service time, raises its first N tries); a call's service
 * time is drawn from the scenario's seed, log-normally or from token counts (src/data/LlmTrace.ts's service-time
 * model).
 *
 * Every move happens inside the Function's reconcile, as in the runtime (runtime/Serving.ts): before the step the
 * answers heard since, the losses, deadlines and backoffs (FunctionQueue.advance) and the load the step sizes the
 * workers to (`SimKind.observe`); after its launches and stops the dispatch of the waiting calls to the workers' free
 * slots (`SimKind.served`). The summary gives each Function's calls by phase, their queue wait and end-to-end latency
 * (p50/p95/p99), what the calls' tries cost at the per-call rate, and what the ledger charged the Function's workers.
 */
import { Schema } from "effect"
import { chargedAccount, type Ledger } from "../../core/billing/Ledger.ts"
import type { AttemptFacts } from "../../core/capacity/Capacity.ts"
import type { ReconcileKind } from "../../core/controller/Reconcile.ts"
import type { JsonObject } from "../../core/Json.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import { durationMs } from "../../core/StatusText.ts"
import { defaultServiceModel, serviceTimeMs } from "../../data/LlmTrace.ts"
import * as Call from "../../kinds/function/FunctionCallMachine.ts"
import type { FunctionCallSpecType } from "../../kinds/function/FunctionCallSchema.ts"
import { functionMachine } from "../../kinds/function/FunctionMachine.ts"
import * as Queue from "../../kinds/function/FunctionQueue.ts"
import {
  functionKind,
  FunctionSpec,
  type FunctionSpecType,
  type FunctionStatusType
} from "../../kinds/function/FunctionSchema.ts"
import type { Engine } from "./Engine.ts"
import type { Prng } from "./Prng.ts"
import type { FunctionSettings } from "./Scenario.ts"
import type { SimCapacity } from "./SimCapacity.ts"
import type { SimKind, SimObject } from "./SimObject.ts"
import type { Simulation, TraceSink } from "./Simulation.ts"
import { type CallRequest, SimWorkers, workerHostOf } from "./SimWorkers.ts"
import { serviceWorkload, simAnnotationPrefix } from "./Workloads.ts"

const decodeSpec = Schema.decodeUnknownSync(FunctionSpec)

/** A Function spec of a scenario as the machine reads it: the kind's normalization and schema, with defaults. */
export const admitFunctionSpec = (spec: JsonObject): FunctionSpecType => decodeSpec(functionKind.normalize!(spec))

/** One call of a headless run: the queue's, with when it came and first ran. */
interface SimCall extends Queue.QueuedCall {
  readonly name: string
  readonly createdAt: number
  /** The `Call` its worker is sent: its service time and the tries that raise (SimWorkers' annotations). */
  readonly annotations: Readonly<Record<string, string>>
  firstStartAt: number | undefined
  /** The phase the trace shows last. */
  shown: string
}

/** A Function as the simulator holds it. */
type SimFunction = SimObject<FunctionSpecType, FunctionStatusType>

/** What the driver keeps of a Function beside the simulator's object: its calls' queue and what became of them. */
interface Served {
  readonly fn: SimFunction
  readonly group: Queue.WorkerGroup<SimCall>
  /** A worker's own start once its host is up (importing its code; SimProgram.startMs). */
  readonly workerStartMs: number
  calls: number
  /** Calls that ended: their phase, queue wait, end-to-end time, tries and cost. */
  readonly ended: Array<EndedCall>
}

/** The Function's registration with the reconcile core. */
export const functionReconcileKind: ReconcileKind<FunctionSpecType, FunctionStatusType> = {
  kind: "Function",
  machine: functionMachine
}

interface EndedCall {
  readonly phase: string
  /** From its creation to its first dispatch (undefined: never dispatched). */
  readonly waitMs: number | undefined
  readonly latencyMs: number
  readonly retries: number
  readonly recoveries: number
  readonly costMicroUsd: bigint
}

/** Nearest-rank percentiles of a run's times (ms; 0 for none). */
export interface Percentiles {
  readonly p50: number
  readonly p95: number
  readonly p99: number
}

/** One Function of a run, as the summary shows it. */
export interface FunctionRow {
  readonly name: string
  readonly phase: string
  /** Workers launched (runs of capacity), and those that came up. */
  readonly workers: number
  readonly workersReady: number
  readonly calls: number
  /** Calls by phase at the end: the ended ones' final phase, the others' phase then. */
  readonly byPhase: Readonly<Record<string, number>>
  readonly retries: number
  readonly recoveries: number
  /** From creation to first dispatch, of the calls dispatched. */
  readonly queueWaitMs: Percentiles
  /** From creation to the end, of the calls that ended. */
  readonly latencyMs: Percentiles
  /** The calls' costUSD summed: their tries' worker time at the per-call rate (docs/functions.md, "Cost"). */
  readonly callsCostUSD: string
  /** What the ledger charged the Function: its workers' runs, warm idle time, boots and teardowns included. */
  readonly costUSD?: string
}

export interface FunctionsSummary {
  readonly totals: {
    readonly functions: number
    readonly calls: number
    readonly byPhase: Readonly<Record<string, number>>
    readonly workers: number
    readonly queueWaitMs: Percentiles
    readonly latencyMs: Percentiles
    readonly callsCostUSD: string
    readonly costUSD?: string
  }
  readonly functions: ReadonlyArray<FunctionRow>
}

export interface SimFunctionsOptions {
  readonly engine: Engine
  /** The capacity the simulation runs on (the workers run their calls on its hosts). */
  readonly capacity: SimCapacity
  readonly trace: TraceSink
  /** What the ledger charged each Function is read from it for the summary (billed scenarios). */
  readonly ledger: Ledger | undefined
  /** Draws the calls' arrivals, service times and raising tries (the scenario's `functions` generator). */
  readonly random: Prng
}

/** Every call's input: `f(None)`, as the model's worker returns its first argument. */
const callInput = Buffer.from(JSON.stringify({ args: [null], kwargs: {} })).toString("base64")

const nearestRank = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted.length === 0 ? 0 : sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!

const percentilesOf = (values: ReadonlyArray<number>): Percentiles => {
  const sorted = [...values].sort((a, b) => a - b)
  return { p50: nearestRank(sorted, 50), p95: nearestRank(sorted, 95), p99: nearestRank(sorted, 99) }
}

export class SimFunctions {
  private readonly options: SimFunctionsOptions
  private readonly workers: SimWorkers
  private readonly served = new Map<SimFunction, Served>()
  private readonly all: Array<Served> = []
  private simulation: Simulation | undefined
  /**
   * The Function's entry in the simulator's list of kinds: before each step the answers heard, losses, deadlines and
   * backoffs of its calls and the load it sizes its workers to (`observe`); a worker opened on a launch; after the
   * step's actions the waiting calls dispatched to the workers' free slots (`served`); every Function looks again when
   * funds change.
   */
  readonly kind: SimKind<FunctionSpecType, FunctionStatusType>

  constructor(options: SimFunctionsOptions) {
    this.options = options
    this.workers = new SimWorkers(workerHostOf(options.capacity))
    this.kind = {
      reconcile: functionReconcileKind,
      keyPrefix: "function:",
      uidPrefix: "sim-function-",
      observe: (fn, now) => {
        fn.serving = this.load(this.served.get(fn)!, now)
      },
      startMs: (fn) => this.served.get(fn)!.workerStartMs,
      launched: (fn, action) => this.workers.open(fn.key, action.attempt, {}, fn.spec.scaling.targetConcurrency),
      served: (fn, now) => this.dispatch(this.served.get(fn)!, now),
      forgotten: (fn) => this.workers.forget(fn.key),
      looksWhenFunded: true
    }
  }

  private get now() {
    return this.options.engine.now
  }

  private record(subject: string, what: string) {
    this.options.trace.record(`${this.now} ${subject} ${what}`)
  }

  /**
   * Creates every Function of the scenario now on `simulation` (its list of kinds holds `kind`), and starts its calls'
   * arrivals.
   */
  arrive(simulation: Simulation, settings: ReadonlyArray<FunctionSettings>) {
    this.simulation = simulation
    const { engine, random } = this.options
    settings.forEach((setting) => {
      const served = this.create(simulation, setting)
      const meanMs = durationMs(setting.calls.meanInterarrival, 60_000)
      const load = setting.calls
      const next = () => {
        if (served.calls >= load.count) return
        this.call(served, setting)
        engine.after(Math.max(1, Math.round(random.exponential(meanMs))), next)
      }
      engine.after(durationMs(load.start, 0) + Math.round(random.exponential(meanMs)), next)
    })
  }

  private create(simulation: Simulation, setting: FunctionSettings): Served {
    const spec = admitFunctionSpec(setting.function as JsonObject)
    const fn = simulation.submit(this.kind, setting.namespace, setting.name, spec, serviceWorkload)
    const group = Queue.makeGroup<SimCall>(setting.namespace, setting.name)
    group.uid = fn.uid
    group.spec = spec
    const served: Served = { fn, group, workerStartMs: durationMs(setting.workerStart, 0), calls: 0, ended: [] }
    this.served.set(fn, served)
    this.all.push(served)
    return served
  }
  /** A service time drawn from the load's model (ms). */
  private serviceMs(setting: FunctionSettings): number {
    const { random } = this.options
    const load = setting.calls
    const drawn = (median: number, sigma: number) =>
      sigma > 0 ? Math.max(0, Math.round(random.logNormal(median, sigma))) : median
    if (load.tokens !== undefined) {
      const { tokens } = load
      return serviceTimeMs({
        offsetMs: 0,
        contextTokens: drawn(tokens.contextMedian, tokens.sigma),
        generatedTokens: drawn(tokens.generatedMedian, tokens.sigma)
      }, {
        prefillTokensPerSecond: tokens.prefillTokensPerSecond || defaultServiceModel.prefillTokensPerSecond,
        decodeTokensPerSecond: tokens.decodeTokensPerSecond || defaultServiceModel.decodeTokensPerSecond
      })
    }
    return drawn(durationMs(load.durationMedian, 1000), load.durationSigma)
  }

  /** A call arrives: Queued on its Function, which is stepped now. */
  private call(served: Served, setting: FunctionSettings) {
    const { random } = this.options
    const fn = served.fn
    const index = served.calls++
    const serviceMs = this.serviceMs(setting)
    let raises = 0
    while (raises < 100 && setting.calls.failureRate > 0 && random.chance(setting.calls.failureRate)) raises++
    const sessions = setting.calls.sessions
    const spec = {
      function: fn.name,
      ...(sessions > 1 ? { session: `session-${index % sessions}` } : {})
    } as FunctionCallSpecType
    const call: SimCall = {
      uid: `${fn.uid}-call-${index + 1}`,
      name: `${fn.name}-${index + 1}`,
      spec,
      state: Call.queued(),
      cancelAsked: false,
      lostBefore: false,
      deleted: false,
      waiting: false,
      createdAt: this.now,
      annotations: {
        [`${simAnnotationPrefix}call-duration`]: `${serviceMs}ms`,
        ...(raises > 0 ? { [`${simAnnotationPrefix}call-raises`]: String(raises) } : {})
      },
      firstStartAt: undefined,
      shown: "-"
    }
    this.record(this.callSubject(fn, call), `Created ${serviceMs}ms${raises > 0 ? ` raises=${raises}` : ""}`)
    Queue.admitCall(served.group, call)
    this.simulation!.touch(fn)
  }

  private callSubject(fn: SimFunction, call: SimCall) {
    return `call:${fn.namespace}/${call.name}`
  }

  /**
   * Before the Function's step: the calls its stopped or lost workers held answer that they were lost, then the
   * answers heard, losses, deadlines and backoffs are taken in; the load its step sizes the workers to.
   */
  private load(served: Served, now: number) {
    this.workers.settle(served.fn.key)
    Queue.advance(served.group, served.fn.attempts, now, "the simulator lost it")
    return Queue.loadOf(served.group, now, Queue.nextAtOf(served.group, 0, undefined))
  }

  /**
   * After the step's actions: the calls a worker stopped now held are lost, the waiting calls go to the free slots of
   * the workers that take calls, and what changed of the calls is recorded. Answers the next time the queue needs a
   * step (a deadline, a backoff's end).
   */
  private dispatch(served: Served, now: number): number | undefined {
    const { fn, group } = served
    // A stop tells no change of its own: the calls the stopped worker held are answered now (as the sim port's
    // release).
    this.workers.settle(fn.key)
    const slots = Queue.slotsOf(group, fn.status, fn.attempts)
    for (let next = Queue.nextDispatch(group, slots, now); next !== undefined;) {
      this.send(served, next.call, next.flight)
      next = Queue.nextDispatch(group, slots, now)
    }
    this.show(served, now)
    return Queue.nextAtOf(group, 0, undefined)
  }

  /** The call to its worker; the answer is taken in at the Function's next step. */
  private send(served: Served, call: SimCall, flight: Queue.InFlight) {
    const fn = served.fn
    call.firstStartAt ??= this.now
    const request: CallRequest = {
      _tag: "Call",
      call: Queue.flightKey(call.uid, flight.epoch),
      encoding: "JSON",
      input: callInput,
      timeoutMs: Queue.policyOf(served.group, call).timeoutMs,
      method: undefined,
      annotations: call.annotations
    }
    this.workers.call(fn.key, flight.worker, request, (reply) => {
      served.group.heard.push({ flight, reply })
      this.simulation!.touch(fn)
    })
  }

  /** What changed of the calls is recorded; the ended ones are let go, their times kept for the summary. */
  private show(served: Served, now: number) {
    const { fn, group } = served
    for (const uid of group.dirty) {
      const call = group.calls.get(uid)
      if (call === undefined) continue
      const state = call.state
      if (state.phase !== call.shown) {
        const worker = state.phase === "Running" ? ` ${state.worker ?? ""}#${state.epoch}` : ""
        this.record(
          this.callSubject(fn, call),
          `Phase ${call.shown}>${state.phase}${worker}${state.reason === undefined ? "" : ` ${state.reason}`}`
        )
        call.shown = state.phase
      }
      if (Call.isUnfinished(state)) continue
      group.calls.delete(uid)
      served.ended.push({
        phase: state.phase,
        waitMs: call.firstStartAt === undefined ? undefined : call.firstStartAt - call.createdAt,
        latencyMs: (state.completionTime ?? now) - call.createdAt,
        retries: state.retries,
        recoveries: state.recoveries,
        costMicroUsd: state.costMicroUsd
      })
    }
    group.dirty.clear()
  }

  /** Every Function of the run: its uid (the ledger's owner) and its runs, for the run's cost (Costs.ts). */
  owners(): ReadonlyArray<{ readonly uid: string; readonly attempts: ReadonlyArray<AttemptFacts> }> {
    return this.all.map((served) => served.fn)
  }

  /** Every Function of the run: its calls, their latency and cost, and what the ledger charged it. */
  summary(): FunctionsSummary {
    const ledger = this.options.ledger
    const totalByPhase: Record<string, number> = {}
    const waits: Array<number> = []
    const latencies: Array<number> = []
    let charged = 0n
    let callsCost = 0n
    const rows = this.all.map((served): FunctionRow => {
      const fn = served.fn
      const byPhase: Record<string, number> = {}
      const count = (phase: string) => {
        byPhase[phase] = (byPhase[phase] ?? 0) + 1
        totalByPhase[phase] = (totalByPhase[phase] ?? 0) + 1
      }
      const ownWaits: Array<number> = []
      const ownLatencies: Array<number> = []
      let cost = 0n
      let retries = 0
      let recoveries = 0
      for (const call of served.ended) {
        count(call.phase)
        if (call.waitMs !== undefined) ownWaits.push(call.waitMs)
        ownLatencies.push(call.latencyMs)
        cost += call.costMicroUsd
        retries += call.retries
        recoveries += call.recoveries
      }
      for (const call of served.group.calls.values()) {
        count(call.state.phase)
        if (call.firstStartAt !== undefined) ownWaits.push(call.firstStartAt - call.createdAt)
        cost += call.state.costMicroUsd
        retries += call.state.retries
        recoveries += call.state.recoveries
      }
      waits.push(...ownWaits)
      latencies.push(...ownLatencies)
      callsCost += cost
      const own = ledger?.balance(chargedAccount(fn.uid))
      if (own !== undefined) charged += own
      return {
        name: `${fn.namespace}/${fn.name}`,
        phase: fn.status.phase ?? "Pending",
        workers: fn.attempts.length,
        workersReady: fn.attempts.filter((attempt) => attempt.bootedAt !== undefined).length,
        calls: served.calls,
        byPhase,
        retries,
        recoveries,
        queueWaitMs: percentilesOf(ownWaits),
        latencyMs: percentilesOf(ownLatencies),
        callsCostUSD: formatMicroUsd(cost),
        ...(own === undefined ? {} : { costUSD: formatMicroUsd(own) })
      }
    })
    return {
      totals: {
        functions: rows.length,
        calls: rows.reduce((sum, row) => sum + row.calls, 0),
        byPhase: totalByPhase,
        workers: rows.reduce((sum, row) => sum + row.workers, 0),
        queueWaitMs: percentilesOf(waits),
        latencyMs: percentilesOf(latencies),
        callsCostUSD: formatMicroUsd(callsCost),
        ...(ledger === undefined ? {} : { costUSD: formatMicroUsd(charged) })
      },
      functions: rows
    }
  }
}
