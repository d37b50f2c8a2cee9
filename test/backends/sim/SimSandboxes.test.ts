/**
 * Sandboxes under the simulator behave as live ones do (docs/sandboxes.md, "Under the simulator"): behind the API
 * server's sim backend, with the test clock, a background command runs for its simulated duration and keeps its
 * Sandbox Running (Busy) past idleTimeout, as test/acceptance/SandboxLifecycle.test.ts shows on a live host; once it
 * ends, idleTimeout counts from its end. A main process keeps its Sandbox Busy while it runs; a timeout kills a
 * command; a terminal's shell never makes a Sandbox Busy.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Engine } from "../../../src/backends/sim/Engine.ts"
import { Prng } from "../../../src/backends/sim/Prng.ts"
import { SimCapacity } from "../../../src/backends/sim/SimCapacity.ts"
import * as SimPort from "../../../src/backends/sim/SimPort.ts"
import type { BoxReply, BoxRequest } from "../../../src/core/capacity/Capacity.ts"
import { variantsOf } from "../../../src/core/capacity/Offering.ts"
import type { ExecRequest } from "../../../src/core/SandboxBox.ts"
import { createProject, sandboxesPath, v1 } from "../../apiserver/api/Support.ts"
import { catalog } from "../../core/Fixtures.ts"
import { execRequest } from "../../support/BoxRequests.ts"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"

const minute = 60_000
const project = "agents"

describe("a Sandbox behind the sim backend, on the test clock", () => {
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer({ sim: { speed: 1 } })
    await createProject(server, project)
  })

  afterAll(async () => {
    await server?.stop()
  })

  const path = (name: string) => `${sandboxesPath(project)}/${name}`
  const status = async (name: string): Promise<any> => (await request(server, "GET", path(name))).body.status
  const moveTo = async (at: number) => {
    const reply = await request(server, "POST", `${v1}/simulation/clock`, { body: { to: new Date(at).toISOString() } })
    assert.strictEqual(reply.status, 200, reply.text)
  }
  const now = async (): Promise<number> => Date.parse((await request(server, "GET", `${v1}/simulation/clock`)).body.now)
  const create = async (name: string, spec: Record<string, unknown>, annotations: Record<string, string> = {}) => {
    const reply = await request(server, "POST", sandboxesPath(project), {
      body: {
        apiVersion: "nodus.dev/v1",
        kind: "Sandbox",
        metadata: { name, annotations },
        spec: { image: "python:3.12", ...spec }
      }
    })
    assert.strictEqual(reply.status, 201, reply.text)
  }
  /** Moves the clock a minute at a time until every one of `names` runs (boots take minutes of simulated time). */
  const untilRunning = async (names: ReadonlyArray<string>) => {
    for (let tries = 0; tries < 30; tries++) {
      const phases = await Promise.all(names.map(async (name) => (await status(name))?.phase))
      if (phases.every((phase) => phase === "Running")) return
      await moveTo((await now()) + minute)
    }
    assert.fail(`${names.join(", ")} did not run within 30 simulated minutes`)
  }

  it(
    "a 10-minute background command keeps it Running (Busy) past idleTimeout 5m; it stops 5m after the command ends",
    async () => {
      await create("busy", { lifecycle: { idleTimeout: "5m" } })
      await create("quiet", { lifecycle: { idleTimeout: "5m" } })
      // Its main process runs until the box stops (no sim.nodus.dev/main-duration): Busy all along.
      await create("server", { command: ["python3", "-m", "http.server"], lifecycle: { idleTimeout: "5m" } })
      await untilRunning(["busy", "quiet", "server"])
      const started = await request(server, "POST", `${path("busy")}/commands`, {
        body: { command: ["sleep", "600"], background: true }
      })
      assert.strictEqual(started.status, 201, started.text)
      assert.strictEqual(started.body.phase, "Running")
      const id = started.body.id as string
      const command = async () => (await request(server, "GET", `${path("busy")}/commands/${id}`)).body
      const start = Date.parse((await command()).startTime)
      await moveTo(start + 6 * minute)
      assert.deepInclude(await status("busy"), { phase: "Running", activity: "Busy" })
      assert.strictEqual((await command()).phase, "Running")
      assert.deepInclude(await status("quiet"), { phase: "Stopped", stopReason: "IdleTimeout" })
      // The command ends at its virtual end: exit code 0 after 600 s; the Sandbox is Idle from then on.
      await moveTo(start + 10 * minute + 1000)
      assert.deepInclude(await command(), { phase: "Exited", exitCode: 0, durationMs: 600_000 })
      const idle = await status("busy")
      assert.deepInclude(idle, { phase: "Running", activity: "Idle" })
      assert.strictEqual(idle.lastActivityTime, new Date(start + 10 * minute).toISOString())
      await moveTo(start + 14 * minute)
      assert.strictEqual((await status("busy")).phase, "Running")
      await moveTo(start + 16 * minute)
      assert.deepInclude(await status("busy"), { phase: "Stopped", stopReason: "IdleTimeout" })
      assert.deepInclude(await status("server"), { phase: "Running", activity: "Busy" })
    },
    60_000
  )

  it(
    "a foreground command of exec-duration answers its outcome at once and keeps the Sandbox Busy until its end",
    async () => {
      await create("make", { lifecycle: { idleTimeout: "5m" } }, {
        "sim.nodus.dev/exec-duration": "8m",
        "sim.nodus.dev/exec-exit-code": "2"
      })
      await untilRunning(["make"])
      const ran = await request(server, "POST", `${path("make")}/commands`, { body: { command: ["make", "test"] } })
      assert.strictEqual(ran.status, 200, ran.text)
      assert.deepInclude(ran.body, { exitCode: 2, durationMs: 480_000 })
      const start = Date.parse((await request(server, "GET", `${path("make")}/commands/${ran.body.id}`)).body.startTime)
      await moveTo(start + 7 * minute)
      assert.deepInclude(await status("make"), { phase: "Running", activity: "Busy" })
      await moveTo(start + 12 * minute)
      assert.deepInclude(await status("make"), { phase: "Running", activity: "Idle" })
      await moveTo(start + 14 * minute)
      assert.strictEqual((await status("make")).stopReason, "IdleTimeout")
    },
    60_000
  )
})

