/**
 * Agent sessions on Sandboxes in a headless scenario (docs/simulator.md, "Sandbox sessions"): each session creates a
 * Sandbox, waits for it to run, runs its script of commands in its box (SimBoxes: each for its simulated duration,
 * with the agent's think time after it), and then leaves it idle, so that its idleTimeout stops it, or deletes it. An
 * agent that comes back to a Sandbox its idle timeout stopped asks for a start (the start-requested-at annotation) and
 * waits for it, as a client retrying SandboxNotRunning would.
 *
 * The Sandboxes run the core's Sandbox machine (core/kinds/sandbox/SandboxMachine.ts) over the same engine, capacity
 * and ledger as the scenario's Jobs, through `billedStep` as Simulation.ts steps Jobs: their starts, idle stops,
 * recoveries and cost are the ones the server's sim backend would give. Durations and think times are the script's or
 * drawn from the scenario's seed; everything else follows the engine's order, so a seed gives one trace.
 */
import { Schema } from "effect"
import { chargedAccount } from "../../core/billing/Ledger.ts"
import type { AttemptFacts } from "../../core/capacity/Capacity.ts"
import type { Offering } from "../../core/capacity/Offering.ts"
import { variantKeyOf } from "../../core/capacity/Offering.ts"
import { rank, type Ranking } from "../../core/capacity/Placement.ts"
import { billedStep, type Billing, billRemoved } from "../../core/controller/BilledStep.ts"
import type { JsonObject } from "../../core/Json.ts"
import { sandboxMachine, type SandboxMachineSpec } from "../../core/kinds/sandbox/SandboxMachine.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import { sandbox as sandboxKind, SandboxSpec, type SandboxStatusType } from "../../core/schemas/Sandbox.ts"
import { durationMs, iso } from "../../core/StatusText.ts"
import type { Engine } from "./Engine.ts"
import type { Prng } from "./Prng.ts"
import type { SandboxSessionSettings, SessionStep } from "./Scenario.ts"
import { execDurationEnv, SimBoxes } from "./SimBoxes.ts"
import type { SimCapacity } from "./SimCapacity.ts"
import { scheduleWake, type SimBilling, type TraceSink, type Waker, wakerOf } from "./Simulation.ts"
import { serviceWorkload } from "./Workloads.ts"

const decodeSpec = Schema.decodeUnknownSync(SandboxSpec)

/** A Sandbox spec of a scenario as the machine reads it: the kind's normalization and schema, with defaults. */
export const admitSandboxSpec = (spec: JsonObject): SandboxMachineSpec => decodeSpec(sandboxKind.normalize!(spec))

interface SimSandbox {
  readonly name: string
  readonly namespace: string
  /** The capacity's owner key and the trace's subject: `sandbox:<namespace>/<name>` (Jobs are `<namespace>/<name>`). */
  readonly key: string
  readonly uid: string
  readonly createdAt: number
  readonly annotations: Readonly<Record<string, string>>
  readonly ranking: Ranking
  spec: SandboxMachineSpec
  generation: number
  status: SandboxStatusType
  readonly attempts: Array<AttemptFacts>
  dirty: boolean
  wakeAt: number | undefined
  deleted: boolean
  deletedAt: number | undefined
  readonly phases: Array<{ readonly at: number; readonly phase: string }>
  commands: number
  idleStops: number
  startRequests: number
  /** The session waiting for the Sandbox to run (its next command). */
  waiting: (() => void) | undefined
}

/** One Sandbox of a run, as the summary shows it. */
export interface SandboxRow {
  readonly name: string
  readonly phase: string
  readonly stopReason: string | undefined
  /** Boxes that came up: the first start, each start again and each recovery. */
  readonly starts: number
  readonly commands: number
  readonly idleStops: number
  readonly startRequests: number
  readonly createdAt: string
  readonly deletedAt: string | undefined
  /** Every phase it went through, with the virtual time it entered it. */
  readonly phases: ReadonlyArray<{ readonly at: string; readonly phase: string }>
  /** What the ledger charged for it, every start and teardown included (billed scenarios). */
  readonly costUSD?: string
}

export interface SandboxesSummary {
  readonly totals: {
    readonly sandboxes: number
    readonly byPhase: Readonly<Record<string, number>>
    readonly starts: number
    readonly commands: number
    readonly idleStops: number
    readonly startRequests: number
    readonly deleted: number
    readonly costUSD?: string
  }
  readonly sandboxes: ReadonlyArray<SandboxRow>
}

