/**
 * Replaying serving load on a Function under the simulator (docs/functions.md, "Replaying serving load"): a list of
 * FunctionCall arrivals `{at, durationMs}` is played against one Function in virtual time, through the same runtime
 * the sim backend runs (the reconciler, the Function machine, the dispatcher, the ledger, the simulator's capacity and
 * its worker model: docs/simulator.md, "Functions"), in-process and without HTTP, and the run is summarized: the calls'
 * queue waits and latencies, the workers (peak, worker-seconds, cold starts) and what the ledger charged.
 *
 * - The Function is created `leadMs` before the first arrival (its `minWorkers` warm when load begins; that time is
 *   billed too). Each call is created at its arrival instant with its duration as its `sim.nodus.dev/call-duration`
 *   annotation, so the simulated worker runs it that long (backends/sim/SimWorkers.ts).
 * - Time is moved only by this module (runtime/VirtualTime.ts): the store's clock (Effect's Clock, a VirtualClock at
 *   speed 0) reads the simulated instant, so creation times, dispatch times and the ledger's postings agree.
 * - When every call has ended the Function is Stopped: idle workers go at once (no idle tail past the trace is
 *   billed), and the replay ends once every worker's host is released, so the ledger holds the whole cost.
 * - Deterministic: uids are sequential, the simulator draws from its seed, and no wall clock is read — the same
 *   arrivals, policy and seed give the same summary.
 */
import { Effect, Layer } from "effect"
import { Ids } from "../apiserver/Ids.ts"
import { Resources, type WriteOptions } from "../apiserver/Resources.ts"
import { Engine } from "../backends/sim/Engine.ts"
import { Prng } from "../backends/sim/Prng.ts"
import { defaultFleet, providerModelsOf } from "../backends/sim/Run.ts"
import { SimCapacity } from "../backends/sim/SimCapacity.ts"
import * as SimPort from "../backends/sim/SimPort.ts"
import type { AttemptFacts, CapacityPortShape } from "../core/capacity/Capacity.ts"
import type { Offering } from "../core/capacity/Offering.ts"
import type { JsonObject } from "../core/Json.ts"
import { namespaceRef } from "../core/meta/Kinds.ts"
import { formatMicroUsd, parseMicroUsd } from "../core/Money.ts"
import { loadCatalog } from "../data/CatalogData.ts"
import type { Arrival } from "../data/LlmTrace.ts"
import type { FunctionCallStatusType } from "../kinds/function/FunctionCallSchema.ts"
import { functionKind } from "../kinds/function/FunctionKind.ts"
import type { FunctionStatusType } from "../kinds/function/FunctionSchema.ts"
import { refOfKind } from "../kinds/Kinds.ts"
import { LedgerService } from "../runtime/LedgerService.ts"
import { Reconciler } from "../runtime/Reconciler.ts"
import { runUntil, type SteppedCapacity } from "../runtime/VirtualTime.ts"
import { inProcessGroup, inProcessRuntime } from "./InProcessRuntime.ts"
import { layer as clockLayer, VirtualClock } from "./VirtualClock.ts"

/** A Function's scaling policy (spec: Function.scaling). */
export interface ReplayPolicy {
  readonly minWorkers: number
  readonly maxWorkers: number
  readonly targetConcurrency: number
  /** A duration, e.g. "60s". */
  readonly scaledownWindow: string
}

export interface ReplayOptions {
  readonly policy: ReplayPolicy
  /** The workers' resources (spec: Resources); default one H100, what the default service model stands for. */
  readonly resources?: JsonObject
  /** The Function's (and every call's) timeout; default 1h, past any wait the replays here see. */
  readonly timeout?: string
  /** The simulator's seed (boot times, boot failures, node losses). */
  readonly seed?: string
  /** Hosts of every offering variant in the simulated fleet. */
  readonly hostsPerVariant?: number
  /** How long before the first arrival the Function is created; default 5 minutes. */
  readonly leadMs?: number
  /** The simulated epoch time of the first arrival. */
  readonly start?: number
  readonly catalog?: ReadonlyArray<Offering>
  /** Told every call's end once the replay is over, in arrival order (tests check each against its arrival). */
  readonly onCalls?: (calls: ReadonlyArray<ReplayedCall>) => void
}

