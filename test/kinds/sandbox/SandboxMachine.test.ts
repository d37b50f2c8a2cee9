/**
 * The Sandbox machine's rows as a table, on hand-made facts (the reconciler runs them over the simulator in
 * test/runtime/SandboxSim.test.ts): what counts as idle, stopping with a snapshot, a failed setup, the stuck start.
 */
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import type { AttemptFacts } from "../../../src/core/capacity/Capacity.ts"
import { rank } from "../../../src/core/capacity/Placement.ts"
import { conditionIn } from "../../../src/core/controller/Conditions.ts"
import { type SandboxMachineSpec, sandboxRunProfile, step } from "../../../src/kinds/sandbox/SandboxMachine.ts"
import { SandboxSpec, type SandboxStatusType } from "../../../src/kinds/sandbox/SandboxSchema.ts"
import { attempt, catalog, ended, hour, market, minute, T0 } from "../../core/Fixtures.ts"

const spec = (fields: Record<string, unknown> = {}): SandboxMachineSpec =>
  Schema.decodeUnknownSync(SandboxSpec)({ image: "tools", ...fields })

const box = (fields: Partial<AttemptFacts> = {}) => attempt({ name: "box-1", bootedAt: T0, ...fields })

const stepAt = (
  now: number,
  sandboxSpec: SandboxMachineSpec,
  status: SandboxStatusType,
  attempts: ReadonlyArray<AttemptFacts>
) =>
  step(
    { name: "box", namespace: "demo", uid: "uid-1", generation: 1, createdAt: T0, spec: sandboxSpec, status, attempts },
    { now, market: market(), ranking: rank({}, catalog, market(), sandboxRunProfile(sandboxSpec)) }
  )

describe("idle", () => {
  const idle = spec({ lifecycle: { idleTimeout: "5m" } })

  it("is counted from the last command, file request or terminal input, and the run's start", () => {
    const result = stepAt(T0 + 4 * minute, idle, { phase: "Running" }, [
      box({ activity: { busy: false, lastAt: T0 + minute } })
    ])
    expect(result.actions).toEqual([])
    expect(result.wakeAt).toBe(T0 + 6 * minute)
    expect(result.status.activity).toBe("Idle")
    expect(result.status.lastActivityTime).toBe(new Date(T0 + minute).toISOString())
  })

  it("stops the box once idleTimeout has passed, saving /workspace first (Snapshotted)", () => {
    const result = stepAt(T0 + 6 * minute, idle, { phase: "Running" }, [
      box({ activity: { busy: false, lastAt: T0 + minute } })
    ])
    expect(result.actions).toEqual([{ _tag: "Checkpoint", attempt: "box-1", episode: 1 }])
    expect(result.status).toMatchObject({ phase: "Stopping", stopReason: "IdleTimeout" })
  })

  it("never comes while a command runs, however long ago the last request was", () => {
    const result = stepAt(T0 + 10 * hour, idle, { phase: "Running" }, [box({ activity: { busy: true, lastAt: T0 } })])
    expect(result.actions).toEqual([])
    expect(result.status).toMatchObject({ phase: "Running", activity: "Busy" })
  })

  it("never comes with idleTimeout 0s", () => {
    const result = stepAt(T0 + 10 * hour, spec({ lifecycle: { idleTimeout: "0s" } }), { phase: "Running" }, [box()])
    expect(result.actions).toEqual([])
  })
})

describe("a start request", () => {
  it("that comes while an idle stop still saves /workspace keeps the Sandbox running (it is activity)", () => {
    const idle = { ...spec({ lifecycle: { idleTimeout: "5m" } }), startRequestedAt: "again" }
    const saving = box({
      activity: { busy: false, lastAt: T0 },
      suspend: { episode: 1, state: "Pending", failures: 0 }
    })
    const result = stepAt(T0 + 10 * minute, idle, { phase: "Stopping", stopReason: "IdleTimeout" }, [saving])
    expect(result.actions).toEqual([])
    expect(result.status).toMatchObject({
      phase: "Running",
      lastActivityTime: new Date(T0 + 10 * minute).toISOString(),
      handledRequests: { "start-requested-at": "again" }
    })
    expect(result.status.stopReason).toBeUndefined()
    expect(result.wakeAt).toBe(T0 + 15 * minute)
  })

  it("does not start a Sandbox spec.state stopped, but is answered: handled, with a warning Event saying why", () => {
    const stopped = { ...spec({ state: "Stopped" }), startRequestedAt: "now-please" }
    const done = [ended({ type: "Stopped" }, T0 + minute, { name: "box-1", bootedAt: T0 })]
    const result = stepAt(T0 + 2 * minute, stopped, { phase: "Stopped", stopReason: "Requested" }, done)
    expect(result.actions).toEqual([])
    expect(result.status).toMatchObject({
      phase: "Stopped",
      stopReason: "Requested",
      handledRequests: { "start-requested-at": "now-please" }
    })
    expect(result.events).toEqual([{
      type: undefined,
      reason: "StartRequestDeclined",
      message:
        "The start request now-please does not start the Sandbox: Stopped by spec.state; set it to Running to start it.",
      warning: true
    }])
    // Answered once: the same request is not declined again.
    expect(stepAt(T0 + 3 * minute, stopped, result.status, done).events).toEqual([])
  })
})

