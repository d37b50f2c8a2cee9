/**
 * The disk quota of a box's writable space (src/backends/live/DiskQuota.ts, docs/isolation.md "Bounds"), with real
 * loop-mounted ext4 images and real bubblewrap boxes: writing past the quota fails with ENOSPC in the box and the
 * host's disk is untouched; a Job on a live host is held to its resources.disk; where quotas are polled, a box past
 * its quota is found.
 */
import { Effect } from "effect"
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Agent } from "../../../src/backends/live/Agent.ts"
import { imageOf, mountArea, overQuota, removeArea } from "../../../src/backends/live/DiskQuota.ts"
import { detectIsolation, runIsolated } from "../../../src/backends/live/Isolation.ts"
import type { LiveCapacity } from "../../../src/backends/live/LiveCapacity.ts"
import type { ProgramRequest } from "../../../src/core/capacity/Capacity.ts"
import { variantsOf } from "../../../src/core/capacity/Offering.ts"
import { makeLiveHost } from "./LiveHost.ts"

const MiB = 1024 * 1024
const support = detectIsolation()
let dir: string

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "nodus-quota-"))
  chmodSync(dir, 0o711)
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const mounted = (path: string) =>
  readFileSync("/proc/self/mountinfo", "utf8").split("\n").some((line) => line.split(" ")[4] === path)

/** Runs `script` in a box on `area`; answers its exit code and its log. */
const inBox = async (area: string, script: string) => {
  const logPath = join(dir, `${area.split("/").pop()}.log`)
  const outcome = await runIsolated({
    argv: ["sh", "-c", script],
    env: {},
    workingDir: undefined,
    secretFiles: [],
    egress: "Deny",
    memoryBytes: undefined,
    area,
    logPath
  }, { support, hidden: [] }).exited
  return { exitCode: outcome.exitCode, log: readFileSync(logPath, "utf8") }
}

describe("a box's area of its own filesystem", () => {
  it("is found on this host (root, loop devices, mkfs.ext4)", () => {
    expect(support.diskQuotas).toBe("loop")
  })

  it("refuses a write past the quota with ENOSPC, and the host's disk holds no more than the quota", async () => {
    const area = join(dir, "bounded")
    await mountArea(area, 32 * MiB)
    const { exitCode, log } = await inBox(
      area,
      "dd if=/dev/zero of=/platform/work/big bs=1M count=64 2>&1; echo exit=$?"
    )
    expect(exitCode).toBe(0)
    expect(log).toContain("No space left on device")
    expect(log).toContain("exit=1")
    expect(statSync(join(area, "work", "big")).size).toBeLessThan(32 * MiB)
    // The image is sparse: what it takes on the host's disk is what the box wrote, at most the quota.
    expect(statSync(imageOf(area)).blocks * 512).toBeLessThanOrEqual(33 * MiB)
    await removeArea(area)
    expect(mounted(area)).toBe(false)
    expect(existsSync(area) || existsSync(imageOf(area))).toBe(false)
  })

  it("is measured where quotas are polled: past the quota, its usage is said", async () => {
    const area = join(dir, "polled")
    await inBox(area, "head -c 3M /dev/urandom > /platform/work/blob")
    expect(await overQuota(area, 8 * MiB)).toBeUndefined()
    expect(await overQuota(area, 2 * MiB)).toBeGreaterThan(3 * MiB)
    await removeArea(area)
  })
})

describe("a Job on a live host", () => {
  let capacity: LiveCapacity
  let agent: Agent
  const logs = new Map<string, string>()

  beforeAll(async () => {
    ;({ capacity, agent } = await makeLiveHost({
      dir,
      node: "quota-host",
      cpus: 2,
      now: () => Date.now(),
      appendLog: (_, attempt, text) => logs.set(attempt, (logs.get(attempt) ?? "") + text)
    }))
    await agent.connect()
  })
  afterAll(() => agent.stop())

  const program = (script: string, diskBytes: number): ProgramRequest => ({
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
      diskBytes,
      init: undefined
    }
  })

  it("is held to its resources.disk: a write past it fails in the box, and the Job with it", async () => {
    const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
    Effect.runSync(
      capacity.port.acquire({
        owner: "job-uid",
        namespace: "demo",
        attempt: "fills",
        index: 0,
        number: 1,
        variant,
        recovery: false
      })
    )
    Effect.runSync(
      capacity.port.start(
        "job-uid",
        "fills",
        program("dd if=/dev/zero of=/platform/outputs/big bs=1M count=64", 16 * MiB)
      )
    )
    for (
      let polls = 0;
      polls < 400 && Effect.runSync(capacity.port.facts("job-uid", "fills"))?.phase !== "Ended";
      polls++
    ) {
      await agent.syncNow()
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    const facts = Effect.runSync(capacity.port.facts("job-uid", "fills"))!
    expect(facts.phase).toBe("Ended")
    expect(facts.outcome).toMatchObject({ type: "Failed", exitCode: 1 })
    expect(logs.get("fills")).toContain("No space left on device")
  })
})