export interface SandboxSessionsOptions {
  readonly engine: Engine
  readonly capacity: SimCapacity
  readonly catalog: ReadonlyArray<Offering>
  readonly trace: TraceSink
  readonly billing: SimBilling | undefined
  /** Draws the session arrivals and the script's durations and think times (the scenario's `sandboxes` generator). */
  readonly random: Prng
}

export class SandboxSessions {
  private readonly options: SandboxSessionsOptions
  private readonly boxes: SimBoxes
  private readonly sandboxes = new Map<string, SimSandbox>()
  private readonly all: Array<SimSandbox> = []
  private nextUid = 0

  constructor(options: SandboxSessionsOptions) {
    this.options = options
    this.boxes = new SimBoxes(options.capacity)
    const { capacity } = options
    // The Jobs' simulation hears of every other owner, and of freed hosts first.
    const jobsChanged = capacity.onChange
    const jobsFreed = capacity.onFreed
    capacity.onChange = (owner) => {
      const sandbox = this.sandboxes.get(owner)
      if (sandbox === undefined) return jobsChanged(owner)
      if (!sandbox.deleted) this.touch(sandbox)
    }
    capacity.onFreed = () => {
      jobsFreed()
      for (const sandbox of this.sandboxes.values()) if (sandbox.status.phase === "Pending") this.touch(sandbox)
    }
  }

  private get now() {
    return this.options.engine.now
  }

  private record(sandbox: SimSandbox, what: string) {
    this.options.trace.record(`${this.now} ${sandbox.key} ${what}`)
  }

  /** Starts every session of the scenario: a Poisson process of `count` sessions per setting. */
  arrive(settings: ReadonlyArray<SandboxSessionSettings>) {
    const { engine, random } = this.options
    settings.forEach((setting) => {
      const spec = admitSandboxSpec(setting.sandbox as JsonObject)
      const meanMs = durationMs(setting.meanInterarrival, 60_000)
      let started = 0
      const next = () => {
        if (started >= setting.count) return
        this.session(setting, spec, `${setting.name}-${++started}`)
        engine.after(Math.max(1, Math.round(random.exponential(meanMs))), next)
      }
      engine.after(Math.round(random.exponential(meanMs)), next)
    })
  }

  /** One agent: creates its Sandbox, runs the script in it, then leaves it idle or deletes it. */
  private session(setting: SandboxSessionSettings, spec: SandboxMachineSpec, name: string) {
    const sandbox = this.create(setting, spec, name)
    let index = 0
    const step = () => {
      if (sandbox.deleted) return
      if (index === setting.script.length) {
        if (setting.end === "Delete") this.remove(sandbox)
        return
      }
      this.whenRunning(sandbox, () => {
        const command = setting.script[index++]!
        const ms = this.drawn(command.duration, command.durationMedian, command.durationSigma)
        const attempt = sandbox.status.attempt?.name ?? ""
        const id = `cmd-${++sandbox.commands}`
        const reply = this.boxes.call(sandbox.key, attempt, {
          _tag: "Exec",
          command: id,
          argv: command.command,
          env: { [execDurationEnv]: `${ms}ms` },
          workingDir: undefined,
          stdin: undefined,
          keepStdin: false,
          timeoutMs: undefined,
          background: command.background
        })
        this.record(
          sandbox,
          `Exec ${id} ${command.command[0]} ${ms}ms${command.background ? " background" : ""} ${
            reply._tag === "Refused" ? reply.code : "ok"
          }`
        )
        this.options.engine.after((command.background ? 0 : ms) + this.think(setting, command), step)
      })
    }
    this.options.engine.after(0, step)
  }

  private drawn(fixed: string | undefined, median: string | undefined, sigma: number): number {
    if (fixed !== undefined) return durationMs(fixed, 0)
    if (median === undefined) return 0
    const medianMs = durationMs(median, 0)
    return sigma > 0 ? Math.max(0, Math.round(this.options.random.logNormal(medianMs, sigma))) : medianMs
  }

  private think(setting: SandboxSessionSettings, command: SessionStep): number {
    return command.think !== undefined
      ? durationMs(command.think, 0)
      : this.drawn(undefined, setting.thinkMedian, setting.thinkSigma)
  }