describe("stop", () => {
  const stopped = spec({ state: "Stopped" })

  it("releases the box once its snapshot is saved, and says so (StateSaved, snapshot)", () => {
    const saved = box({
      suspend: { episode: 1, state: "Saved", failures: 0 },
      checkpoint: { seq: 3, sizeBytes: 1024, at: T0 + minute }
    })
    const result = stepAt(T0 + 2 * minute, stopped, { phase: "Stopping" }, [saved])
    expect(result.actions).toEqual([{ _tag: "Stop", attempt: "box-1", keepWarmMs: 0 }])
    expect(result.status.snapshot).toEqual({ reason: "Stop", time: new Date(T0 + minute).toISOString() })
    expect(conditionIn(result.status.conditions, "StateSaved")).toMatchObject({ status: "True", reason: "Snapshotted" })
  })

  it("tries the snapshot three times, then stops without it (StateSaved False)", () => {
    const retry = stepAt(T0 + 2 * minute, stopped, { phase: "Stopping" }, [
      box({ suspend: { episode: 1, state: "Failed", failures: 2 } })
    ])
    expect(retry.actions).toEqual([{ _tag: "Checkpoint", attempt: "box-1", episode: 1 }])
    const givenUp = stepAt(T0 + 2 * minute, stopped, { phase: "Stopping" }, [
      box({ suspend: { episode: 1, state: "Failed", failures: 3 } })
    ])
    expect(givenUp.actions).toEqual([{ _tag: "Stop", attempt: "box-1", keepWarmMs: 0 }])
    expect(conditionIn(givenUp.status.conditions, "StateSaved")).toMatchObject({
      status: "False",
      reason: "SnapshotFailed"
    })
  })

  it("is Stopped once no box is live, with sandbox.stopped once", () => {
    const done = [ended({ type: "Stopped" }, T0 + 3 * minute, { name: "box-1", bootedAt: T0 })]
    const result = stepAt(T0 + 3 * minute, stopped, { phase: "Stopping" }, done)
    expect(result.status).toMatchObject({ phase: "Stopped", stopReason: "Requested" })
    expect(result.events.map((event) => event.type)).toEqual(["sandbox.stopped"])
    expect(stepAt(T0 + 4 * minute, stopped, result.status, done).events).toEqual([])
  })
})

describe("start", () => {
  it("launches a box restoring the latest snapshot, its epoch the run's number", () => {
    const previous = ended({ type: "Stopped" }, T0 + hour, {
      name: "box-1",
      bootedAt: T0,
      checkpoint: { seq: 2, sizeBytes: 10, at: T0 + hour }
    })
    const result = stepAt(T0 + 2 * hour, spec(), { phase: "Stopped", stopReason: "Requested" }, [previous])
    const launch = result.actions[0]
    expect(launch).toMatchObject({
      _tag: "Launch",
      attempt: "box-2",
      number: 2,
      restoreFromSeq: 2,
      service: true,
      recovery: false
    })
    expect(result.status).toMatchObject({ phase: "Starting", attempt: { epoch: 2, name: "box-2" } })
  })

  it("fails for good when the box cannot be set up (StartupFailed, sandbox.setup_failed)", () => {
    const failed = ended(
      { type: "Failed", exitCode: 1, message: "The program did not start: Secret token has no key x" },
      T0 + minute,
      { name: "box-1", bootedAt: undefined }
    )
    const result = stepAt(T0 + minute, spec(), { phase: "Starting" }, [failed])
    expect(result.actions).toEqual([])
    expect(result.status).toMatchObject({ phase: "Failed", reason: "StartupFailed" })
    expect(result.events.map((event) => event.type)).toEqual(["sandbox.setup_failed"])
  })

  it("says it is stuck once, when the box is not ready 5 minutes after its start", () => {
    const starting = box({ phase: "Provisioning", bootedAt: undefined })
    const first = stepAt(T0, spec(), {}, [starting])
    expect(first.status.phase).toBe("Starting")
    expect(first.wakeAt).toBe(T0 + 5 * minute)
    const later = stepAt(T0 + 5 * minute, spec(), first.status, [starting])
    expect(later.events.map((event) => event.type)).toEqual(["sandbox.stuck"])
    expect(stepAt(T0 + 6 * minute, spec(), later.status, [starting]).events).toEqual([])
  })
})

