// Functions and FunctionCalls under the sim backend (docs/functions.md, docs/simulator.md "Functions"): created over
// HTTP, served by simulated workers, with the test clock at speed 0 so every instant is the test's own. The rows of
// the spec's table for FunctionCall (retries with the backoff to the second, RemoteError, DeadlineExceeded,
// FunctionDeleted, cancel) and the Function's workers (scaling up and down, Stopped drains and queues).
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { Store } from "../../src/store/Store.ts"
import { createProject, mergePatch, v1 } from "../apiserver/api/Support.ts"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

const project = "fns"
const clockPath = `${v1}/simulation/clock`
const functions = `${v1}/namespaces/${project}/functions`
const calls = `${v1}/namespaces/${project}/functioncalls`

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64")
const unb64 = (text: string) => JSON.parse(Buffer.from(text, "base64").toString("utf8"))

const now = async (server: TestServer): Promise<number> =>
  Date.parse((await request(server, "GET", clockPath)).body.now)

const advance = async (server: TestServer, by: string) => {
  const reply = await request(server, "POST", clockPath, { body: { advance: by } })
  assert.strictEqual(reply.status, 200, reply.text)
}

const createFunction = async (
  server: TestServer,
  name: string,
  spec: Record<string, unknown> = {},
  annotations: Record<string, string> = {}
) => {
  const body = {
    apiVersion: "nodus.dev/v1",
    kind: "Function",
    metadata: { name, annotations },
    spec: { image: "python:3.12", code: { module: "app", qualname: "echo" }, ...spec }
  }
  const reply = await request(server, "POST", functions, { body })
  assert.strictEqual(reply.status, 201, reply.text)
  return reply.body
}

const createCall = async (
  server: TestServer,
  fn: string,
  args: ReadonlyArray<unknown>,
  extra: { spec?: Record<string, unknown>; annotations?: Record<string, string> } = {}
) => {
  const body = {
    apiVersion: "nodus.dev/v1",
    kind: "FunctionCall",
    metadata: { generateName: `${fn}-`, annotations: extra.annotations ?? {} },
    spec: { function: fn, input: { encoding: "JSON", inline: b64({ args, kwargs: {} }) }, ...extra.spec }
  }
  const reply = await request(server, "POST", calls, { body })
  assert.strictEqual(reply.status, 201, reply.text)
  return reply.body
}

const read = async (server: TestServer, path: string) => {
  const reply = await request(server, "GET", path)
  assert.strictEqual(reply.status, 200, reply.text)
  return reply.body
}

/** Waits (real time) until the object's status satisfies `done`; the clock does not move meanwhile. */
const until = (server: TestServer, path: string, done: (status: any) => boolean) =>
  eventually(`${path} to change`, () => read(server, path), {
    until: (object) => done(object.status ?? {}),
    timeoutMs: 10_000
  })

/** Moves the clock in steps until the object's status satisfies `done`. */
const advanceUntil = async (
  server: TestServer,
  path: string,
  done: (status: any) => boolean,
  step = "5s",
  steps = 60
) => {
  for (let index = 0; index < steps; index++) {
    const object = await read(server, path)
    if (done(object.status ?? {})) return object
    await advance(server, step)
  }
  assert.fail(`${path} did not change as expected: ${JSON.stringify((await read(server, path)).status)}`)
}

/** A Function with a warm worker: minWorkers 1, stepped until it is ready. */
const warmFunction = async (
  server: TestServer,
  name: string,
  spec: Record<string, unknown> = {},
  annotations: Record<string, string> = {}
) => {
  await createFunction(server, name, { scaling: { minWorkers: 1, maxWorkers: 1 }, ...spec }, annotations)
  return advanceUntil(server, `${functions}/${name}`, (status) => (status.workers?.ready ?? 0) === 1)
}

/** Starts a sim-backend server at speed 0 with the project before a describe block's tests, and stops it after. */
const withSimServer = (started: (server: TestServer) => void) => {
  let server: TestServer | undefined
  beforeAll(async () => {
    server = await startTestServer({ sim: { speed: 0 } })
    await createProject(server, project)
    started(server)
  }, 60_000)
  afterAll(() => server?.stop())
}

