/**
 * Function workers under the simulator (SimWorkers over SimCapacity, through the port; docs/simulator.md,
 * "Functions"): a call is answered when it ends in virtual time — its reply first, then the owner's change — by the
 * model its annotations and its Function's set, refused while the worker starts, lost with the worker at the instant
 * the worker goes, and the same calls give the same replies at the same times.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Engine } from "../../../src/backends/sim/Engine.ts"
import { Prng } from "../../../src/backends/sim/Prng.ts"
import { SimCapacity } from "../../../src/backends/sim/SimCapacity.ts"
import * as SimPort from "../../../src/backends/sim/SimPort.ts"
import type { BoxReply, BoxRequest, CallOutcome } from "../../../src/core/capacity/Capacity.ts"
import { variantsOf } from "../../../src/core/capacity/Offering.ts"
import { catalog } from "../../core/Fixtures.ts"

const variant = variantsOf(catalog.find((offering) => offering.accelerator === undefined) ?? catalog[0]!)[0]!
const bootMs = 1000

const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64")
const text = (base64: string) => Buffer.from(base64, "base64").toString("utf8")
const json = (args: ReadonlyArray<unknown>, kwargs: Record<string, unknown> = {}) =>
  b64(JSON.stringify({ args, kwargs }))

interface Answer {
  readonly call: string
  readonly at: number
  readonly reply: BoxReply
  /** Changes the port had published when the reply came. */
  readonly published: number
}

/** A port over one host of deterministic boot (1 s), running a worker for attempt `a` of owner `fn`. */
const workerOf = (annotations: Record<string, string> = {}, concurrency = 4) => {
  const engine = new Engine(0)
  const capacity = new SimCapacity(engine, new Prng("workers"), () => ({
    capacity: 2,
    bootMedianMs: bootMs,
    bootSigma: 0,
    bootFailureRate: 0,
    preemptionMtbfMs: undefined,
    preemptionTrace: undefined,
    nodeLossMtbfMs: undefined,
    teardownMs: 1000,
    warmStartMs: 1000,
    restoreBytesPerSecond: 2 ** 30
  }))
  const { port, published } = Effect.runSync(SimPort.makeCounted(capacity))
  const launch = (attempt: string) => {
    capacity.acquire({ owner: "fn", namespace: "n", attempt, index: 0, number: 1, variant, recovery: false })
    Effect.runSync(port.start("fn", attempt, {
      restoreFromSeq: undefined,
      resumeFromUnits: undefined,
      checkpointIntervalMs: undefined,
      keepWarmMs: 0,
      env: {},
      annotations,
      service: true,
      workload: {
        image: "python:3.12",
        argv: [],
        workingDir: undefined,
        env: [],
        secrets: [],
        egress: "Deny",
        memoryBytes: undefined,
        init: undefined,
        worker: { python: "3.12", module: "app", qualname: "f", concurrency, codeInput: "code" }
      }
    }))
  }
  launch("a")
  const answers: Array<Answer> = []
  /** Sends a call; its reply is recorded with the virtual instant it came at. */
  const call = (id: string, more: Partial<Extract<BoxRequest, { _tag: "Call" }>> = {}, attempt = "a") => {
    Effect.runFork(Effect.tap(
      port.box!("fn", attempt, {
        _tag: "Call",
        call: id,
        encoding: "JSON",
        input: json([id]),
        timeoutMs: 3_600_000,
        ...more
      }),
      (reply) => Effect.sync(() => answers.push({ call: id, at: engine.now, reply, published: published() }))
    ))
  }
  const answer = (id: string) => answers.find((answer) => answer.call === id)
  const busy = () => capacity.facts("fn", "a")?.activity?.busy === true
  return { engine, capacity, port, published, launch, call, answer, answers, busy }
}

const result = (reply: BoxReply | undefined) => {
  assert.strictEqual(reply?._tag, "Result", JSON.stringify(reply))
  return (reply as Extract<BoxReply, { _tag: "Result" }>).outcome
}