describe("maxLifetime", () => {
  const short = spec({ lifecycle: { maxLifetime: "1h" } })
  const failed = [
    ended({ type: "Failed", exitCode: 1, message: "no bubblewrap" }, T0 + minute, {
      name: "box-1",
      bootedAt: undefined
    })
  ]
  const failedStatus: SandboxStatusType = { phase: "Failed", reason: "StartupFailed" }

  it("deletes a Failed Sandbox too once it has passed (spec: any → deleted)", () => {
    const waiting = stepAt(T0 + 2 * minute, short, failedStatus, failed)
    expect(waiting.actions).toEqual([])
    expect(waiting.wakeAt).toBe(T0 + hour)
    expect(waiting.status).toMatchObject({ phase: "Failed", expirationTime: new Date(T0 + hour).toISOString() })
    const expired = stepAt(T0 + 48 * hour, short, waiting.status, failed)
    expect(expired.actions).toEqual([{ _tag: "Delete" }])
    expect(expired.status).toMatchObject({ phase: "Terminating", reason: "MaxLifetimeReached" })
  })
})

describe("a lost box", () => {
  const lost = (
    fields: Partial<AttemptFacts> = {}
  ) => [ended({ type: "NodeLost" }, T0 + hour, { name: "box-1", bootedAt: T0, ...fields })]
  const recover = (sandboxSpec: SandboxMachineSpec, attempts: ReadonlyArray<AttemptFacts>) =>
    stepAt(T0 + hour, sandboxSpec, { phase: "Running" }, attempts)

  it("is replaced from its last snapshot where one was saved, and the status says so", () => {
    const result = recover(spec(), lost({ checkpoint: { seq: 4, sizeBytes: 10, at: T0 + minute } }))
    expect(result.actions[0]).toMatchObject({ _tag: "Launch", recovery: true, restoreFromSeq: 4 })
    expect(result.status).toMatchObject({
      phase: "Recovering",
      reason: "NodeLost",
      message:
        "The box was lost; a replacement starts from its last snapshot, or from the lost box's /workspace where its host kept it."
    })
    expect(result.events.map((event) => event.message)).toEqual([
      "The box was lost (NodeLost); a replacement starts from its last snapshot, or from the lost box's /workspace where its host kept it: what neither holds is lost."
    ])
  })

  it("is replaced from the image when nothing was saved (or from what its host kept), or the Sandbox is Ephemeral, and the status says so", () => {
    const kept = ", or from the lost box's /workspace where its host kept it"
    for (
      const [sandboxSpec, or, lostText] of [[spec(), kept, "what neither holds is lost"], [
        spec({ continuity: { mode: "Ephemeral" } }),
        "",
        "what was not saved is lost"
      ]] as const
    ) {
      const result = recover(sandboxSpec, lost())
      expect(result.actions[0]).toMatchObject({ _tag: "Launch", recovery: true, restoreFromSeq: undefined })
      expect(result.status).toMatchObject({
        phase: "Recovering",
        reason: "NodeLost",
        message: `The box was lost; a replacement starts from the image${or}.`
      })
      expect(result.events.map((event) => event.message)).toEqual([
        `The box was lost (NodeLost); a replacement starts from the image${or}: ${lostText}.`
      ])
    }
  })
})

describe("Secret versions", () => {
  const mounted = (newest: Record<string, number>) => ({
    ...spec({ secrets: ["token", { name: "fixed", version: 1 }] }),
    newestSecretVersions: newest
  })
  const secretsOf = (result: ReturnType<typeof stepAt>) => {
    const launch = result.actions[0]
    return launch?._tag === "Launch" ? launch.workload?.secrets : undefined
  }

  it("are pinned again at each start: the newest admission found, in status.secretVersions and the program", () => {
    const stopped = ended({ type: "Stopped" }, T0 + hour, { name: "box-1", bootedAt: T0 })
    const result = stepAt(T0 + 2 * hour, mounted({ token: 3, fixed: 1 }), {
      phase: "Stopped",
      stopReason: "Requested",
      secretVersions: { token: 1, fixed: 1 }
    }, [stopped])
    expect(result.status.secretVersions).toEqual({ token: 3, fixed: 1 })
    expect(secretsOf(result)).toEqual([{ name: "token", version: 3 }, { name: "fixed", version: 1 }])
  })

  it("are kept by a replacement box (recovery is not a start)", () => {
    const lost = ended({ type: "NodeLost" }, T0 + hour, { name: "box-1", bootedAt: T0 })
    const result = stepAt(T0 + hour, mounted({ token: 3, fixed: 1 }), {
      phase: "Running",
      secretVersions: { token: 1, fixed: 1 }
    }, [lost])
    expect(result.status.secretVersions).toEqual({ token: 1, fixed: 1 })
    expect(secretsOf(result)).toEqual([{ name: "token", version: 1 }, { name: "fixed", version: 1 }])
  })
})
