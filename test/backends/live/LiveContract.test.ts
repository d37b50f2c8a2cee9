/**
 * The live driver held to the capacity contract (test/backends/CapacityContract.ts), with real programs: one Node whose
 * in-process agent runs each program in a bubblewrap box. The driver's clock is virtual (the contract moves hours),
 * and a program "works" until its time is up: it waits for a file the test writes into its box at that virtual
 * instant, then exits with its code. Every move of time waits until the agent and the server agree (nothing starting,
 * stopping or unreported), so the suite asserts on settled facts, never on timing.
 */
import { Effect } from "effect"
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { Agent } from "../../../src/backends/live/Agent.ts"
import { LiveCapacity } from "../../../src/backends/live/LiveCapacity.ts"
import { runIdOf, type RunSpec, type SyncRequest, type SyncResponse } from "../../../src/backends/live/Protocol.ts"
import { variantsOf } from "../../../src/core/capacity/Offering.ts"
import { capacityContract } from "../CapacityContract.ts"
import { makeLiveHost } from "./LiveHost.ts"

const T0 = Date.parse("2026-03-01T00:00:00Z")
const hosts = 3
const GiB = 1024 ** 3

/** The program's work is measured in virtual time: it ends when the test says its time is up. */
const waitingProgram = (
  exitCode: number
) => ["sh", "-c", `while [ ! -e /platform/work/done ]; do sleep 0.005; done; exit ${exitCode}`]

const settle = async (agent: Agent, capacity: LiveCapacity) => {
  for (let polls = 0; polls < 2_000; polls++) {
    if (!agent.busy() && agent.appliedVersion() === capacity.versionOf("node-a")) return
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  throw new Error("the agent did not settle within 10 s")
}

const makeDriver = () =>
  Effect.promise(async () => {
    let now = T0
    const dir = mkdtempSync(join(tmpdir(), "nodus-live-contract-"))
    // Boxes run as an unprivileged user, who must be able to reach the runs' areas.
    chmodSync(dir, 0o711)
    const { capacity, agent } = await makeLiveHost({ dir, node: "node-a", cpus: hosts, now: () => now })
    await agent.connect()
    const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
    /** When each started program's work is done, in virtual time. */
    const ends: Array<{ readonly id: string; readonly at: number }> = []
    const port = {
      ...capacity.port,
      start: (owner: string, attempt: string, program: Parameters<typeof capacity.port.start>[2]) =>
        Effect.andThen(
          Effect.sync(() => {
            const workMs = Number(program.annotations["test.nodus.dev/work-ms"])
            if (!ends.some((end) => end.id === runIdOf(owner, attempt))) {
              ends.push({ id: runIdOf(owner, attempt), at: now + workMs })
            }
          }),
          capacity.port.start(owner, attempt, program)
        )
    }
    /** Programs whose work is done by `now` are told so, and the agent has reported their exits. */
    const finishDue = async () => {
      const due = ends.filter((end) => end.at <= now && agent.runIds().includes(end.id))
      for (const end of due) writeFileSync(join(agent.areaOf(end.id), "work", "done"), "")
      for (const end of due) {
        const [owner, attempt] = end.id.split("/") as [string, string]
        for (let polls = 0; !capacity.ended(owner, attempt); polls++) {
          if (polls > 2_000) throw new Error(`${end.id} did not end within 10 s of its work being done`)
          await new Promise((resolve) => setTimeout(resolve, 5))
        }
      }
    }
    /** Virtual time moves in steps, as a wall clock would pass the agent's checkpoint timers. */
    const stepMs = 100_000
    const advance = (ms: number) =>
      Effect.promise(async () => {
        await settle(agent, capacity)
        const target = now + ms
        do {
          now = Math.min(target, now + stepMs)
          await finishDue()
          // The agent was alive all along: its lease is renewed at the new time before leases are looked at.
          await agent.syncNow()
          capacity.tick(now)
          agent.tick()
          await settle(agent, capacity)
        } while (now < target)
      })
    cleanups.push(async () => {
      await agent.stop()
      rmSync(dir, { recursive: true, force: true })
    })
    return {
      port,
      advance,
      variant,
      hosts,
      bootMs: 0,
      program: (workMs: number, exitCode: number) => ({
        annotations: { "test.nodus.dev/work-ms": `${workMs}` },
        workload: {
          image: undefined,
          argv: waitingProgram(exitCode),
          workingDir: undefined,
          env: [],
          secrets: [],
          egress: "Deny" as const,
          memoryBytes: undefined,
          init: undefined
        }
      })
    }
  })

const cleanups: Array<() => Promise<void>> = []

capacityContract("live driver", makeDriver, async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup()
})

describe("a host without bubblewrap", () => {
  it("refuses every run with the package to install, and runs nothing", async () => {
    let ended: { readonly problem: string | undefined } | undefined
    const dir = mkdtempSync(join(tmpdir(), "nodus-no-bwrap-"))
    chmodSync(dir, 0o711)
    const link = {
      hello: async () => ({ epoch: 1, renewMs: 60_000, expiryMs: 120_000 }),
      sync: async (request: SyncRequest): Promise<SyncResponse> => {
        const exited = request.runs.find((run) => run.phase === "Exited")
        if (exited !== undefined) ended = { problem: exited.exit?.problem }
        return {
          _tag: "Desired",
          desired: { version: 1, runs: ended === undefined ? [spec] : [], adopted: [], checkpoints: {} },
          logAcks: {}
        }
      },
      putOutput: async () => undefined,
      getInput: async () => (async function*(): AsyncGenerator<Uint8Array> {})(),
      putCheckpoint: async () => ({ seq: 1 }),
      getCheckpoint: async () => (async function*(): AsyncGenerator<Uint8Array> {})()
    }
    const spec: RunSpec = {
      id: "uid/job-0-1",
      owner: "uid",
      argv: ["true"],
      env: {},
      secretFiles: [],
      workingDir: undefined,
      egress: "Open",
      memoryBytes: undefined,
      init: undefined,
      checkpointIntervalMs: undefined,
      checkpoint: { paths: ["/platform/state"], maxBytes: GiB },
      restore: undefined,
      outputs: [],
      inputs: []
    }
    const missing = "bubblewrap is missing: install the Debian package bubblewrap (apt-get install bubblewrap)"
    const agent = new Agent({
      link,
      hello: {
        node: "bare",
        hostname: "bare",
        agentVersion: "test",
        capacity: { cpus: 1, memoryBytes: GiB, diskBytes: GiB, gpus: [] },
        isolation: { bubblewrap: false, memoryLimits: false, problems: [missing] }
      },
      dataDir: join(dir, "agent"),
      runsDir: join(dir, "runs"),
      support: {
        bwrap: undefined,
        memoryLimits: "none",
        problems: [missing],
        cgroup: undefined,
        pidsCgroup: undefined,
        diskQuotas: "polled",
        runAs: undefined
      },
      hidden: [],
      now: () => Date.now()
    })
    await agent.connect()
    for (let polls = 0; ended === undefined && polls < 200; polls++) {
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    await agent.stop()
    rmSync(dir, { recursive: true, force: true })
    expect(ended?.problem).toContain("apt-get install bubblewrap")
  })
})
