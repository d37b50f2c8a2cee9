/**
 * The live driver's own rules, beyond the capacity contract, spoken to through the agent protocol directly (no real
 * host): leases and their epochs, project scopes, how exits become outcomes, and secret values scrubbed from logs.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { LiveCapacity, type NodeScope } from "../../../src/backends/live/LiveCapacity.ts"
import type { Exit, Hello, RunReport } from "../../../src/backends/live/Protocol.ts"
import { scrub } from "../../../src/backends/live/Scrub.ts"
import type { ProgramRequest } from "../../../src/core/capacity/Capacity.ts"
import { variantsOf } from "../../../src/core/capacity/Offering.ts"
import { nodeOfferings } from "../../../src/core/capacity/PoolOffering.ts"

const T0 = Date.parse("2026-03-01T00:00:00Z")
const GiB = 1024 ** 3
const local: NodeScope = { pool: "local", namespace: undefined }

const hello = (node = "n1", cpus = 2): Hello => ({
  node,
  hostname: node,
  agentVersion: "test",
  capacity: { cpus, memoryBytes: 8 * GiB, diskBytes: 100 * GiB, gpus: [] },
  isolation: { bubblewrap: true, memoryLimits: true, problems: [] }
})

const program: ProgramRequest = {
  restoreFromSeq: undefined,
  resumeFromUnits: undefined,
  checkpointIntervalMs: undefined,
  keepWarmMs: 0,
  env: { PLATFORM_INDEX: "0" },
  annotations: {},
  workload: {
    image: undefined,
    argv: ["true"],
    workingDir: undefined,
    env: [],
    secrets: [],
    egress: "Deny",
    memoryBytes: undefined,
    init: undefined
  }
}

const exit = (fields: Partial<Exit>): Exit => ({
  exitCode: 0,
  signal: undefined,
  oomKilled: false,
  stopped: false,
  problem: undefined,
  setupFailed: false,
  lastLines: [],
  outputs: [],
  ...fields
})

const report = (id: string, fields: Partial<RunReport> = {}): RunReport => ({
  id,
  phase: "Running",
  exit: undefined,
  checkpoint: undefined,
  checkpointFailures: 0,
  suspend: undefined,
  logOffset: 0,
  log: "",
  ...fields
})

const setup = (secretValues: ReadonlyArray<string> = []) => {
  let now = T0
  const logs: Array<string> = []
  const capacity = Effect.runSync(LiveCapacity.make({
    now: () => now,
    resolve: () => Effect.succeed({ env: {}, secretFiles: [], secretValues, inputs: new Map() }),
    appendLog: (_owner, _attempt, text) => logs.push(text),
    storeOutput: async () => ({ sha256: "0".repeat(64), sizeBytes: 0 }),
    checkpoints: {
      store: async () => ({ sha256: "0".repeat(64), sizeBytes: 0 }),
      open: async () => undefined,
      latest: async () => 0
    }
  }))
  return { capacity, logs, advance: (ms: number) => (now += ms), now: () => now }
}

/** A run placed on the only Node and started: its id. */
const launch = (capacity: LiveCapacity, namespace = "demo") => {
  const variant = variantsOf(capacity.catalog(namespace)[0]!)[0]!
  const facts = Effect.runSync(
    capacity.port.acquire({
      owner: "uid-1",
      namespace,
      attempt: "job-0-1",
      index: 0,
      number: 1,
      variant,
      recovery: false
    })
  )
  Effect.runSync(capacity.port.start("uid-1", "job-0-1", program))
  return facts
}

const facts = (capacity: LiveCapacity) => Effect.runSync(capacity.port.facts("uid-1", "job-0-1"))!