describe("a Job whose area cannot be a filesystem of its own", () => {
  let capacity: LiveCapacity
  let agent: Agent

  beforeAll(async () => {
    ;({ capacity, agent } = await makeLiveHost({
      dir: join(dir, "fallback-host"),
      node: "fallback-host",
      cpus: 2,
      now: () => Date.now()
    }))
    await agent.connect()
  })
  afterAll(() => agent.stop())

  it("runs with its quota polled: past it, it is stopped and its end says why", async () => {
    const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
    Effect.runSync(
      capacity.port.acquire({
        owner: "job-uid",
        namespace: "demo",
        attempt: "tiny",
        index: 0,
        number: 1,
        variant,
        recovery: false
      })
    )
    // 16 KiB: too small for mkfs.ext4, which fails (the same path as loop devices used up).
    Effect.runSync(capacity.port.start("job-uid", "tiny", {
      restoreFromSeq: undefined,
      resumeFromUnits: undefined,
      checkpointIntervalMs: undefined,
      keepWarmMs: 0,
      env: {},
      annotations: {},
      workload: {
        image: undefined,
        argv: ["sh", "-c", "head -c 1M /dev/urandom > /platform/work/big; sleep 600"],
        workingDir: undefined,
        env: [],
        secrets: [],
        egress: "Deny",
        memoryBytes: undefined,
        diskBytes: 16 * 1024,
        init: undefined
      }
    }))
    for (
      let polls = 0;
      polls < 600 && Effect.runSync(capacity.port.facts("job-uid", "tiny"))?.phase !== "Ended";
      polls++
    ) {
      agent.tick()
      await agent.syncNow()
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    const facts = Effect.runSync(capacity.port.facts("job-uid", "tiny"))!
    expect(facts.outcome).toMatchObject({ type: "Failed" })
    expect(JSON.stringify(facts.outcome)).toContain(`past its disk quota of ${16 * 1024} bytes`)
  })
})

describe("a Job on a host that polls quotas", () => {
  let capacity: LiveCapacity
  let agent: Agent
  const polledDir = () => join(dir, "polled-host")

  beforeAll(async () => {
    ;({ capacity, agent } = await makeLiveHost({
      dir: polledDir(),
      node: "polling-host",
      cpus: 2,
      now: () => Date.now(),
      polledQuotas: true
    }))
    await agent.connect()
  })
  afterAll(() => agent.stop())

  it("is stopped once its writable space is past its quota, and its end says why", async () => {
    const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
    Effect.runSync(
      capacity.port.acquire({
        owner: "job-uid",
        namespace: "demo",
        attempt: "overflows",
        index: 0,
        number: 1,
        variant,
        recovery: false
      })
    )
    const script = "head -c 24M /dev/urandom > /platform/work/big; sleep 600"
    Effect.runSync(capacity.port.start("job-uid", "overflows", {
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
        diskBytes: 16 * MiB,
        init: undefined
      }
    }))
    for (
      let polls = 0;
      polls < 600 && Effect.runSync(capacity.port.facts("job-uid", "overflows"))?.phase !== "Ended";
      polls++
    ) {
      agent.tick()
      await agent.syncNow()
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    const facts = Effect.runSync(capacity.port.facts("job-uid", "overflows"))!
    expect(facts.phase).toBe("Ended")
    expect(facts.outcome).toMatchObject({ type: "Failed" })
    expect(JSON.stringify(facts.outcome)).toContain(`past its disk quota of ${16 * MiB} bytes`)
  })
})
