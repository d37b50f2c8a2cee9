/**
 * The Function machine's rows as a table, on hand-made worker facts and a hand-made serving load (spec: ### Function;
 * nodus: docs/kinds/Function.md): workers sized to the calls, scale-down after scaledownWindow, spec.state Stopped,
 * rolling a new worker template, a worker that cannot start, the status counts, and money.
 */
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import type { Funding } from "../../../src/core/billing/Billing.ts"
import type { AttemptFacts } from "../../../src/core/capacity/Capacity.ts"
import { rank } from "../../../src/core/capacity/Placement.ts"
import { conditionIn } from "../../../src/core/controller/Conditions.ts"
import type { ServingLoad, StepResult } from "../../../src/core/controller/Controller.ts"
import type { JsonObject } from "../../../src/core/Json.ts"
import { acceptsCalls, functionMachine, functionRunProfile, step } from "../../../src/kinds/function/FunctionMachine.ts"
import { workerTemplateOf } from "../../../src/kinds/function/FunctionProgram.ts"
import {
  FunctionSpec,
  type FunctionSpecType,
  type FunctionStatusType
} from "../../../src/kinds/function/FunctionSchema.ts"
import { attempt, catalog, ended, market, minute, T0 } from "../../core/Fixtures.ts"

const second = 1000
const blob = `sha256:${"b".repeat(64)}`

const spec = (fields: JsonObject = {}): FunctionSpecType =>
  Schema.decodeUnknownSync(FunctionSpec)({
    image: "python:3.12",
    code: { module: "app.handlers", qualname: "embed" },
    ...fields
  })

/** A worker of the Function `fn`, ready since T0 unless told. */
const worker = (number: number, fields: Partial<AttemptFacts> = {}): AttemptFacts =>
  attempt({ name: `fn-${number}`, number, bootedAt: T0, ...fields })

/** A worker that ended before it was ready (its module did not import). */
const failedStart = (number: number, message = "ModuleNotFoundError: No module named 'app'") =>
  ended({ type: "Failed", exitCode: 1, message }, T0 + number * second, {
    name: `fn-${number}`,
    number,
    bootedAt: undefined
  })

/** The status a Function whose workers from `firstWorker` on run `fnSpec` shows. */
const serving = (fnSpec: FunctionSpecType, firstWorker = 1, fields: FunctionStatusType = {}): FunctionStatusType => ({
  phase: "Running",
  workerTemplate: { template: workerTemplateOf(fnSpec), firstWorker },
  ...fields
})

const load = (fields: Partial<ServingLoad> = {}): ServingLoad => ({
  queued: 0,
  running: {},
  lastBusyAt: {},
  nextAt: undefined,
  ...fields
})

const stepAt = (
  now: number,
  fnSpec: FunctionSpecType,
  status: FunctionStatusType,
  attempts: ReadonlyArray<AttemptFacts>,
  servingLoad: ServingLoad = load(),
  funding?: Funding
): StepResult<FunctionStatusType> =>
  step(
    {
      name: "fn",
      namespace: "demo",
      uid: "uid-1",
      generation: 1,
      spec: fnSpec,
      status,
      attempts,
      serving: servingLoad
    },
    {
      now,
      market: market(),
      ranking: rank(functionMachine.placementOf(fnSpec).request, catalog, market(), functionRunProfile(fnSpec)),
      funding
    }
  )

const launches = (result: StepResult<FunctionStatusType>) =>
  result.actions.flatMap((action) => action._tag === "Launch" ? [action] : [])
const stops = (result: StepResult<FunctionStatusType>) =>
  result.actions.flatMap((action) => action._tag === "Stop" ? [action.attempt] : [])