/** How one call of the replay ended: `index` into the arrivals, times in epoch ms. */
export interface ReplayedCall {
  readonly index: number
  readonly phase: string
  readonly reason: string | undefined
  readonly startTime: number | undefined
  readonly completionTime: number | undefined
}

/** Defaults: one H100 80GB per worker (docs/functions.md, "Replaying serving load"). */
export const defaultReplayResources: JsonObject = { gpu: { type: ["H100"], count: 1 } }
export const defaultReplaySeed = "function-replay"
export const defaultReplayStart = Date.parse("2023-11-16T18:00:00.000Z")
const defaultLeadMs = 5 * 60_000
const defaultHosts = 64

export interface Percentiles {
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly max: number
}

export interface ReplaySummary {
  readonly policy: ReplayPolicy
  readonly calls: number
  readonly succeeded: number
  readonly failed: number
  /** Calls that ended otherwise (none, unless something is wrong): phase → count. */
  readonly other: Readonly<Record<string, number>>
  /** Sum of the calls' service times (ms): the work offered. */
  readonly serviceMs: number
  /** Dispatch (status.startTime) − arrival, ms. */
  readonly queueWaitMs: Percentiles
  /** Completion − arrival, ms. */
  readonly latencyMs: Percentiles
  /**
   * Calls that ran once — Succeeded, or Failed `RemoteError` (a raise: the Function has no retries) — whose run
   * (completion − start) differs from their service time: 0 unless a call was recovered.
   */
  readonly runMismatches: number
  readonly workers: {
    /** Most workers held at once (starting or ready, until their host is released). */
    readonly peak: number
    /** Workers launched: each one a cold start. */
    readonly launched: number
    /** Host time of every worker, from its request to its release (what is billed), seconds. */
    readonly workerSeconds: number
    /** Mean workers held in each minute from the Function's creation. */
    readonly perMinute: ReadonlyArray<number>
  }
  /** Simulated time from the Function's creation to the last worker's release, ms. */
  readonly simulatedMs: number
  /** The Function's status.cost.totalUSD at the end. */
  readonly costUSD: string
  /** The ledger's charges to the Function, summed (equal to costUSD). */
  readonly ledgerUSD: string
  /** costUSD × 1000 / calls, rounded down to the micro-dollar. */
  readonly costPer1000CallsUSD: string
}

const group = inProcessGroup
const project = "replay"
const functionName = "llm"
const functions = refOfKind(group, "Function")
const calls = refOfKind(group, "FunctionCall")
const writeOptions: WriteOptions = { dryRun: false, fieldValidation: "Strict", fieldManager: "nodus-replay" }
/** The input every call carries: the model's function returns it, and it is as small as a payload gets. */
const input = Buffer.from(JSON.stringify({ args: [0], kwargs: {} })).toString("base64")

/**
 * Yields that let the change feed's followers (the dispatcher's, the reconciler's) take in the calls just created
 * before time moves on: they need two or three; the replay's test checks that no call waits behind an idle worker.
 */
const settleYields = 32

/** How far past the last arrival to simulate, at most, before giving up on calls that never end. */
const drainLimitMs = 24 * 3_600_000

/** The nearest-rank percentile of a sorted array (0 for none). */
const rank = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted.length === 0 ? 0 : sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!

const percentiles = (values: Array<number>): Percentiles => {
  values.sort((a, b) => a - b)
  return { p50: rank(values, 50), p90: rank(values, 90), p99: rank(values, 99), max: values.at(-1) ?? 0 }
}