describe("the simulated box (SimBoxes over SimCapacity)", () => {
  const variant = variantsOf(catalog.find((offering) => offering.accelerator === undefined) ?? catalog[0]!)[0]!
  const boxOf = (annotations: Record<string, string> = {}, main: ReadonlyArray<string> = []) => {
    const engine = new Engine(0)
    const capacity = new SimCapacity(engine, new Prng("box"), () => ({
      capacity: 1,
      bootMedianMs: 1000,
      bootSigma: 0,
      bootFailureRate: 0,
      preemptionMtbfMs: undefined,
      preemptionTrace: undefined,
      nodeLossMtbfMs: undefined,
      teardownMs: 1000,
      warmStartMs: 1000,
      restoreBytesPerSecond: 2 ** 30
    }))
    const port = Effect.runSync(SimPort.make(capacity))
    capacity.acquire({ owner: "o", namespace: "n", attempt: "a", index: 0, number: 1, variant, recovery: false })
    Effect.runSync(port.start("o", "a", {
      restoreFromSeq: undefined,
      resumeFromUnits: undefined,
      checkpointIntervalMs: undefined,
      keepWarmMs: 0,
      env: {},
      annotations,
      service: true,
      workload: {
        image: "x",
        argv: main,
        workingDir: undefined,
        env: [],
        secrets: [],
        egress: "Deny",
        memoryBytes: undefined,
        init: undefined,
        sandbox: true
      }
    }))
    engine.run(1000)
    const box = (request: BoxRequest): BoxReply => Effect.runSync(port.box!("o", "a", request))
    const exec = (command: string, argv: ReadonlyArray<string>, more: Partial<ExecRequest> = {}) =>
      box(execRequest(command, argv, { keepStdin: true, background: true, ...more }))
    const state = (command: string) =>
      (box({ _tag: "Command", command }) as Extract<BoxReply, { _tag: "Command" }>).state
    const busy = () => capacity.facts("o", "a")?.activity?.busy === true
    return { engine, exec, box, state, busy }
  }

  it("a timeout shorter than the command kills it (SIGKILL, timedOut); a kill ends it; SIM_EXEC_DURATION sets its duration", () => {
    const { engine, exec, box, state, busy } = boxOf()
    exec("slow", ["sleep", "60"], { timeoutMs: 10_000 })
    exec("long", ["train"], { env: { SIM_EXEC_DURATION: "1h" } })
    assert.isTrue(busy())
    engine.run(11_000)
    assert.deepInclude(state("slow"), {
      phase: "Exited",
      signal: "SIGKILL",
      timedOut: true,
      exitCode: undefined,
      durationMs: 10_000
    })
    assert.deepInclude(state("long"), { phase: "Running" })
    assert.deepStrictEqual(box({ _tag: "Stdin", command: "long", data: "", close: true }), { _tag: "Done" })
    assert.deepInclude(box({ _tag: "Stdin", command: "long", data: "", close: false }), {
      _tag: "Refused",
      code: "Conflict"
    })
    assert.deepStrictEqual(box({ _tag: "Kill", command: "long", signal: "SIGTERM" }), { _tag: "Done" })
    assert.deepInclude(state("long"), { phase: "Exited", signal: "SIGTERM", durationMs: 10_000 })
    assert.isFalse(busy())
    assert.deepInclude(box({ _tag: "Kill", command: "long", signal: "SIGKILL" }), { _tag: "Refused", code: "NotFound" })
  })

  it("a terminal's shell never makes the box busy; a main process with main-duration keeps it busy until then", () => {
    const { engine, exec, busy, state } = boxOf({
      "sim.nodus.dev/exec-duration": "5m",
      "sim.nodus.dev/main-duration": "2m"
    }, ["serve"])
    assert.isTrue(busy())
    assert.deepInclude(state("main"), { phase: "Running", startTime: 1000 })
    engine.run(1000 + 2 * minute)
    assert.deepInclude(state("main"), { phase: "Exited", exitCode: 0, durationMs: 2 * minute })
    assert.isFalse(busy())
    exec("term-1", ["script"], { terminal: true })
    assert.isFalse(busy())
    assert.strictEqual(state("term-1").phase, "Exited")
  })
})