describe("workers for the calls (spec: scaling)", () => {
  it("none with no call and minWorkers 0: Running, Ready True WorkersReady (scaled to zero)", () => {
    const result = stepAt(T0, spec(), {}, [])
    expect(result.actions).toEqual([])
    expect(result.status.phase).toBe("Running")
    expect(conditionIn(result.status.conditions, "Ready")).toMatchObject({ status: "True", reason: "WorkersReady" })
    expect(result.status.workers).toEqual({ starting: 0, ready: 0, busy: 0, idle: 0, draining: 0 })
    expect(result.status.queue).toEqual({ queued: 0, running: 0 })
  })

  it("minWorkers 2 starts two serving workers, each running the Python worker over the code", () => {
    const result = stepAt(T0, spec({ scaling: { minWorkers: 2, targetConcurrency: 4 } }), {}, [])
    const started = launches(result)
    expect(started.map((launch) => [launch.attempt, launch.number, launch.service])).toEqual([["fn-1", 1, true], [
      "fn-2",
      2,
      true
    ]])
    expect(started[0]!.workload?.worker).toMatchObject({
      module: "app.handlers",
      qualname: "embed",
      concurrency: 4,
      codeInput: undefined
    })
    expect(started[0]!.workload?.argv).toEqual([])
    expect(started[0]!.workload?.inputs).toEqual([])
    expect(result.status).toMatchObject({
      phase: "Starting",
      workers: { starting: 2 },
      workerTemplate: { firstWorker: 1 }
    })
    expect(conditionIn(result.status.conditions, "Ready")).toMatchObject({ status: "False", reason: "WorkersStarting" })
  })

  it("gives the worker its code archive as the input `code` when code.blob is set", () => {
    const result = stepAt(
      T0,
      spec({ code: { module: "app.handlers", qualname: "embed", blob }, scaling: { minWorkers: 1 } }),
      {},
      []
    )
    const workload = launches(result)[0]!.workload
    expect(workload?.inputs).toEqual([{ name: "code", blob }])
    expect(workload?.worker).toMatchObject({
      module: "app.handlers",
      qualname: "embed",
      concurrency: 1,
      codeInput: "code"
    })
  })

  it("starts enough workers for the queued and running calls at targetConcurrency each, at most maxWorkers", () => {
    expect(launches(stepAt(T0, spec({ scaling: { targetConcurrency: 2 } }), {}, [], load({ queued: 5 }))).length).toBe(
      3
    )
    expect(
      launches(stepAt(T0, spec({ scaling: { targetConcurrency: 2, maxWorkers: 2 } }), {}, [], load({ queued: 5 })))
        .length
    ).toBe(2)
    // One worker runs 2 calls and 3 wait: ceil(5 / 2) = 3 workers, so two more, numbered after it.
    const fnSpec = spec({ scaling: { targetConcurrency: 2 } })
    const more = stepAt(T0, fnSpec, serving(fnSpec), [worker(1)], load({ queued: 3, running: { "fn-1": 2 } }))
    expect(launches(more).map((launch) => launch.attempt)).toEqual(["fn-2", "fn-3"])
    expect(more.status.phase).toBe("Running")
  })

  it("wakes when the dispatcher asks (a retry's backoff, a deadline)", () => {
    expect(stepAt(T0, spec(), {}, [], load({ nextAt: T0 + 5 * second })).wakeAt).toBe(T0 + 5 * second)
  })
})

describe("scale-down (spec: scaledownWindow)", () => {
  const fnSpec = spec({ scaling: { scaledownWindow: "60s" } })
  const idle = [worker(1, { bootedAt: T0 }), worker(2, { bootedAt: T0 + 10 * second })]
  const lastBusy = load({ lastBusyAt: { "fn-1": T0 + 30 * second } })

  it("stops an idle worker above the wanted count only once scaledownWindow has passed since max(bootedAt, lastBusyAt), waking then", () => {
    const early = stepAt(T0 + 50 * second, fnSpec, serving(fnSpec), idle, lastBusy)
    expect(early.actions).toEqual([])
    // fn-2 has been idle since its boot at 10s, fn-1 since its last call at 30s: fn-2 is due first, at 70s.
    expect(early.wakeAt).toBe(T0 + 70 * second)
    const justBefore = stepAt(T0 + 70 * second - 1, fnSpec, serving(fnSpec), idle, lastBusy)
    expect(justBefore.actions).toEqual([])
    const first = stepAt(T0 + 70 * second, fnSpec, serving(fnSpec), idle, lastBusy)
    expect(first.actions).toEqual([{ _tag: "Stop", attempt: "fn-2", keepWarmMs: 0 }])
    expect(first.wakeAt).toBe(T0 + 90 * second)
    expect(stops(stepAt(T0 + 90 * second, fnSpec, serving(fnSpec), idle, lastBusy))).toEqual(["fn-2", "fn-1"])
  })

  it("keeps minWorkers: only those above it go, the longest idle first", () => {
    const warm = spec({ scaling: { scaledownWindow: "60s", minWorkers: 1 } })
    // fn-2 has been idle since 10s, fn-1 only since its call at 30s.
    expect(stops(stepAt(T0 + 10 * minute, warm, serving(warm), idle, lastBusy))).toEqual(["fn-2"])
  })

  it("never stops a busy worker for scaling, however long ago it started", () => {
    const wide = spec({ scaling: { scaledownWindow: "0s", targetConcurrency: 10 } })
    // Two calls at 10 a worker want one worker; both run a call, so neither goes and nothing is waited for.
    const busy = stepAt(T0 + 10 * minute, wide, serving(wide), idle, load({ running: { "fn-1": 1, "fn-2": 1 } }))
    expect(busy.actions).toEqual([])
    expect(busy.wakeAt).toBeUndefined()
    const oneIdle = stepAt(T0 + 10 * minute, wide, serving(wide), idle, load({ running: { "fn-1": 1 } }))
    expect(stops(oneIdle)).toEqual(["fn-2"])
  })
})