/** Peak, worker-seconds and the per-minute means of the workers' held intervals [requestedAt, releasedAt). */
const workersOf = (attempts: ReadonlyArray<AttemptFacts>, from: number, to: number) => {
  const edges: Array<[number, number]> = []
  let heldMs = 0
  const minutes = Math.max(1, Math.ceil((to - from) / 60_000))
  const perMinuteMs = new Array<number>(minutes).fill(0)
  for (const attempt of attempts) {
    const end = attempt.releasedAt ?? to
    edges.push([attempt.requestedAt, 1], [end, -1])
    heldMs += end - attempt.requestedAt
    for (
      let minute = Math.floor((attempt.requestedAt - from) / 60_000);
      minute < minutes && from + minute * 60_000 < end;
      minute++
    ) {
      const lo = Math.max(attempt.requestedAt, from + minute * 60_000)
      const hi = Math.min(end, from + (minute + 1) * 60_000)
      if (hi > lo) perMinuteMs[minute]! += hi - lo
    }
  }
  // Releases before requests at the same instant: a worker replaced at once is not two at once.
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  let held = 0
  let peak = 0
  for (const [, delta] of edges) {
    held += delta
    peak = Math.max(peak, held)
  }
  return {
    peak,
    launched: attempts.length,
    workerSeconds: Math.round(heldMs / 1000),
    perMinute: perMinuteMs.map((ms) => Math.round((ms / 60_000) * 100) / 100)
  }
}

/** The runtime over the simulated capacity, as the sim backend wires it, on a store of its own and `clock`'s time. */
const runtimeOver = (port: CapacityPortShape, clock: VirtualClock, catalog: ReadonlyArray<Offering>) =>
  inProcessRuntime({
    port,
    catalog,
    kinds: [functionKind],
    lostAt: clock.now(),
    ids: Ids.layerSequential,
    // Money is what the replay measures, not what limits it: funding never runs out.
    starterMicro: 1_000_000_000_000n
  }).pipe(Layer.provideMerge(clockLayer(clock)))

/** Replays `arrivals` (sorted by `at`, ms after the first) on a Function under `options.policy`, and summarizes it. */
export const replay = (arrivals: ReadonlyArray<Arrival>, options: ReplayOptions): Effect.Effect<ReplaySummary, Error> =>
  Effect.gen(function*() {
    const start = options.start ?? defaultReplayStart
    const leadMs = options.leadMs ?? defaultLeadMs
    const created = start - leadMs
    // Speed 0 and a wall clock that never moves: simulated time is only what this module sets.
    const clock = new VirtualClock(0, created, () => 0)
    const engine = new Engine(created)
    const models = providerModelsOf(defaultFleet(options.hostsPerVariant ?? defaultHosts))
    const capacity = new SimCapacity(engine, new Prng(options.seed ?? defaultReplaySeed).derive("capacity"), models)
    const counted = yield* SimPort.makeCounted(capacity)
    const stepped: SteppedCapacity = {
      now: () => engine.now,
      nextAt: () => engine.peekTime(),
      runTo: (at) => engine.run(at),
      published: counted.published
    }
    const catalog = options.catalog ?? loadCatalog()
    return yield* run(arrivals, options, { start, created, clock, capacity, stepped }).pipe(
      Effect.provide(runtimeOver(counted.port, clock, catalog)),
      Effect.mapError((error) => new Error(`replaying ${arrivals.length} calls: ${error.message}`))
    )
  })

interface Parts {
  readonly start: number
  readonly created: number
  readonly clock: VirtualClock
  readonly capacity: SimCapacity
  readonly stepped: SteppedCapacity
}