describe("Functions under the sim backend", () => {
  let server: TestServer
  withSimServer((started) => (server = started))

  it("a call runs on a warm worker for its simulated duration and returns its first argument", async () => {
    const fn = await warmFunction(server, "echo", {}, { "sim.nodus.dev/call-duration": "2s" })
    assert.strictEqual(fn.status.phase, "Running")
    assert.strictEqual(fn.status.conditions.find((c: any) => c.type === "Ready").reason, "WorkersReady")
    const start = await now(server)
    const call = await createCall(server, "echo", [{ answer: 42 }])
    const path = `${calls}/${call.metadata.name}`
    const running = await until(server, path, (status) => status.phase === "Running")
    assert.strictEqual(Date.parse(running.status.startTime), start)
    assert.strictEqual(running.status.worker.epoch, 1)
    assert.match(running.status.worker.attempt, /^echo-\d+$/u)
    const condition = (object: any, type: string) => object.status.conditions.find((c: any) => c.type === type)
    assert.deepInclude(condition(running, "Scheduled"), { status: "True", reason: "Dispatched" })
    assert.deepInclude(condition(running, "Funded"), { status: "True", reason: "Funded" })
    await advance(server, "2s")
    const done = await until(server, path, (status) => status.phase === "Succeeded")
    assert.deepStrictEqual(unb64(done.status.result.inline), { answer: 42 })
    assert.strictEqual(done.status.result.encoding, "JSON")
    assert.match(done.status.result.sha256, /^[0-9a-f]{64}$/u)
    assert.strictEqual(Date.parse(done.status.completionTime) - Date.parse(done.status.startTime), 2_000)
    assert.strictEqual(done.status.retries, 0)
    // Two whole seconds of a worker's time at its rate: a positive exact decimal.
    assert.match(done.status.costUSD, /^0\.\d{1,6}$/u)
    assert.notStrictEqual(done.status.costUSD, "0")
    // The result long poll answers at once for an ended call.
    const polled = await read(server, `${path}/result?timeout=1s`)
    assert.strictEqual(polled.status.phase, "Succeeded")
  })

  it("retries a raising call after initialDelay × coefficient^(n−1), then fails it RemoteError with the error", async () => {
    await warmFunction(server, "raiser", {
      retries: { maxRetries: 2, initialDelay: "1s", backoffCoefficient: "3", maxDelay: "60s" }
    })
    const start = await now(server)
    const call = await createCall(server, "raiser", [1], { annotations: { "sim.nodus.dev/call-raises": "5" } })
    const path = `${calls}/${call.metadata.name}`
    const first = await until(server, path, (status) => status.retries === 1)
    assert.strictEqual(first.status.phase, "Queued")
    assert.match(first.status.message, /retry 1 of 2 in 1s/u)
    assert.deepInclude(first.status.conditions.find((c: any) => c.type === "Scheduled"), {
      status: "False",
      reason: "Backoff"
    })
    await advance(server, "1s")
    const second = await until(server, path, (status) => status.retries === 2)
    assert.match(second.status.message, /retry 2 of 2 in 3s/u)
    await advance(server, "2999ms")
    assert.strictEqual((await read(server, path)).status.phase, "Queued")
    await advance(server, "1ms")
    const failed = await until(server, path, (status) => status.phase === "Failed")
    assert.strictEqual(failed.status.reason, "RemoteError")
    assert.strictEqual(failed.status.error.type, "sim.SimulatedError")
    assert.strictEqual(failed.status.retries, 2)
    assert.strictEqual(failed.status.worker.epoch, 3)
    // Tries at start, start + 1 s, start + 1 s + 3 s: the last one's start and end are 4 s after the first.
    assert.strictEqual(Date.parse(failed.status.startTime), start + 4_000)
    assert.strictEqual(failed.status.completionTime, failed.status.startTime)
  })

  it("a call that raises fewer times than its retries succeeds, counting them", async () => {
    await warmFunction(server, "flaky", { retries: { maxRetries: 3, initialDelay: "2s" } })
    const call = await createCall(server, "flaky", ["ok"], { annotations: { "sim.nodus.dev/call-raises": "1" } })
    const path = `${calls}/${call.metadata.name}`
    await until(server, path, (status) => status.retries === 1)
    await advance(server, "2s")
    const done = await until(server, path, (status) => status.phase === "Succeeded")
    assert.strictEqual(done.status.retries, 1)
    assert.deepStrictEqual(unb64(done.status.result.inline), "ok")
    assert.isUndefined(done.status.error)
  })

  it("a call past its own timeout fails DeadlineExceeded at start + timeout", async () => {
    await warmFunction(server, "slow", { timeout: "60s" }, { "sim.nodus.dev/call-duration": "10m" })
    const call = await createCall(server, "slow", [1], { spec: { timeout: "3s" } })
    const path = `${calls}/${call.metadata.name}`
    const running = await until(server, path, (status) => status.phase === "Running")
    assert.strictEqual(running.spec.timeout, "3s")
    await advance(server, "3s")
    const failed = await until(server, path, (status) => status.phase === "Failed")
    assert.strictEqual(failed.status.reason, "DeadlineExceeded")
    assert.strictEqual(Date.parse(failed.status.completionTime) - Date.parse(failed.status.startTime), 3_000)
  })

  it("Stopped drains the workers to zero and new calls queue; Running serves them; a queued call is cancelled", async () => {
    await warmFunction(server, "pausable")
    const stopped = await mergePatch(server, `${functions}/pausable`, { spec: { state: "Stopped" } })
    assert.strictEqual(stopped.status, 200, stopped.text)
    await advanceUntil(server, `${functions}/pausable`, (status) => status.phase === "Stopped")
    const waiting = await createCall(server, "pausable", ["later"])
    const cancelled = await createCall(server, "pausable", ["never"])
    await advance(server, "1m")
    const queued = await read(server, `${calls}/${waiting.metadata.name}`)
    assert.strictEqual(queued.status.phase, "Queued")
    const fn = await read(server, `${functions}/pausable`)
    assert.strictEqual(fn.status.queue.queued, 2)
    assert.strictEqual(fn.status.workers.ready, 0)
    const cancel = await mergePatch(server, `${calls}/${cancelled.metadata.name}`, { spec: { state: "Cancelled" } })
    assert.strictEqual(cancel.status, 200, cancel.text)
    await advance(server, "1s")
    const gone = await until(server, `${calls}/${cancelled.metadata.name}`, (status) => status.phase === "Cancelled")
    assert.strictEqual(gone.status.reason, "Cancelled")
    await mergePatch(server, `${functions}/pausable`, { spec: { state: "Running" } })
    const done = await advanceUntil(
      server,
      `${calls}/${waiting.metadata.name}`,
      (status) => status.phase === "Succeeded"
    )
    assert.deepStrictEqual(unb64(done.status.result.inline), "later")
  })

  it("claims take turns between sessions: a later session's call is not stuck behind another session's queue", async () => {
    await warmFunction(server, "turns", {}, { "sim.nodus.dev/call-duration": "10s" })
    const a = []
    for (const index of [1, 2, 3]) a.push(await createCall(server, "turns", [`a${index}`], { spec: { session: "a" } }))
    const b = await createCall(server, "turns", ["b1"], { spec: { session: "b" } })
    await until(server, `${calls}/${a[0]!.metadata.name}`, (status) => status.phase === "Running")
    const started: Record<string, number> = {}
    for (let step = 0; step < 8 && Object.keys(started).length < 4; step++) {
      for (const call of [...a, b]) {
        const status = (await read(server, `${calls}/${call.metadata.name}`)).status ?? {}
        if (status.startTime !== undefined) {
          started[unb64(call.spec.input.inline).args[0]] = Date.parse(status.startTime)
        }
      }
      await advance(server, "10s")
    }
    const order = Object.entries(started).sort((x, y) => x[1] - y[1]).map(([name]) => name)
    assert.deepStrictEqual(order, ["a1", "b1", "a2", "a3"])
  })

  it("a running call cancelled is Cancelling until its worker answers, then Cancelled with no result", async () => {
    await warmFunction(server, "cancelling", {}, { "sim.nodus.dev/call-duration": "30s" })
    const call = await createCall(server, "cancelling", ["x"])
    const path = `${calls}/${call.metadata.name}`
    await until(server, path, (status) => status.phase === "Running")
    const patched = await mergePatch(server, path, { spec: { state: "Cancelled" } })
    assert.strictEqual(patched.status, 200, patched.text)
    await advance(server, "1s")
    assert.strictEqual((await until(server, path, (status) => status.phase === "Cancelling")).status.reason, undefined)
    await advance(server, "30s")
    const done = await until(server, path, (status) => status.phase === "Cancelled")
    assert.strictEqual(done.status.reason, "Cancelled")
    assert.isUndefined(done.status.result)
  })

  it("deleting a Function fails its unfinished calls FunctionDeleted", async () => {
    await warmFunction(server, "doomed", {}, { "sim.nodus.dev/call-duration": "1h" })
    const call = await createCall(server, "doomed", [1])
    const path = `${calls}/${call.metadata.name}`
    await until(server, path, (status) => status.phase === "Running")
    const deleted = await request(server, "DELETE", `${functions}/doomed`)
    assert.strictEqual(deleted.status, 200, deleted.text)
    await advance(server, "1s")
    const failed = await until(server, path, (status) => status.phase === "Failed")
    assert.strictEqual(failed.status.reason, "FunctionDeleted")
  })

  it("a call whose Function is deleted before the runtime ever served it ends FunctionDeleted too", async () => {
    await createFunction(server, "ephemeral")
    const call = await createCall(server, "ephemeral", [1])
    const deleted = await request(server, "DELETE", `${functions}/ephemeral`)
    assert.strictEqual(deleted.status, 200, deleted.text)
    const failed = await until(server, `${calls}/${call.metadata.name}`, (status) => status.phase === "Failed")
    assert.strictEqual(failed.status.reason, "FunctionDeleted")
  })

  it("scales workers up to maxWorkers for its calls, and back to zero after scaledownWindow", async () => {
    await createFunction(server, "wide", {
      scaling: { minWorkers: 0, maxWorkers: 2, targetConcurrency: 1, scaledownWindow: "30s" }
    }, { "sim.nodus.dev/call-duration": "4m" })
    const idle = await advanceUntil(server, `${functions}/wide`, (status) => status.phase === "Running")
    assert.strictEqual(idle.status.workers.ready, 0)
    const made = [
      await createCall(server, "wide", [1]),
      await createCall(server, "wide", [2]),
      await createCall(server, "wide", [3])
    ]
    // A host's boot is drawn from the provider's model (minutes, with a tail): step by half a minute.
    const busy = await advanceUntil(server, `${functions}/wide`, (status) => (status.workers?.busy ?? 0) === 2, "30s")
    assert.strictEqual(busy.status.queue.running, 2)
    // Never more workers than maxWorkers, whatever the queue.
    assert.strictEqual(busy.status.workers.ready + busy.status.workers.starting, 2)
    for (const call of made) {
      await advanceUntil(server, `${calls}/${call.metadata.name}`, (status) => status.phase === "Succeeded", "30s")
    }
    const after = await read(server, `${functions}/wide`)
    assert.isAbove(after.status.workers.ready + after.status.workers.draining, 0)
    const down = await advanceUntil(
      server,
      `${functions}/wide`,
      (status) =>
        (status.workers?.ready ?? 0) + (status.workers?.draining ?? 0) + (status.workers?.starting ?? 0) === 0,
      "10s"
    )
    assert.strictEqual(down.status.phase, "Running")
  })
})