describe("leases", () => {
  it("refuses everything sent under an older epoch once the Node said hello again", async () => {
    const { capacity } = setup()
    const first = capacity.hello(hello(), local)
    launch(capacity)
    const second = capacity.hello(hello(), local)
    expect(second.epoch).toBe(first.epoch + 1)
    const stale = await capacity.sync({
      node: "n1",
      epoch: first.epoch,
      version: 0,
      runs: [report("uid-1/job-0-1", { phase: "Exited", exit: exit({}) })],
      waitMs: 0
    }, local)
    expect(stale._tag).toBe("Stale")
    // The run of the old connection was lost with it, not taken as Succeeded from the stale report.
    expect(facts(capacity).outcome).toEqual({ type: "NodeLost" })
  })

  it("makes a Node NotReady and its runs NodeLost when its lease lapses, and takes nothing on it after", async () => {
    const { capacity, advance, now } = setup()
    const lease = capacity.hello(hello(), local)
    launch(capacity)
    advance(5_000)
    await capacity.sync(
      { node: "n1", epoch: lease.epoch, version: 0, runs: [report("uid-1/job-0-1")], waitMs: 0 },
      local
    )
    const renewedAt = now()
    expect(facts(capacity).phase).toBe("Running")
    advance(lease.expiryMs - 1)
    capacity.tick(now())
    expect(facts(capacity).phase).toBe("Running")
    advance(1)
    capacity.tick(now())
    // It ended when it was last known alive, its Node's last renewal, not when the lapse was noticed: what it is
    // charged stops there.
    expect(facts(capacity)).toMatchObject({
      phase: "Ended",
      outcome: { type: "NodeLost" },
      endedAt: renewedAt,
      stoppingAt: renewedAt,
      releasedAt: renewedAt
    })
    expect(capacity.nodeViews()[0]!.ready).toBe(false)
    const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
    expect(capacity.port.market("demo").available(variant)).toBe(0)
  })

  it("is renewed by every sync", async () => {
    const { capacity, advance, now } = setup()
    const lease = capacity.hello(hello(), local)
    for (let beat = 0; beat < 10; beat++) {
      advance(lease.renewMs)
      await capacity.sync({ node: "n1", epoch: lease.epoch, version: 0, runs: [], waitMs: 0 }, local)
      capacity.tick(now())
    }
    expect(capacity.nodeViews()[0]!.ready).toBe(true)
  })
})

describe("scopes", () => {
  it("keeps an enrolled Node to its own project: other projects neither rank nor get it", () => {
    const { capacity } = setup()
    capacity.hello(hello("edge", 4), { pool: "edge", namespace: "team-a" })
    expect(capacity.catalog("team-a").map((offering) => offering.id)).toEqual(["edge"])
    expect(capacity.catalog("team-b")).toEqual([])
    const variant = variantsOf(capacity.catalog("team-a")[0]!)[0]!
    expect(capacity.port.market("team-a").available(variant)).toBe(4)
    expect(capacity.port.market("team-b").available(variant)).toBe(0)
    const refused = Effect.runSync(
      capacity.port.acquire({
        owner: "other",
        namespace: "team-b",
        attempt: "x-0-1",
        index: 0,
        number: 1,
        variant,
        recovery: false
      })
    )
    expect(refused.outcome).toEqual({ type: "Unavailable" })
  })

  it("runs one program per vCPU of a Node at a time", () => {
    const { capacity } = setup()
    capacity.hello(hello("n1", 2), local)
    const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
    const acquire = (attempt: string) =>
      Effect.runSync(
        capacity.port.acquire({ owner: "o", namespace: "demo", attempt, index: 0, number: 1, variant, recovery: false })
      )
    expect(acquire("a").phase).toBe("Provisioning")
    expect(acquire("b").phase).toBe("Provisioning")
    expect(acquire("c").outcome).toEqual({ type: "Unavailable" })
  })

  it("gives the slot back of a run its owner let go of and forgot before its agent reported the exit (a shard lost)", async () => {
    const { capacity } = setup()
    const lease = capacity.hello(hello("n1", 1), local)
    launch(capacity)
    const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
    // A process that loses the object's shard releases its runs and forgets the object at once (Reconciler.dropShards).
    Effect.runSync(capacity.port.release("uid-1", "job-0-1", 0))
    Effect.runSync(capacity.port.forget("uid-1"))
    await capacity.sync({
      node: "n1",
      epoch: lease.epoch,
      version: 0,
      runs: [
        report("uid-1/job-0-1", {
          phase: "Exited",
          exit: exit({ stopped: true, exitCode: undefined, signal: "SIGKILL" })
        })
      ],
      waitMs: 0
    }, local)
    const next = Effect.runSync(
      capacity.port.acquire({
        owner: "uid-2",
        namespace: "demo",
        attempt: "job-0-1",
        index: 0,
        number: 1,
        variant,
        recovery: false
      })
    )
    expect(next.phase).toBe("Provisioning")
  })
})