describe("spec.state Stopped (spec: drains workers to zero; new calls queue)", () => {
  const fnSpec = spec({ state: "Stopped", scaling: { minWorkers: 2 } })

  it("stops idle workers at once, keeps busy ones until their calls end: Stopping, reason Stopped", () => {
    const result = stepAt(
      T0 + minute,
      fnSpec,
      serving(fnSpec),
      [worker(1), worker(2)],
      load({ queued: 3, running: { "fn-1": 1 } })
    )
    expect(stops(result)).toEqual(["fn-2"])
    expect(launches(result)).toEqual([])
    expect(result.status).toMatchObject({ phase: "Stopping", reason: "Stopped", queue: { queued: 3, running: 1 } })
    expect(conditionIn(result.status.conditions, "Ready")).toMatchObject({ status: "False", reason: "Stopping" })
    const idleNow = stepAt(T0 + 2 * minute, fnSpec, result.status, [worker(1), worker(2, { phase: "Terminating" })])
    expect(stops(idleNow)).toEqual(["fn-1"])
  })

  it("is Stopped once no worker is live", () => {
    const result = stepAt(T0 + 3 * minute, fnSpec, serving(fnSpec, 1, { phase: "Stopping" }), [
      ended({ type: "Stopped" }, T0 + 2 * minute, { name: "fn-1", number: 1 })
    ], load({ queued: 3 }))
    expect(result.actions).toEqual([])
    expect(result.status).toMatchObject({ phase: "Stopped", reason: "Stopped" })
  })
})

describe("rolling a new template (spec: a change to code, image or resources rolls workers)", () => {
  const before = spec({ scaling: { minWorkers: 2 } })
  const after = spec({ code: { module: "app.handlers", qualname: "embed_v2" }, scaling: { minWorkers: 2 } })
  const old = [worker(1), worker(2)]
  const busyOne = load({ running: { "fn-1": 1 } })

  it("numbers the new template from the next worker, drains the idle old ones, starts new ones, and says so once", () => {
    const result = stepAt(T0 + minute, after, serving(before), old, busyOne)
    expect(result.status.workerTemplate).toEqual({ template: workerTemplateOf(after), firstWorker: 3 })
    expect(stops(result)).toEqual(["fn-2"])
    expect(launches(result).map((launch) => launch.attempt)).toEqual(["fn-3", "fn-4"])
    expect(launches(result)[0]!.workload?.worker?.qualname).toBe("embed_v2")
    expect(result.events.map((event) => event.reason)).toEqual(["RollingWorkers"])
    expect(result.status.workers).toMatchObject({ draining: 2, starting: 2 })

    // The busy old worker finishes its call first; the event is not said again.
    const rolled = [
      worker(1),
      worker(2, { phase: "Terminating" }),
      worker(3, { phase: "Provisioning", bootedAt: undefined }),
      worker(4, { phase: "Provisioning", bootedAt: undefined })
    ]
    const stillBusy = stepAt(T0 + 2 * minute, after, result.status, rolled, busyOne)
    expect(stillBusy.actions).toEqual([])
    expect(stillBusy.events).toEqual([])
    const done = stepAt(T0 + 3 * minute, after, result.status, rolled, load())
    expect(done.actions).toEqual([{ _tag: "Stop", attempt: "fn-1", keepWarmMs: 0 }])
  })

  it("rolls nothing for a change of scaling or retries", () => {
    const scaled = spec({
      scaling: { minWorkers: 2, maxWorkers: 5, scaledownWindow: "10m" },
      retries: { maxRetries: 3 }
    })
    expect(workerTemplateOf(scaled)).toBe(workerTemplateOf(before))
    const result = stepAt(T0 + minute, scaled, serving(before), old)
    expect(result.actions).toEqual([])
    expect(result.events).toEqual([])
  })
})

