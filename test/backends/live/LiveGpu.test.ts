/**
 * GPUs on a live host (docs/live.md, "GPUs"), with a real in-process agent and real bubblewrap: the server counts a
 * Node's GPUs, the agent picks which a run gets, and the box sees those device nodes alone — a run without GPUs sees
 * none, and two runs never share one. This host has no GPU, so its "device nodes" are plain files (bwrap binds a file
 * as it binds a device); docs/live.md records the check of the same path on a real one.
 */
import { Effect } from "effect"
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Agent } from "../../../src/backends/live/Agent.ts"
import type { LiveCapacity } from "../../../src/backends/live/LiveCapacity.ts"
import type { ProgramRequest } from "../../../src/core/capacity/Capacity.ts"
import { variantsOf } from "../../../src/core/capacity/Offering.ts"
import { makeLiveHost } from "./LiveHost.ts"

const owner = "job-uid"
let dir: string
let capacity: LiveCapacity
let agent: Agent
const logs = new Map<string, string>()

/** Lists the box's GPU device nodes and what each holds (a test's fake node says which GPU it is). */
const listGpus = "for f in /dev/nvidia*; do [ -e \"$f\" ] && echo \"$f=$(cat $f)\"; done; echo listed"

const program = (script: string): ProgramRequest => ({
  restoreFromSeq: undefined,
  resumeFromUnits: undefined,
  checkpointIntervalMs: undefined,
  keepWarmMs: 0,
  env: {},
  annotations: {},
  workload: {
    image: undefined,
    argv: ["sh", "-c", script],
    workingDir: undefined,
    env: [],
    secrets: [],
    egress: "Deny",
    memoryBytes: undefined,
    init: undefined
  }
})

/** The host's variant with `gpus` GPUs (0: its CPU offering). */
const variant = (gpus: number) => {
  const offering = capacity.catalog("demo").find((candidate) => (candidate.accelerator?.count ?? 0) === gpus)
  if (offering === undefined) throw new Error(`no offering with ${gpus} GPUs`)
  return variantsOf(offering)[0]!
}

const until = async (what: string, check: () => boolean) => {
  for (let polls = 0; polls < 2_000; polls++) {
    if (check()) return
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  throw new Error(`${what} did not happen within 10 s`)
}

const launch = (attempt: string, gpus: number, script: string) => {
  const facts = Effect.runSync(
    capacity.port.acquire({
      owner,
      namespace: "demo",
      attempt,
      index: 0,
      number: 1,
      variant: variant(gpus),
      recovery: false
    })
  )
  expect(facts.phase).not.toBe("Ended")
  Effect.runSync(capacity.port.start(owner, attempt, program(script)))
}

const listed = async (attempt: string) => {
  // A running program's log travels with the next sync; the test does not wait for the long poll's.
  for (let polls = 0; polls < 200 && !(logs.get(attempt) ?? "").includes("listed"); polls++) {
    await agent.syncNow()
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  expect(logs.get(attempt) ?? "").toContain("listed")
  return (logs.get(attempt) ?? "").split("\n").filter((line) => line.startsWith("/dev/nvidia")).sort()
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "nodus-live-gpu-"))
  chmodSync(dir, 0o711)
  const devices = join(dir, "dev")
  mkdirSync(devices, { mode: 0o755 })
  const gpus = [0, 1].map((minor) => {
    const device = join(devices, `nvidia${minor}`)
    writeFileSync(device, `gpu-${minor}`, { mode: 0o644 })
    return { model: "NVIDIA H100 80GB HBM3", memoryMiB: 81_559, device }
  })
  ;({ capacity, agent } = await makeLiveHost({
    dir,
    node: "gpu-host",
    cpus: 4,
    now: () => Date.now(),
    gpus,
    appendLog: (_, attempt, text) => logs.set(attempt, (logs.get(attempt) ?? "") + text)
  }))
  await agent.connect()
})

afterAll(async () => {
  await agent.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe("GPUs on a live host", () => {
  it("offers the Node's GPUs by count, of the model nvidia-smi named", () => {
    expect(capacity.catalog("demo").map((offering) => offering.accelerator?.count ?? 0).sort()).toEqual([0, 1, 2])
    expect(variant(1).offering.accelerator).toMatchObject({ family: "H100", memoryGiB: 79 })
  })

  it("gives a run its GPU alone, another run the other one, and a run without GPUs none", async () => {
    launch("holds-one", 1, `${listGpus}; sleep 30`)
    const first = await listed("holds-one")
    expect(first).toHaveLength(1)
    launch("takes-the-other", 1, listGpus)
    const second = await listed("takes-the-other")
    expect(second).toHaveLength(1)
    // Each box sees its GPU at the driver's name for it, and the two are different GPUs.
    expect([...first, ...second].sort()).toEqual(["/dev/nvidia0=gpu-0", "/dev/nvidia1=gpu-1"])
    launch("cpu-only", 0, listGpus)
    expect(await listed("cpu-only")).toEqual([])
  })

  it("frees a run's GPUs when it ends: a run of both then gets both", async () => {
    await until("the one-GPU runs end", () => capacity.ended(owner, "takes-the-other"))
    Effect.runSync(capacity.port.release(owner, "holds-one", 0))
    await until("the holder ends", () => capacity.ended(owner, "holds-one"))
    launch("takes-both", 2, listGpus)
    expect(await listed("takes-both")).toEqual(["/dev/nvidia0=gpu-0", "/dev/nvidia1=gpu-1"])
  })
})
