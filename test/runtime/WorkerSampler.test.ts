/**
 * The estimate sampler on a worker thread (src/runtime/WorkerSampler.ts; docs/billing.md, "Estimates"): it answers
 * what the in-process sampler answers; a crash fails the requests the worker held, with the reason, and the next
 * request starts a new worker; at most `queueMax` requests wait; the thread starts with the first request and is
 * gone once the layer's scope closes. A stand-in worker (test/support/StandInSamplerWorker.ts) crashes on request.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { readdirSync } from "node:fs"
import { simRunSampler } from "../../src/backends/sim/RunSampler.ts"
import { currentPricebook } from "../../src/core/billing/Pricebook.ts"
import { defaultProviderModels } from "../../src/core/capacity/ProviderModels.ts"
import type { SampleRequest } from "../../src/kinds/job/JobSampling.ts"
import { EstimateSampler } from "../../src/runtime/EstimateSampler.ts"
import * as WorkerSampler from "../../src/runtime/WorkerSampler.ts"
import { jobSpec, variant } from "../core/Fixtures.ts"

const standIn = new URL("../support/StandInSamplerWorker.ts", import.meta.url)
const simulator = new URL("../../src/backends/sim/EstimateWorker.ts", import.meta.url)

const a10 = variant("a10-1x-us")
const requestOf = (seed: string): SampleRequest => ({
  spec: jobSpec({ expectedDuration: "40m", resources: { gpu: { type: ["A10"] } } }),
  variant: a10,
  model: defaultProviderModels()(a10),
  pricebook: currentPricebook,
  seed
})

/** The process's threads (Linux): a worker thread is one of them while it runs. */
const threads = () => readdirSync("/proc/self/task").length

/** The sampler of `layer`, built in a scope the test closes itself. */
const open = (layer: Layer.Layer<EstimateSampler>) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const sampler = Context.get(yield* Layer.buildWithScope(layer, scope), EstimateSampler)
    return { sampler, close: Scope.close(scope, Exit.void) }
  })

const failureOf = <A, E extends { readonly message: string }>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.flip(effect), (error) => error.message)

describe("the estimate sampler on a worker thread", () => {
  it.live("answers what the simulator's sampler answers in process", () =>
    Effect.gen(function*() {
      const { sampler, close } = yield* open(WorkerSampler.layer(simulator))
      const inWorker = yield* sampler.sample(requestOf("same"))
      const inProcess = yield* EstimateSampler.use((local) => local.sample(requestOf("same"))).pipe(
        Effect.provide(EstimateSampler.layerFrom(simRunSampler))
      )
      assert.deepStrictEqual(inWorker, inProcess)
      yield* close
    }))

  it.live("a crash fails every request the worker held, with the reason; the next request starts a new worker", () =>
    Effect.gen(function*() {
      const { sampler, close } = yield* open(WorkerSampler.layer(standIn))
      const waiting = yield* Effect.forkChild(failureOf(sampler.sample(requestOf("delay-2000"))))
      yield* Effect.yieldNow
      assert.include(
        yield* failureOf(sampler.sample(requestOf("throw"))),
        "the estimate worker crashed: the stand-in crashed"
      )
      assert.include(yield* Fiber.join(waiting), "the estimate worker crashed")
      assert.strictEqual((yield* sampler.sample(requestOf("after"))).cold?.p50, "after")
      assert.include(yield* failureOf(sampler.sample(requestOf("exit"))), "the estimate worker exited with code 3")
      assert.strictEqual((yield* sampler.sample(requestOf("again"))).cold?.p50, "again")
      yield* close
    }))

  it.live("at most queueMax requests wait for the worker; one more fails at once and the others are answered", () =>
    Effect.gen(function*() {
      const { sampler, close } = yield* open(WorkerSampler.layer(standIn, { queueMax: 2 }))
      const first = yield* Effect.forkChild(sampler.sample(requestOf("delay-200")))
      const second = yield* Effect.forkChild(sampler.sample(requestOf("delay-201")))
      yield* Effect.yieldNow
      assert.include(yield* failureOf(sampler.sample(requestOf("third"))), "2 estimates are already waiting")
      assert.deepStrictEqual([(yield* Fiber.join(first)).cold?.p50, (yield* Fiber.join(second)).cold?.p50], [
        "delay-200",
        "delay-201"
      ])
      assert.strictEqual((yield* sampler.sample(requestOf("fourth"))).cold?.p50, "fourth")
      yield* close
    }))

  it.live("the thread starts with the first request and is gone when the layer's scope closes", () =>
    Effect.gen(function*() {
      const before = threads()
      const { sampler, close } = yield* open(WorkerSampler.layer(standIn))
      assert.strictEqual(threads(), before, "no thread before a request")
      yield* sampler.sample(requestOf("a"))
      assert.strictEqual(threads(), before + 1, "one worker thread")
      const waiting = yield* Effect.forkChild(failureOf(sampler.sample(requestOf("delay-2000"))))
      yield* Effect.yieldNow
      yield* close
      assert.strictEqual(threads(), before, "the worker thread is gone")
      assert.include(yield* Fiber.join(waiting), "the estimate worker stopped")
    }))
})