describe("FunctionCalls across a server restart", () => {
  it(
    "a running call is recovered on a new worker (recoveries 1) and a retry keeps the rest of its backoff",
    async () => {
      const store = await Effect.runPromise(MemoryStore.make)
      const startOver = () => startTestServer({ sim: { speed: 0 }, store: Layer.succeed(Store, store) })
      const first = await startOver()
      let running: any
      let retrying: any
      let retryTime: number
      try {
        await createProject(first, project)
        await warmFunction(first, "durable", { retries: { maxRetries: 1, initialDelay: "10m", maxDelay: "10m" } }, {
          "sim.nodus.dev/call-duration": "30s"
        })
        running = await createCall(first, "durable", ["kept"])
        retrying = await createCall(first, "durable", ["again"], { annotations: { "sim.nodus.dev/call-raises": "1" } })
        // The worker takes one call at a time: the first runs 30 s, then the second runs 30 s, raises and waits 10
        // minutes.
        await until(first, `${calls}/${running.metadata.name}`, (status) => status.phase === "Running")
        await advance(first, "30s")
        await until(first, `${calls}/${retrying.metadata.name}`, (status) => status.phase === "Running")
        await advance(first, "30s")
        const waiting = await until(first, `${calls}/${retrying.metadata.name}`, (status) => status.retries === 1)
        retryTime = Date.parse(waiting.status.retryTime)
        // It raised at the end of its 30 s try: the retry is 10 minutes after that.
        assert.strictEqual(retryTime, Date.parse(waiting.status.startTime) + 30_000 + 10 * 60_000)
        const third = await createCall(first, "durable", ["lost"])
        await until(first, `${calls}/${third.metadata.name}`, (status) => status.phase === "Running")
        running = third
      } finally {
        await first.stop()
      }
      const second = await startOver()
      try {
        const recovered = await advanceUntil(
          second,
          `${calls}/${running.metadata.name}`,
          (status) => status.phase === "Succeeded",
          "10s"
        )
        assert.strictEqual(recovered.status.recoveries, 1)
        assert.strictEqual(recovered.status.worker.epoch, 2)
        assert.deepStrictEqual(unb64(recovered.status.result.inline), "lost")
        // The simulator's model counts a call's raises per process, so the retry raises again: its last retry is used
        // up.
        const later = await advanceUntil(
          second,
          `${calls}/${retrying.metadata.name}`,
          (status) => status.phase === "Failed",
          "1m",
          30
        )
        // Dispatched again no earlier than its retryTime, though the server restarted meanwhile.
        assert.isAtLeast(Date.parse(later.status.startTime), retryTime!)
        assert.deepStrictEqual([later.status.retries, later.status.reason, later.status.worker.epoch], [
          1,
          "RemoteError",
          2
        ])
      } finally {
        await second.stop()
      }
    },
    120_000
  )
})

describe("FunctionCall retention", () => {
  let server: TestServer
  withSimServer((started) => (server = started))

  it("an ended call is kept 7 days after its completionTime, then deleted", async () => {
    // No worker stays (minWorkers 0): nothing but the retention wakes the Function days later.
    await createFunction(server, "kept", { scaling: { minWorkers: 0, scaledownWindow: "0s" } })
    const call = await createCall(server, "kept", ["x"])
    const path = `${calls}/${call.metadata.name}`
    const done = await advanceUntil(server, path, (status) => status.phase === "Succeeded")
    const ended = Date.parse(done.status.completionTime)
    await advance(server, "167h")
    assert.strictEqual((await request(server, "GET", path)).status, 200)
    assert.strictEqual((await read(server, `${functions}/kept`)).status.workers.ready, 0)
    await advance(server, "2h")
    // Deleted within the hour after its 7 days.
    assert.isAtLeast(await now(server), ended + 7 * 24 * 3_600_000)
    await eventually(
      `${path} to go`,
      async () => (await request(server, "GET", path)).status,
      { until: (status) => status === 404, timeoutMs: 10_000 }
    )
  })
})