describe("acceptsCalls", () => {
  const fnSpec = spec()
  const status = serving(fnSpec, 3)

  it("is true for a ready worker of the current template of a serving Function only", () => {
    expect(acceptsCalls(fnSpec, status, worker(3))).toBe(true)
    expect(acceptsCalls(fnSpec, status, worker(2))).toBe(false)
    expect(acceptsCalls(fnSpec, status, worker(4, { phase: "Provisioning", bootedAt: undefined }))).toBe(false)
    expect(acceptsCalls(fnSpec, status, worker(4, { phase: "Terminating" }))).toBe(false)
    expect(acceptsCalls(spec({ state: "Stopped" }), status, worker(3))).toBe(false)
    for (const phase of ["Stopping", "Stopped", "Failed"] as const) {
      expect(acceptsCalls(fnSpec, { ...status, phase }, worker(3)), phase).toBe(false)
    }
  })
})

describe("workers that cannot start", () => {
  const fnSpec = spec({ scaling: { minWorkers: 1 } })
  const three = [failedStart(1), failedStart(2), failedStart(3, "ModuleNotFoundError: No module named 'app.handlers'")]

  it("three in a row of the current template fail the Function WorkerStartupFailed with the last message, and start no more", () => {
    const result = stepAt(T0 + minute, fnSpec, serving(fnSpec), three, load({ queued: 2 }))
    expect(result.actions).toEqual([])
    expect(result.status).toMatchObject({
      phase: "Failed",
      reason: "WorkerStartupFailed",
      queue: { queued: 2, running: 0 }
    })
    expect(result.status.message).toContain(
      "3 workers in a row ended before they were ready: ModuleNotFoundError: No module named 'app.handlers'."
    )
    expect(conditionIn(result.status.conditions, "Ready")).toMatchObject({
      status: "False",
      reason: "WorkerStartupFailed"
    })
    expect(acceptsCalls(fnSpec, result.status, worker(4))).toBe(false)
  })

  it("stops the current workers that take no call once Failed (acceptsCalls is false: they would idle, billed, for ever)", () => {
    // fn-1 came up; fn-2..4 did not (a host without the interpreter): the Function fails, and fn-1 goes once idle.
    const attempts = [
      worker(1),
      failedStart(2),
      failedStart(3),
      failedStart(4),
      worker(5, { phase: "Provisioning", bootedAt: undefined })
    ]
    const busy = stepAt(T0 + minute, fnSpec, serving(fnSpec), attempts, load({ running: { "fn-1": 1 } }))
    expect(busy.status.phase).toBe("Failed")
    expect(stops(busy)).toEqual(["fn-5"])
    const idle = stepAt(T0 + 2 * minute, fnSpec, busy.status, attempts, load())
    expect(stops(idle)).toEqual(["fn-1", "fn-5"])
    expect(idle.status.workers).toMatchObject({ draining: 2, ready: 0 })
  })

  it("two, or three not in a row (one was ready between), start another", () => {
    expect(launches(stepAt(T0 + minute, fnSpec, serving(fnSpec), three.slice(1))).map((launch) => launch.attempt))
      .toEqual(["fn-4"])
    const between = [
      failedStart(1),
      ended({ type: "Failed", exitCode: 1 }, T0 + 2 * second, { name: "fn-2", number: 2, bootedAt: T0 }),
      failedStart(3),
      failedStart(4)
    ]
    expect(launches(stepAt(T0 + minute, fnSpec, serving(fnSpec), between)).map((launch) => launch.attempt)).toEqual([
      "fn-5"
    ])
  })

  it("a change of the code starts workers again (the failures were the old template's)", () => {
    const failed = stepAt(T0 + minute, fnSpec, serving(fnSpec), three).status
    const fixed = spec({ code: { module: "app.main", qualname: "embed" }, scaling: { minWorkers: 1 } })
    const result = stepAt(T0 + 2 * minute, fixed, failed, three)
    expect(launches(result).map((launch) => launch.attempt)).toEqual(["fn-4"])
    expect(result.status).toMatchObject({ phase: "Starting", workerTemplate: { firstWorker: 4 } })
    expect(result.status.reason).toBeUndefined()
  })
})