describe("a simulated Function worker (SimWorkers)", () => {
  it("answers a call at start + call-duration with its first argument, the reply before the owner's change", () => {
    const { engine, call, answer, busy, published } = workerOf({ "sim.nodus.dev/call-duration": "30s" })
    engine.run(bootMs)
    call("uid-1.1", { input: json([{ x: [1, 2] }, "second"], { k: 3 }) })
    assert.isUndefined(answer("uid-1.1"))
    assert.isTrue(busy())
    engine.run(bootMs + 29_999)
    assert.isUndefined(answer("uid-1.1"))
    engine.run(bootMs + 60_000)
    const answered = answer("uid-1.1")!
    assert.strictEqual(answered.at, bootMs + 30_000)
    const outcome = result(answered.reply)
    assert.deepStrictEqual(outcome.ok && { encoding: outcome.encoding, value: JSON.parse(text(outcome.result)) }, {
      encoding: "JSON",
      value: { x: [1, 2] }
    })
    // The change for the owner came after the reply (so the sim backend waits for the runtime to take it in).
    assert.isAbove(published(), answered.published)
    assert.isFalse(busy())
  })

  it("a call's own call-duration wins over its Function's; no arguments return null; Pickle input comes back unchanged", () => {
    const { engine, call, answer } = workerOf({ "sim.nodus.dev/call-duration": "30s" })
    engine.run(bootMs)
    call("short.1", { annotations: { "sim.nodus.dev/call-duration": "5s" }, input: json([]) })
    call("pickled.1", {
      encoding: "Pickle",
      input: "gASVBQAAAAAAAACMAXiULg==",
      annotations: { "sim.nodus.dev/call-duration": "2s" }
    })
    call("long.1")
    engine.run(bootMs + 60_000)
    assert.strictEqual(answer("short.1")!.at, bootMs + 5000)
    assert.deepStrictEqual(result(answer("short.1")!.reply), { ok: true, encoding: "JSON", result: b64("null") })
    assert.strictEqual(answer("pickled.1")!.at, bootMs + 2000)
    assert.deepStrictEqual(result(answer("pickled.1")!.reply), {
      ok: true,
      encoding: "Pickle",
      result: "gASVBQAAAAAAAACMAXiULg=="
    })
    assert.strictEqual(answer("long.1")!.at, bootMs + 30_000)
  })

  it("raises sim.SimulatedError on a FunctionCall's first call-raises tries, then returns; the call's setting wins", () => {
    const { engine, call, answer } = workerOf({ "sim.nodus.dev/call-raises": "2" })
    engine.run(bootMs)
    for (const epoch of [1, 2, 3]) {
      call(`flaky.${epoch}`)
      engine.run(engine.now)
    }
    const raised: CallOutcome = {
      ok: false,
      error: { type: "sim.SimulatedError", message: "raised by the simulator's model", traceback: "" }
    }
    assert.deepStrictEqual(result(answer("flaky.1")!.reply), raised)
    assert.deepStrictEqual(result(answer("flaky.2")!.reply), raised)
    assert.deepStrictEqual(result(answer("flaky.3")!.reply), {
      ok: true,
      encoding: "JSON",
      result: b64(JSON.stringify("flaky.3"))
    })
    // Tries are counted per FunctionCall: another one raises its own first two.
    call("other.1")
    call("steady.1", { annotations: { "sim.nodus.dev/call-raises": "0" } })
    engine.run(engine.now)
    assert.deepStrictEqual(result(answer("other.1")!.reply), raised)
    assert.isTrue(result(answer("steady.1")!.reply).ok)
  })

  it("refuses a call while the worker boots (SandboxStarting), also through worker-start; runs concurrency calls at once", () => {
    const { engine, call, answer, capacity } = workerOf({
      "sim.nodus.dev/worker-start": "10s",
      "sim.nodus.dev/call-duration": "10s"
    }, 1)
    call("early.1")
    assert.deepInclude(answer("early.1")!.reply, { _tag: "Refused", code: "SandboxStarting" })
    engine.run(bootMs + 9999)
    call("starting.1")
    assert.deepInclude(answer("starting.1")!.reply, { _tag: "Refused", code: "SandboxStarting" })
    engine.run(bootMs + 10_000)
    assert.strictEqual(capacity.facts("fn", "a")?.bootedAt, bootMs + 10_000)
    const start = engine.now
    call("first.1")
    call("second.1")
    engine.run(start + 60_000)
    assert.strictEqual(answer("first.1")!.at, start + 10_000)
    // Concurrency 1: the second waits for the first, then runs its own 10 s.
    assert.strictEqual(answer("second.1")!.at, start + 20_000)
  })

  it("a worker stopped or lost under its calls answers Refused Unavailable at that instant; later calls are refused", () => {
    const { engine, port, capacity, call, answer, answers, launch, busy, published } = workerOf({
      "sim.nodus.dev/call-duration": "1h"
    })
    engine.run(bootMs)
    call("held.1")
    call("held-too.1")
    engine.run(10_000)
    Effect.runSync(port.release("fn", "a", 0))
    for (const id of ["held.1", "held-too.1"]) {
      assert.deepInclude(answer(id), {
        at: 10_000,
        reply: { _tag: "Refused", code: "Unavailable", message: "the worker was lost" }
      })
    }
    assert.isAbove(published(), answer("held.1")!.published)
    assert.isFalse(busy())
    call("late.1")
    assert.deepInclude(answer("late.1")!.reply, { _tag: "Refused", code: "SandboxNotRunning" })
    engine.run(20_000)
    // Each call was answered once: nothing more comes at the calls' virtual end.
    assert.deepStrictEqual(answers.map(({ call }) => call), ["held.1", "held-too.1", "late.1"])
    // A node lost under a call (a fault of the provider) answers at that instant too.
    launch("b")
    engine.run(engine.now + bootMs)
    call("on-b.1", {}, "b")
    engine.at(30_000, () => capacity.loseNode("fn", "b"))
    engine.run(40_000)
    assert.strictEqual(capacity.facts("fn", "b")?.outcome?.type, "NodeLost")
    assert.deepInclude(answer("on-b.1"), {
      at: 30_000,
      reply: { _tag: "Refused", code: "Unavailable", message: "the worker was lost" }
    })
    call("after.1", {}, "b")
    assert.deepInclude(answer("after.1")!.reply, { _tag: "Refused", code: "SandboxNotRunning" })
  })

  it("the same calls at the same virtual times give the same replies at the same times", () => {
    const run = () => {
      const { engine, call, answers, port } = workerOf({
        "sim.nodus.dev/call-duration": "7s",
        "sim.nodus.dev/call-raises": "1"
      }, 2)
      engine.run(bootMs)
      for (let n = 0; n < 6; n++) {
        call(`c${n % 3}.${n}`, n % 2 === 0 ? {} : { annotations: { "sim.nodus.dev/call-duration": `${n}s` } })
        engine.run(engine.now + 1500)
      }
      engine.run(engine.now + 12_000)
      Effect.runSync(port.release("fn", "a", 0))
      return answers.map(({ call, at, reply }) => ({ call, at, reply }))
    }
    const first = run()
    assert.strictEqual(first.length, 6)
    assert.deepStrictEqual(run(), first)
  })
})