  /**
   * Runs `then` once the Sandbox runs: now if it does; after a start request when its idle timeout stopped it; else
   * when it gets there. A Sandbox gone or Failed ends the session.
   */
  private whenRunning(sandbox: SimSandbox, then: () => void) {
    const phase = sandbox.status.phase
    if (phase === "Running") return then()
    if (phase === "Failed" || sandbox.deleted) return
    sandbox.waiting = then
    if (phase === "Stopped" && sandbox.status.stopReason === "IdleTimeout") {
      const at = iso(this.now)
      sandbox.spec = { ...sandbox.spec, startRequestedAt: at }
      sandbox.generation++
      sandbox.startRequests++
      this.record(sandbox, `StartRequested ${at}`)
      this.touch(sandbox)
    }
  }

  private create(setting: SandboxSessionSettings, spec: SandboxMachineSpec, name: string): SimSandbox {
    const { request, run } = sandboxMachine.placementOf(spec)
    const key = `sandbox:${setting.namespace}/${name}`
    const sandbox: SimSandbox = {
      name,
      namespace: setting.namespace,
      key,
      uid: `sim-sandbox-${++this.nextUid}`,
      createdAt: this.now,
      annotations: setting.annotations,
      ranking: rank(request, this.options.catalog, this.options.capacity.marketFor(setting.namespace), run),
      spec,
      generation: 1,
      status: {},
      attempts: [],
      dirty: false,
      wakeAt: undefined,
      deleted: false,
      deletedAt: undefined,
      phases: [],
      commands: 0,
      idleStops: 0,
      startRequests: 0,
      waiting: undefined
    }
    this.sandboxes.set(key, sandbox)
    this.all.push(sandbox)
    this.record(sandbox, "Created")
    this.touch(sandbox)
    return sandbox
  }

  /** The session deletes its Sandbox: its box is stopped, and billed until its host is released. */
  private remove(sandbox: SimSandbox) {
    const { capacity } = this.options
    for (const attempt of sandbox.attempts) if (attempt.phase !== "Ended") capacity.stop(sandbox.key, attempt.name, 0)
    this.record(sandbox, "Removed")
    this.forget(sandbox)
  }

  private forget(sandbox: SimSandbox) {
    sandbox.deleted = true
    sandbox.deletedAt = this.now
    sandbox.waiting = undefined
    this.boxes.forget(sandbox.key)
    this.options.capacity.forget(sandbox.key)
    this.sandboxes.delete(sandbox.key)
    this.billRemoved(sandbox)
  }

  private billingOf(): Billing | undefined {
    const billing = this.options.billing
    return billing === undefined ? undefined : { ledger: billing.ledger, pricebook: billing.pricebook, rooms: [] }
  }

  /** A deleted Sandbox's run is billed until its host is released (BilledStep.billRemoved), as a deleted Job's is. */
  private billRemoved(sandbox: SimSandbox) {
    const billing = this.billingOf()
    if (billing === undefined) return
    const { wakeAt, done } = billRemoved(billing, sandbox.uid, sandbox.spec.maxCostUSD, sandbox.attempts, this.now)
    if (!done && wakeAt !== undefined) this.options.engine.at(wakeAt, () => this.billRemoved(sandbox))
  }

  private touch(sandbox: SimSandbox) {
    if (sandbox.dirty || sandbox.deleted) return
    sandbox.dirty = true
    this.options.engine.after(0, () => this.reconcile(sandbox))
  }

  /** Credits arrived: Sandboxes that money stopped look again. */
  fundsChanged() {
    for (const sandbox of this.sandboxes.values()) this.touch(sandbox)
  }

  /** What wakes a Sandbox (`scheduleWake`), made once. */
  private waker: Waker<SimSandbox> | undefined

