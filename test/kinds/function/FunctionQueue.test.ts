/**
 * The queue of a Function's calls on its warm workers (kinds/function/FunctionQueue.ts), pure: sessions take turns, a
 * call goes to the least busy worker with a free slot and never past targetConcurrency, an answer frees its slot and
 * ends the call, a worker that ended loses its calls (recovered), a deadline expires a running call, a retry waits out
 * its backoff, and the load the step sees counts what waits and what runs.
 */
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import type { AttemptFacts } from "../../../src/core/capacity/Capacity.ts"
import type { JsonObject } from "../../../src/core/Json.ts"
import * as Call from "../../../src/kinds/function/FunctionCallMachine.ts"
import type { FunctionCallSpecType } from "../../../src/kinds/function/FunctionCallSchema.ts"
import { workerTemplateOf } from "../../../src/kinds/function/FunctionProgram.ts"
import * as Queue from "../../../src/kinds/function/FunctionQueue.ts"
import {
  FunctionSpec,
  type FunctionSpecType,
  type FunctionStatusType
} from "../../../src/kinds/function/FunctionSchema.ts"
import { attempt, ended, T0 } from "../../core/Fixtures.ts"

const second = 1000

const spec = (fields: JsonObject = {}): FunctionSpecType =>
  Schema.decodeUnknownSync(FunctionSpec)({ image: "python:3.12", code: { module: "app", qualname: "f" }, ...fields })

const worker = (number: number, fields: Partial<AttemptFacts> = {}): AttemptFacts =>
  attempt({ name: `fn-${number}`, number, bootedAt: T0, ...fields })

const status = (fnSpec: FunctionSpecType): FunctionStatusType => ({
  phase: "Running",
  workerTemplate: { template: workerTemplateOf(fnSpec), firstWorker: 1 }
})

const groupOf = (fnSpec: FunctionSpecType) => {
  const group = Queue.makeGroup("p", "fn")
  group.uid = "fn-uid"
  group.spec = fnSpec
  return group
}

const call = (uid: string, session?: string): Queue.QueuedCall => ({
  uid,
  spec: { function: "fn", ...(session === undefined ? {} : { session }) } as FunctionCallSpecType,
  state: Call.queued(),
  cancelAsked: false,
  lostBefore: false,
  deleted: false,
  waiting: false
})

/** Every dispatch the free slots take now: [call uid, worker]. */
const dispatchAll = (group: Queue.WorkerGroup, workers: ReadonlyArray<AttemptFacts>, now: number) => {
  const slots = Queue.slotsOf(group, status(group.spec!), workers)
  const taken: Array<[string, string]> = []
  for (let next = Queue.nextDispatch(group, slots, now); next !== undefined;) {
    taken.push([next.call.uid, next.flight.worker])
    next = Queue.nextDispatch(group, slots, now)
  }
  return taken
}

const ok = { ok: true, encoding: "JSON", result: "bnVsbA==" } as const