describe("runs handed over to another server (a rebalance)", () => {
  it("go on, holding their slot, while that server asks after them; a lease without a question stops them", async () => {
    const { capacity, advance, now } = setup()
    const lease = capacity.hello(hello("n1", 1), local)
    launch(capacity)
    await capacity.sync(
      { node: "n1", epoch: lease.epoch, version: 0, runs: [report("uid-1/job-0-1")], waitMs: 0 },
      local
    )
    Effect.runSync(capacity.port.handOver!("uid-1"))
    const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
    const other = () =>
      Effect.runSync(
        capacity.port.acquire({
          owner: "uid-2",
          namespace: "demo",
          attempt: `x-${now()}`,
          index: 0,
          number: 1,
          variant,
          recovery: false
        })
      )
    // Half a lease at a time, the host's agent reporting (its lease renewed).
    const half = async (runs = [report("uid-1/job-0-1")]) => {
      advance(lease.expiryMs / 2)
      await capacity.sync({ node: "n1", epoch: lease.epoch, version: 0, runs, waitMs: 0 }, local)
      capacity.tick(now())
    }
    for (let step = 0; step < 4; step++) {
      await half()
      expect(capacity.peerFacts("uid-1", "job-0-1")?.phase).toBe("Running")
    }
    expect(other().outcome).toEqual({ type: "Unavailable" })
    // Nobody asks for a lease: it is stopped, and once its exit is reported its slot goes back and it is forgotten.
    await half()
    await half()
    await half([
      report("uid-1/job-0-1", {
        phase: "Exited",
        exit: exit({ stopped: true, exitCode: undefined, signal: "SIGKILL" })
      })
    ])
    expect(other().phase).toBe("Provisioning")
    expect(capacity.peerFacts("uid-1", "job-0-1")).toBeUndefined()
  })
})

describe("exits", () => {
  const ended = async (fields: Partial<Exit>) => {
    const { capacity } = setup(["hunter2-secret"])
    const lease = capacity.hello(hello(), local)
    launch(capacity)
    await capacity.sync({
      node: "n1",
      epoch: lease.epoch,
      version: 0,
      runs: [report("uid-1/job-0-1", { phase: "Exited", exit: exit(fields) })],
      waitMs: 0
    }, local)
    return facts(capacity)
  }

  it("are outcomes: 0 Succeeded, a code Failed with the last lines, OOM, a host that could not start it BootFailed", async () => {
    expect((await ended({})).outcome).toEqual({ type: "Succeeded" })
    expect((await ended({ exitCode: 3, lastLines: ["two", "it broke"] })).outcome).toEqual({
      type: "Failed",
      exitCode: 3,
      message: "two\nit broke"
    })
    expect((await ended({ exitCode: undefined, signal: "SIGKILL", oomKilled: true })).outcome).toEqual({
      type: "OOMKilled"
    })
    expect((await ended({ exitCode: undefined, signal: "SIGSEGV" })).outcome).toEqual({ type: "Failed", exitCode: 139 })
    expect((await ended({ exitCode: 1, problem: "the host could not start it", setupFailed: true })).outcome).toEqual({
      type: "BootFailed"
    })
  })

  it("show no secret value: log lines in the outcome are scrubbed", async () => {
    const outcome = (await ended({ exitCode: 1, lastLines: ["password=hunter2-secret"] })).outcome
    expect(outcome).toEqual({ type: "Failed", exitCode: 1, message: "password=[redacted]" })
  })
})

describe("checkpoints", () => {
  it("are numbered on from the highest kept, each its own number, when two uploads race after a restart", async () => {
    const stored: Array<number> = []
    const capacity = Effect.runSync(LiveCapacity.make({
      now: () => T0,
      resolve: () => Effect.succeed({ env: {}, secretFiles: [], secretValues: [], inputs: new Map() }),
      appendLog: () => undefined,
      storeOutput: async () => ({ sha256: "0".repeat(64), sizeBytes: 0 }),
      checkpoints: {
        // A restarted server reads the highest number kept, slowly: both uploads wait for it.
        latest: () => new Promise((resolve) => setTimeout(() => resolve(7), 20)),
        store: async (_owner, _namespace, seq) => {
          stored.push(seq)
          return { sha256: "0".repeat(64), sizeBytes: 0 }
        },
        open: async () => undefined
      }
    }))
    const lease = capacity.hello(hello(), local)
    launch(capacity)
    await capacity.sync(
      { node: "n1", epoch: lease.epoch, version: 0, runs: [report("uid-1/job-0-1")], waitMs: 0 },
      local
    )
    const target = { node: "n1", epoch: lease.epoch, run: "uid-1/job-0-1", name: "checkpoint" }
    const empty = async function*(): AsyncIterable<Uint8Array> {}
    const answers = await Promise.all([
      capacity.putCheckpoint(target, local, empty()),
      capacity.putCheckpoint(target, local, empty())
    ])
    expect(answers.map((answer) => answer?.seq).sort()).toEqual([8, 9])
    expect(stored.sort()).toEqual([8, 9])
  })
})