  private reconcile(sandbox: SimSandbox) {
    sandbox.dirty = false
    if (sandbox.deleted) return
    const { capacity } = this.options
    const now = this.now
    const before = sandbox.status
    const { result, wakeAt } = billedStep(sandboxMachine, sandbox, {
      now,
      market: capacity.marketFor(sandbox.namespace),
      ranking: sandbox.ranking
    }, this.billingOf())
    sandbox.status = result.status
    const phase = result.status.phase
    if (phase !== before.phase && phase !== undefined) {
      sandbox.phases.push({ at: now, phase })
      if (phase === "Stopped" && result.status.stopReason === "IdleTimeout") sandbox.idleStops++
      this.record(sandbox, `Phase ${before.phase ?? "-"}>${phase} ${result.status.reason ?? ""}`)
    }
    for (const event of result.events) {
      this.record(sandbox, `Event ${event.type ?? "-"} ${event.reason}: ${event.message}`)
    }
    for (const action of result.actions) {
      switch (action._tag) {
        case "Launch": {
          const facts = capacity.launch({
            ...action,
            owner: sandbox.key,
            namespace: sandbox.namespace,
            workload: serviceWorkload
          })
          sandbox.attempts.push(facts)
          this.record(
            sandbox,
            `Launch ${action.attempt} ${variantKeyOf(action.variant)}${
              facts.outcome === undefined ? "" : " " + facts.outcome.type
            }`
          )
          if (facts.outcome !== undefined) this.touch(sandbox)
          else {
            const restoredFrom = action.restoreFromSeq === undefined
              ? undefined
              : sandbox.attempts.find((attempt) => attempt.checkpoint?.seq === action.restoreFromSeq)?.name
            this.boxes.open(
              sandbox.key,
              action.attempt,
              sandbox.annotations,
              sandbox.spec.workingDir,
              restoredFrom,
              action.workload?.argv
            )
          }
          break
        }
        case "Checkpoint":
          this.boxes.snapshot(sandbox.key, action.attempt)
          capacity.checkpoint(sandbox.key, action.attempt, action.episode)
          break
        case "Stop":
          capacity.stop(sandbox.key, action.attempt, action.keepWarmMs)
          this.record(sandbox, `Stop ${action.attempt}`)
          break
        case "Delete":
          this.record(sandbox, "Deleted")
          this.forget(sandbox)
          return
      }
    }
    scheduleWake(
      this.options.engine,
      sandbox,
      wakeAt,
      this.waker ??= wakerOf(this.options.engine, (sandbox: SimSandbox) => this.reconcile(sandbox))
    )
    if (phase === "Running" && sandbox.waiting !== undefined) {
      const waiting = sandbox.waiting
      sandbox.waiting = undefined
      this.options.engine.after(0, waiting)
    }
  }

  /** Every Sandbox of the run: its uid (the ledger's owner) and its runs, for the run's cost (Costs.ts). */
  owners(): ReadonlyArray<{ readonly uid: string; readonly attempts: ReadonlyArray<AttemptFacts> }> {
    return this.all
  }

  /** Every Sandbox of the run, with what the ledger charged for each (billed scenarios). */
  summary(): SandboxesSummary {
    const ledger = this.options.billing?.ledger
    const byPhase: Record<string, number> = {}
    let total = 0n
    const rows = this.all.map((sandbox): SandboxRow => {
      const phase = sandbox.deleted ? "Deleted" : sandbox.status.phase ?? "Pending"
      byPhase[phase] = (byPhase[phase] ?? 0) + 1
      const charged = ledger?.balance(chargedAccount(sandbox.uid))
      if (charged !== undefined) total += charged
      return {
        name: `${sandbox.namespace}/${sandbox.name}`,
        phase,
        stopReason: sandbox.status.stopReason,
        starts: sandbox.attempts.filter((attempt) => attempt.bootedAt !== undefined).length,
        commands: sandbox.commands,
        idleStops: sandbox.idleStops,
        startRequests: sandbox.startRequests,
        createdAt: iso(sandbox.createdAt),
        deletedAt: sandbox.deletedAt === undefined ? undefined : iso(sandbox.deletedAt),
        phases: sandbox.phases.map(({ at, phase }) => ({ at: iso(at), phase })),
        ...(charged === undefined ? {} : { costUSD: formatMicroUsd(charged) })
      }
    })
    const sum = (pick: (row: SandboxRow) => number) => rows.reduce((sum, row) => sum + pick(row), 0)
    return {
      totals: {
        sandboxes: rows.length,
        byPhase,
        starts: sum((row) => row.starts),
        commands: sum((row) => row.commands),
        idleStops: sum((row) => row.idleStops),
        startRequests: sum((row) => row.startRequests),
        deleted: rows.filter((row) => row.deletedAt !== undefined).length,
        ...(ledger === undefined ? {} : { costUSD: formatMicroUsd(total) })
      },
      sandboxes: rows
    }
  }
}