const run = (arrivals: ReadonlyArray<Arrival>, options: ReplayOptions, parts: Parts) =>
  Effect.gen(function*() {
    const { start, created, clock, capacity, stepped } = parts
    const resources = yield* Resources
    const reconciler = yield* Reconciler
    const ledgers = yield* LedgerService
    const timeout = options.timeout ?? "1h"
    const settle = Effect.gen(function*() {
      for (let index = 0; index < settleYields; index++) yield* Effect.yieldNow
    })
    const runTo = (at: number) => runUntil(reconciler, stepped, at, { before: (now) => clock.advanceTo(now) })
    /**
     * Every call as last listed, by name: an ended call is deleted 7 days after it ends (spec: FunctionCall,
     * retention; runtime/FunctionDispatch.ts), so a replay longer than that lists them as it goes, before time moves a
     * simulated day past the last listing (a call's end is an instant of its own, so every ended call is listed before
     * its 7 days are over).
     */
    const seen = new Map<string, { readonly metadata: { readonly name: string }; readonly status?: unknown }>()
    let listedAt = stepped.now()
    const listAll = Effect.gen(function*() {
      for (const object of (yield* resources.list(calls, project, {})).items) seen.set(object.metadata.name, object)
      listedAt = stepped.now()
    })
    /**
     * One instant at a time. A dispatch forks the fiber that hands the call to its worker, and that fiber must reach
     * the simulated worker before the engine moves on, or the call would start late: so each instant is followed by
     * yields, then by a second pass at the same instant (for the keys those fibers woke: answers heard, calls just
     * created), and yields again.
     */
    const instant = (at: number) =>
      Effect.gen(function*() {
        if (at - listedAt >= 86_400_000) yield* listAll
        yield* runTo(at)
        yield* settle
        yield* runTo(stepped.now())
        yield* settle
      })
    /** The next instant anything is due, if before `limit`. */
    const nextBefore = (limit: number): number | undefined => {
      const next = Math.min(
        stepped.nextAt() ?? Number.POSITIVE_INFINITY,
        reconciler.nextWakeAt() ?? Number.POSITIVE_INFINITY
      )
      return next < limit ? Math.max(next, stepped.now()) : undefined
    }
    /** Every instant before `target`, then `target` itself. */
    const to = (target: number) =>
      Effect.gen(function*() {
        for (let next = nextBefore(target); next !== undefined; next = nextBefore(target)) yield* instant(next)
        yield* instant(Math.max(target, stepped.now()))
      })

    yield* resources.create(namespaceRef, undefined, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: project }
    }, writeOptions)
    const fn = yield* resources.create(functions, project, {
      apiVersion: functions.apiVersion,
      kind: "Function",
      metadata: { name: functionName },
      spec: {
        image: "python:3.12",
        code: { module: "serve", qualname: "generate" },
        timeout,
        resources: options.resources ?? defaultReplayResources,
        scaling: { ...options.policy }
      }
    }, writeOptions)
    const uid = fn.object.metadata.uid
    yield* settle

    // Arrivals: the calls of one instant are created together, then the followers take them in.
    for (let index = 0; index < arrivals.length;) {
      const at = start + arrivals[index]!.at
      yield* to(at)
      for (; index < arrivals.length && start + arrivals[index]!.at === at; index++) {
        const arrival = arrivals[index]!
        // A call that raises (a request the trace records as failed) raises on its only try: the Function has no
        // retries.
        const annotations = {
          "sim.nodus.dev/call-duration": `${arrival.durationMs}ms`,
          ...((arrival.raises ?? 0) > 0 ? { "sim.nodus.dev/call-raises": String(arrival.raises) } : {})
        }
        yield* resources.create(calls, project, {
          apiVersion: calls.apiVersion,
          kind: "FunctionCall",
          metadata: { name: `call-${index}`, annotations },
          spec: { function: functionName, timeout, input: { encoding: "JSON", inline: input } }
        }, writeOptions)
      }
      // The followers take the calls in, and they are dispatched at their arrival instant.
      yield* settle
      yield* instant(at)
    }

    // Until every call ended: the Function's queue is empty once the last one is answered.
    const readFunction = Effect.map(resources.get(functions, project, functionName), (object) =>
      (object.status ?? {}) as FunctionStatusType)
    const lastArrival = start + (arrivals.at(-1)?.at ?? 0)
    for (;;) {
      const status = yield* readFunction
      if ((status.queue?.queued ?? 0) === 0 && (status.queue?.running ?? 0) === 0) {
        break
      }
      if (stepped.now() > lastArrival + drainLimitMs) {
        return yield* Effect.fail(
          new Error(`calls still unfinished ${drainLimitMs / 3_600_000}h after the last arrival`)
        )
      }
      yield* instant(nextBefore(Number.POSITIVE_INFINITY) ?? stepped.now() + 60_000)
    }
    const ended = stepped.now()

    // Stopped: idle workers go now; the replay ends when every host is released and its charges are posted.
    yield* resources.patch(functions, project, functionName, "merge", { spec: { state: "Stopped" } }, writeOptions)
    yield* reconciler.resync
    yield* instant(stepped.now())
    for (;;) {
      const live = capacity.attemptsOf(uid).filter((attempt) =>
        attempt.releasedAt === undefined
      )
      if (live.length === 0) break
      if (stepped.now() > ended + drainLimitMs) {
        return yield* Effect.fail(new Error("workers still held a day after the Function was stopped"))
      }
      yield* instant(nextBefore(Number.POSITIVE_INFINITY) ?? stepped.now() + 60_000)
    }
    // One more step at the last release, so the Function's status.cost shows every posting.
    yield* reconciler.resync
    yield* instant(stepped.now())
    const end = stepped.now()

    yield* listAll
    const waits: Array<number> = []
    const latencies: Array<number> = []
    const other: Record<string, number> = {}
    let succeeded = 0
    let failed = 0
    let runMismatches = 0
    let serviceMs = 0
    const ends: Array<ReplayedCall> = []
    for (const object of seen.values()) {
      const index = Number(object.metadata.name.slice("call-".length))
      const arrival = arrivals[index]!
      serviceMs += arrival.durationMs
      const status = (object.status ?? {}) as FunctionCallStatusType
      if (status.phase === "Succeeded") succeeded++
      else if (status.phase === "Failed") failed++
      else other[status.phase ?? "None"] = (other[status.phase ?? "None"] ?? 0) + 1
      const arrived = start + arrival.at
      if (status.startTime !== undefined) waits.push(Date.parse(status.startTime) - arrived)
      if (status.completionTime !== undefined) latencies.push(Date.parse(status.completionTime) - arrived)
      const ranOnce = status.phase === "Succeeded" || (status.phase === "Failed" && status.reason === "RemoteError")
      if (
        ranOnce && status.startTime !== undefined && status.completionTime !== undefined &&
        Date.parse(status.completionTime) - Date.parse(status.startTime) !== arrival.durationMs
      ) runMismatches++
      ends.push({
        index,
        phase: status.phase ?? "None",
        reason: status.reason,
        startTime: status.startTime === undefined ? undefined : Date.parse(status.startTime),
        completionTime: status.completionTime === undefined ? undefined : Date.parse(status.completionTime)
      })
    }
    options.onCalls?.(ends.sort((a, b) => a.index - b.index))
    const final = yield* readFunction
    const costUSD = final.cost?.totalUSD ?? "0"
    const charged = yield* ledgers.read((ledger) => ledger.chargesFor(uid).total)
    const callCount = seen.size
    return {
      policy: options.policy,
      calls: callCount,
      succeeded,
      failed,
      other,
      serviceMs,
      queueWaitMs: percentiles(waits),
      latencyMs: percentiles(latencies),
      runMismatches,
      workers: workersOf(capacity.attemptsOf(uid), created, end),
      simulatedMs: end - created,
      costUSD,
      ledgerUSD: formatMicroUsd(charged),
      costPer1000CallsUSD: callCount === 0 ? "0" : formatMicroUsd((parseMicroUsd(costUSD) * 1000n) / BigInt(callCount))
    } satisfies ReplaySummary
  })