describe("logs", () => {
  it("are kept once each, in order, scrubbed of the run's secret values", async () => {
    const { capacity, logs } = setup()
    const lease = capacity.hello(hello(), local)
    const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
    Effect.runSync(
      capacity.port.acquire({
        owner: "uid-1",
        namespace: "demo",
        attempt: "job-0-1",
        index: 0,
        number: 1,
        variant,
        recovery: false
      })
    )
    await Effect.runPromise(capacity.port.start("uid-1", "job-0-1", program))
    const first = await capacity.sync({
      node: "n1",
      epoch: lease.epoch,
      version: 0,
      runs: [report("uid-1/job-0-1", { log: "héllo\n" })],
      waitMs: 0
    }, local)
    expect(first._tag === "Desired" && first.logAcks["uid-1/job-0-1"]).toBe(Buffer.byteLength("héllo\n"))
    // The same text again (its acknowledgement was lost) is not kept twice.
    await capacity.sync({
      node: "n1",
      epoch: lease.epoch,
      version: 0,
      runs: [report("uid-1/job-0-1", { log: "héllo\n" })],
      waitMs: 0
    }, local)
    expect(logs).toEqual(["héllo\n"])
  })

  it("scrub every secret value of four characters or more", () => {
    expect(scrub("a hunter2 and abc", ["hunter2", "abc"])).toBe("a [redacted] and abc")
  })
})