describe("FunctionQueue", () => {
  it("serves sessions in turn, each to the least busy worker, never past targetConcurrency", () => {
    const fnSpec = spec({ scaling: { maxWorkers: 2, targetConcurrency: 2 } })
    const group = groupOf(fnSpec)
    for (const [uid, session] of [["a1", "a"], ["a2", "a"], ["a3", "a"], ["b1", "b"], ["b2", "b"]] as const) {
      Queue.admitCall(group, call(uid, session))
    }
    expect(group.queued).toBe(5)
    const taken = dispatchAll(group, [worker(1), worker(2)], T0)
    expect(taken).toEqual([["a1", "fn-1"], ["b1", "fn-2"], ["a2", "fn-1"], ["b2", "fn-2"]])
    expect(group.queued).toBe(1)
    expect(group.calls.get("a1")!.state).toMatchObject({ phase: "Running", epoch: 1, worker: "fn-1", startTime: T0 })
    const load = Queue.loadOf(group, T0, undefined)
    expect(load).toMatchObject({ queued: 1, running: { "fn-1": 2, "fn-2": 2 } })
    // A worker not ready takes nothing.
    expect(dispatchAll(group, [worker(3, { phase: "Provisioning", bootedAt: undefined })], T0)).toEqual([])
  })

  it("an answer frees its slot and ends the call with the try's cost; the next call takes the slot", () => {
    const fnSpec = spec({ scaling: { maxWorkers: 1, targetConcurrency: 1 } })
    const group = groupOf(fnSpec)
    Queue.admitCall(group, call("c1"))
    Queue.admitCall(group, call("c2"))
    const w = worker(1)
    const [first] = dispatchAll(group, [w], T0)
    expect(first).toEqual(["c1", "fn-1"])
    const flight = group.inFlight.get(Queue.flightKey("c1", 1))!
    group.heard.push({ flight, reply: { _tag: "Result", outcome: ok } })
    Queue.advance(group, [w], T0 + 3 * second, "")
    const done = group.calls.get("c1")!.state
    expect(done.phase).toBe("Succeeded")
    expect(done.costMicroUsd).toBe(Call.tryCostMicroUsd(3 * second, w.variant.rateMicroUsdPerHour, 1))
    expect(group.lastBusyAt.get("fn-1")).toBe(T0 + 3 * second)
    expect(dispatchAll(group, [w], T0 + 3 * second)).toEqual([["c2", "fn-1"]])
    // An answer for another epoch is fenced: the call stays as it is.
    group.heard.push({ flight: { ...flight, uid: "c2", epoch: 7 }, reply: { _tag: "Result", outcome: ok } })
    Queue.advance(group, [w], T0 + 4 * second, "")
    expect(group.calls.get("c2")!.state.phase).toBe("Running")
  })

  it("a worker that ended loses its calls, which are queued again (Recovering)", () => {
    const fnSpec = spec({ scaling: { maxWorkers: 1, targetConcurrency: 1 } })
    const group = groupOf(fnSpec)
    Queue.admitCall(group, call("c1"))
    dispatchAll(group, [worker(1)], T0)
    const gone = ended({ type: "NodeLost" }, T0 + second, { name: "fn-1", number: 1 })
    Queue.advance(group, [gone], T0 + second, "")
    expect(group.calls.get("c1")!.state).toMatchObject({ phase: "Recovering", recoveries: 1 })
    expect(group.inFlight.size).toBe(0)
    expect(group.queued).toBe(1)
    expect(dispatchAll(group, [gone, worker(2)], T0 + 2 * second)).toEqual([["c1", "fn-2"]])
  })

  it("a running call past its deadline fails DeadlineExceeded; the step is woken at the deadline", () => {
    const fnSpec = spec({ timeout: "10s", scaling: { maxWorkers: 1, targetConcurrency: 1 } })
    const group = groupOf(fnSpec)
    Queue.admitCall(group, call("c1"))
    const w = worker(1)
    dispatchAll(group, [w], T0)
    group.dirty.clear()
    expect(Queue.nextAtOf(group, 0, undefined)).toBe(T0 + 10 * second)
    Queue.advance(group, [w], T0 + 10 * second, "")
    expect(group.calls.get("c1")!.state).toMatchObject({ phase: "Failed", reason: "DeadlineExceeded" })
  })

  it("a raised try waits out its backoff before it is queued again", () => {
    const fnSpec = spec({ retries: { maxRetries: 1, initialDelay: "5s" } })
    const group = groupOf(fnSpec)
    Queue.admitCall(group, call("c1"))
    const w = worker(1)
    dispatchAll(group, [w], T0)
    const flight = group.inFlight.get(Queue.flightKey("c1", 1))!
    const raised = { ok: false, error: { type: "ValueError", message: "no", traceback: "" } } as const
    group.heard.push({ flight, reply: { _tag: "Result", outcome: raised } })
    Queue.advance(group, [w], T0 + second, "")
    expect(group.calls.get("c1")!.state).toMatchObject({ phase: "Queued", retries: 1, notBefore: T0 + 6 * second })
    expect(group.queued).toBe(0)
    expect(dispatchAll(group, [w], T0 + 2 * second)).toEqual([])
    group.dirty.clear()
    expect(Queue.nextAtOf(group, 0, undefined)).toBe(T0 + 6 * second)
    Queue.advance(group, [w], T0 + 6 * second, "")
    expect(dispatchAll(group, [w], T0 + 6 * second)).toEqual([["c1", "fn-1"]])
  })

  it("retention goes by the whole hour after 7 days", () => {
    const retention = new Queue.Retention()
    retention.retain({ uid: "u", namespace: "p", name: "c", fn: "fn" }, T0 + 1)
    expect(retention.has("u")).toBe(true)
    const at = retention.next()!
    expect(at % 3_600_000).toBe(0)
    expect(at).toBeGreaterThanOrEqual(T0 + 7 * 24 * 3_600_000)
    expect(retention.expire(at - 1)).toEqual([])
    expect(retention.expire(at).map((call) => call.uid)).toEqual(["u"])
    expect(retention.has("u")).toBe(false)
  })
})