describe("status.workers and status.queue", () => {
  it("count the live workers by what they do, and the dispatcher's calls", () => {
    const before = spec({ scaling: { targetConcurrency: 2, maxWorkers: 3 } })
    const fnSpec = spec({
      code: { module: "app.handlers", qualname: "embed_v2" },
      scaling: { targetConcurrency: 2, maxWorkers: 3 }
    })
    const status = serving(fnSpec, 3)
    const attempts = [
      ended({ type: "Stopped" }, T0, { name: "fn-1", number: 1 }),
      worker(2),
      worker(3),
      worker(4),
      worker(5, { phase: "Provisioning", bootedAt: undefined })
    ]
    expect(workerTemplateOf(before)).not.toBe(workerTemplateOf(fnSpec))
    const result = stepAt(
      T0 + minute,
      fnSpec,
      status,
      attempts,
      load({ queued: 1, running: { "fn-2": 1, "fn-3": 2 }, lastBusyAt: { "fn-4": T0 + minute } })
    )
    // fn-2 is old and busy (draining), fn-3 busy, fn-4 idle (its window not over), fn-5 starting.
    expect(result.actions).toEqual([])
    expect(result.status.workers).toEqual({ starting: 1, ready: 2, busy: 1, idle: 1, draining: 1 })
    expect(result.status.queue).toEqual({ queued: 1, running: 3 })
  })
})

describe("money", () => {
  const funding = (stop: Funding["stop"]): Funding => ({
    launchBudget: 10_000_000n,
    initialHold: () => 1_000n,
    blocked: undefined,
    stop
  })
  const fnSpec = spec({ scaling: { minWorkers: 2 }, maxCostUSD: "5" })
  const workers = [worker(1), worker(2)]
  const busy = load({ running: { "fn-1": 1 } })

  it("a funding stop drains the workers, busy ones by the stop time, and says function.funding_lost once", () => {
    const lost = funding({ reason: "FundingLost", at: T0 + 10 * minute, message: "The account has no credits." })
    const result = stepAt(T0, fnSpec, serving(fnSpec), workers, busy, lost)
    expect(stops(result)).toEqual(["fn-2"])
    expect(launches(result)).toEqual([])
    expect(result.wakeAt).toBe(T0 + 10 * minute)
    expect(result.status).toMatchObject({ phase: "Stopping", reason: "FundingLost" })
    expect(result.events.map((event) => [event.type, event.warning])).toEqual([["function.funding_lost", true]])
    expect(conditionIn(result.status.conditions, "Funded")).toMatchObject({ status: "False", reason: "FundingLost" })

    const later = stepAt(T0 + 10 * minute, fnSpec, result.status, [worker(1)], busy, lost)
    expect(stops(later)).toEqual(["fn-1"])
    expect(later.events).toEqual([])
  })

  it("maxCostUSD reached says function.max_cost_reached once, and function.funding_restored when raised", () => {
    const capped = funding({ reason: "MaxCostReached", at: T0 + minute, message: "maxCostUSD 5 is spent." })
    const result = stepAt(T0, fnSpec, serving(fnSpec), workers, load(), capped)
    expect(stops(result)).toEqual(["fn-1", "fn-2"])
    expect(result.status).toMatchObject({ phase: "Stopping", reason: "MaxCostReached" })
    expect(result.events.map((event) => event.type)).toEqual(["function.max_cost_reached"])
    expect(stepAt(T0 + second, fnSpec, result.status, workers, load(), capped).events).toEqual([])

    const raised = stepAt(
      T0 + 2 * minute,
      spec({ scaling: { minWorkers: 2 }, maxCostUSD: "10" }),
      result.status,
      [],
      load(),
      funding(undefined)
    )
    expect(raised.events.map((event) => event.type)).toEqual(["function.funding_restored"])
    expect(launches(raised).length).toBe(2)
    expect(conditionIn(raised.status.conditions, "Funded")).toMatchObject({ status: "True" })
  })
})