describe("runs a previous server process left live", () => {
  const offered = (capacity: LiveCapacity, node = "n1") => {
    const variant = variantsOf(
      nodeOfferings({ pool: "local", node, cpus: 2, memoryBytes: 8 * GiB, diskBytes: 100 * GiB, gpus: [] })[0]!
    )[0]!
    const facts = {
      name: "job-0-1",
      index: 0,
      number: 1,
      variant,
      warmReuse: false,
      recovery: false,
      restoreFromSeq: undefined,
      requestedAt: T0 - 60_000,
      bootedAt: T0 - 50_000,
      endedAt: undefined,
      stoppingAt: undefined,
      releasedAt: undefined,
      phase: "Running" as const,
      outcome: undefined,
      checkpoint: undefined,
      checkpointFailures: 0,
      suspend: undefined,
      progressUnits: undefined
    }
    return Effect.runSync(capacity.port.adopt!("uid-1", "demo", facts))
  }
  const remote: NodeScope = { pool: "edge", namespace: "demo" }

  it("are kept when their Node's agent says hello holding them, and end as its reports say", async () => {
    const { capacity } = setup()
    expect(offered(capacity).phase).toBe("Running")
    const lease = capacity.hello({ ...hello(), runs: ["uid-1/job-0-1"] }, remote)
    const answer = await capacity.sync({ node: "n1", epoch: lease.epoch, version: 0, runs: [], waitMs: 0 }, remote)
    expect(answer._tag === "Desired" && answer.desired.adopted).toEqual(["uid-1/job-0-1"])
    await capacity.sync({
      node: "n1",
      epoch: lease.epoch,
      version: 0,
      runs: [report("uid-1/job-0-1", { phase: "Exited", exit: exit({}) })],
      waitMs: 0
    }, remote)
    expect(facts(capacity).outcome).toEqual({ type: "Succeeded" })
  })

  it("are kept when the agent said hello first and their records come after", () => {
    const { capacity } = setup()
    capacity.hello({ ...hello(), runs: ["uid-1/job-0-1"] }, remote)
    expect(offered(capacity).phase).toBe("Running")
    expect(capacity.nodeViews()[0]!.runs).toBe(1)
  })

  it("are lost when their Node's agent does not hold them, or says nothing within a lease", () => {
    const first = setup()
    offered(first.capacity)
    first.capacity.hello({ ...hello(), runs: [] }, remote)
    expect(facts(first.capacity).outcome).toEqual({ type: "NodeLost" })
    const second = setup()
    offered(second.capacity)
    second.advance(40_000)
    second.capacity.tick(second.now())
    expect(facts(second.capacity).outcome).toEqual({ type: "NodeLost" })
  })

  it("lost, end when the previous process last knew their Node alive, not when this one found them gone", () => {
    // The previous process recorded the Node's last renewal 20 s before this one started (NodeLiveness.ts).
    const lastRenewal = T0 - 20_000
    const first = setup()
    first.capacity.rememberAlive("demo/n1", lastRenewal)
    offered(first.capacity)
    first.advance(3_000)
    first.capacity.hello({ ...hello(), runs: [] }, remote)
    expect(facts(first.capacity)).toMatchObject({
      outcome: { type: "NodeLost" },
      endedAt: lastRenewal,
      releasedAt: lastRenewal
    })
    const second = setup()
    second.capacity.rememberAlive("demo/n1", lastRenewal)
    offered(second.capacity)
    second.advance(40_000)
    second.capacity.tick(second.now())
    expect(facts(second.capacity)).toMatchObject({ outcome: { type: "NodeLost" }, endedAt: lastRenewal })
  })

  it("stopped before they are claimed, take no slot of their Node", () => {
    const { capacity } = setup()
    capacity.remember("n1", remote, hello().capacity)
    offered(capacity)
    Effect.runSync(capacity.port.release("uid-1", "job-0-1", 0))
    expect(facts(capacity).outcome).toEqual({ type: "Stopped" })
    capacity.hello({ ...hello(), runs: ["uid-1/job-0-1"] }, remote)
    expect(capacity.nodeViews()[0]!.runs).toBe(0)
  })

  it("let go, after a lease, of what an agent holds that no record claims", async () => {
    const { capacity, advance, now } = setup()
    const lease = capacity.hello({ ...hello(), runs: ["uid-9/stray-0-1"] }, remote)
    const before = await capacity.sync({ node: "n1", epoch: lease.epoch, version: 0, runs: [], waitMs: 0 }, remote)
    expect(before._tag === "Desired" && before.desired.adopted).toEqual(["uid-9/stray-0-1"])
    advance(lease.expiryMs / 2)
    await capacity.sync({ node: "n1", epoch: lease.epoch, version: 0, runs: [], waitMs: 0 }, remote)
    advance(lease.expiryMs / 2)
    capacity.tick(now())
    const after = await capacity.sync({ node: "n1", epoch: lease.epoch, version: 0, runs: [], waitMs: 0 }, remote)
    expect(after._tag === "Desired" && after.desired.adopted).toEqual([])
  })
})

describe("a box's start", () => {
  it("is not a boot when the box ended before its supervisor was up (a Job's program that ended at once did run)", async () => {
    const { capacity } = setup()
    const lease = capacity.hello(hello(), local)
    const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
    const box: ProgramRequest = {
      ...program,
      service: true,
      workload: { ...program.workload!, argv: [], sandbox: true }
    }
    Effect.runSync(
      capacity.port.acquire({
        owner: "uid-1",
        namespace: "demo",
        attempt: "box-1",
        index: 0,
        number: 1,
        variant,
        recovery: false
      })
    )
    Effect.runSync(capacity.port.start("uid-1", "box-1", box))
    launch(capacity)
    await capacity.sync({
      node: "n1",
      epoch: lease.epoch,
      version: 0,
      waitMs: 0,
      runs: [
        report("uid-1/box-1", {
          phase: "Exited",
          exit: exit({ exitCode: undefined, setupFailed: true, problem: "the box ended before it was ready" })
        }),
        report("uid-1/job-0-1", { phase: "Exited", exit: exit({ exitCode: 0 }) })
      ]
    }, local)
    expect(Effect.runSync(capacity.port.facts("uid-1", "box-1"))).toMatchObject({
      phase: "Ended",
      outcome: { type: "BootFailed" },
      bootedAt: undefined
    })
    expect(facts(capacity)).toMatchObject({ phase: "Ended", outcome: { type: "Succeeded" } })
    expect(facts(capacity).bootedAt).toBeDefined()
  })
})
