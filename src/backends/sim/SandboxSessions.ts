/**
 * Agent sessions on Sandboxes in a headless scenario (docs/simulator.md, "Sandbox sessions"): each session creates a
 * Sandbox, waits for it to run, runs its script of commands in its box (SimBoxes: each for its simulated duration,
 * with the agent's think time after it), and then leaves it idle, so that its idleTimeout stops it, or deletes it. An
 * agent that comes back to a Sandbox its idle timeout stopped asks for a start (the start-requested-at annotation) and
 * waits for it, as a client retrying SandboxNotRunning would.
 *
 * The Sandboxes run the core's Sandbox machine (kinds/sandbox/SandboxMachine.ts) in the simulator's one loop
 * (Simulation.ts; `kind` is their entry in its list of kinds: a box opened on a launch, snapshotted on a checkpoint),
 * over the same engine, capacity and ledger as the scenario's Jobs: their starts, idle stops, recoveries and cost are
 * the ones the server's sim backend would give. Durations and think times are the script's or
 * drawn from the scenario's seed; everything else follows the engine's order, so a seed gives one trace.
 */
import { Schema } from "effect"
import { chargedAccount, type Ledger } from "../../core/billing/Ledger.ts"
import type { AttemptFacts } from "../../core/capacity/Capacity.ts"
import type { LaunchAction } from "../../core/controller/Controller.ts"
import type { ReconcileKind } from "../../core/controller/Reconcile.ts"
import type { JsonObject } from "../../core/Json.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import { durationMs, iso } from "../../core/StatusText.ts"
import { sandboxMachine, type SandboxMachineSpec } from "../../kinds/sandbox/SandboxMachine.ts"
import { sandbox as sandboxKind, SandboxSpec, type SandboxStatusType } from "../../kinds/sandbox/SandboxSchema.ts"
import type { Engine } from "./Engine.ts"
import type { Prng } from "./Prng.ts"
import type { SandboxSessionSettings, SessionStep } from "./Scenario.ts"
import { execDurationEnv, SimBoxes } from "./SimBoxes.ts"
import type { SimCapacity } from "./SimCapacity.ts"
import type { SimKind, SimObject } from "./SimObject.ts"
import type { Simulation, TraceSink } from "./Simulation.ts"
import { serviceWorkload } from "./Workloads.ts"

const decodeSpec = Schema.decodeUnknownSync(SandboxSpec)

/** A Sandbox spec of a scenario as the machine reads it: the kind's normalization and schema, with defaults. */
export const admitSandboxSpec = (spec: JsonObject): SandboxMachineSpec => decodeSpec(sandboxKind.normalize!(spec))

/** A Sandbox as the simulator holds it. */
type SimSandbox = SimObject<SandboxMachineSpec, SandboxStatusType>

/** What a session keeps of its Sandbox beside the simulator's object. */
interface Session {
  readonly sandbox: SimSandbox
  readonly annotations: Readonly<Record<string, string>>
  deletedAt: number | undefined
  readonly phases: Array<{ readonly at: number; readonly phase: string }>
  commands: number
  idleStops: number
  startRequests: number
  /** The session waiting for the Sandbox to run (its next command). */
  waiting: (() => void) | undefined
}

/** The Sandbox's registration with the reconcile core. */
export const sandboxReconcileKind: ReconcileKind<SandboxMachineSpec, SandboxStatusType> = {
  kind: "Sandbox",
  machine: sandboxMachine
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
  /** The capacity the simulation runs on (the boxes run their commands on its hosts). */
  readonly capacity: SimCapacity
  readonly trace: TraceSink
  /** What the ledger charged each Sandbox is read from it for the summary (billed scenarios). */
  readonly ledger: Ledger | undefined
  /** Draws the session arrivals and the script's durations and think times (the scenario's `sandboxes` generator). */
  readonly random: Prng
}

export class SandboxSessions {
  private readonly options: SandboxSessionsOptions
  private readonly boxes: SimBoxes
  private readonly sessions = new Map<SimSandbox, Session>()
  private readonly all: Array<Session> = []
  private simulation: Simulation | undefined
  /**
   * The Sandbox's entry in the simulator's list of kinds: its box opened on a launch, snapshotted on a checkpoint and
   * forgotten with it; a Pending Sandbox looks again at every freed host, every Sandbox when funds change.
   */
  readonly kind: SimKind<SandboxMachineSpec, SandboxStatusType>

  constructor(options: SandboxSessionsOptions) {
    this.options = options
    this.boxes = new SimBoxes(options.capacity)
    this.kind = {
      reconcile: sandboxReconcileKind,
      keyPrefix: "sandbox:",
      uidPrefix: "sim-sandbox-",
      phaseChanged: (sandbox, _from, now) => {
        const session = this.sessions.get(sandbox)!
        const phase = sandbox.status.phase!
        session.phases.push({ at: now, phase })
        if (phase === "Stopped" && sandbox.status.stopReason === "IdleTimeout") session.idleStops++
      },
      launched: (sandbox, action) => this.open(sandbox, action),
      checkpointing: (sandbox, attempt) => this.boxes.snapshot(sandbox.key, attempt),
      forgotten: (sandbox) => {
        const session = this.sessions.get(sandbox)!
        session.deletedAt = this.now
        session.waiting = undefined
        this.boxes.forget(sandbox.key)
      },
      stepped: (sandbox) => {
        const session = this.sessions.get(sandbox)!
        if (sandbox.status.phase === "Running" && session.waiting !== undefined) {
          const waiting = session.waiting
          session.waiting = undefined
          this.options.engine.after(0, waiting)
        }
      },
      looksWhenFreed: (sandbox) => sandbox.status.phase === "Pending",
      looksWhenFunded: true
    }
  }

  private get now() {
    return this.options.engine.now
  }

  private record(sandbox: SimSandbox, what: string) {
    this.options.trace.record(`${this.now} ${sandbox.key} ${what}`)
  }

  /** A launch found its host: the box opens, restored from the attempt whose checkpoint it restores. */
  private open(sandbox: SimSandbox, action: LaunchAction) {
    const restoredFrom = action.restoreFromSeq === undefined
      ? undefined
      : sandbox.attempts.find((attempt) => attempt.checkpoint?.seq === action.restoreFromSeq)?.name
    this.boxes.open(
      sandbox.key,
      action.attempt,
      this.sessions.get(sandbox)!.annotations,
      sandbox.spec.workingDir,
      restoredFrom,
      action.workload?.argv
    )
  }

  /**
   * Starts every session of the scenario on `simulation` (its list of kinds holds `kind`): a Poisson process of
   * `count` sessions per setting.
   */
  arrive(simulation: Simulation, settings: ReadonlyArray<SandboxSessionSettings>) {
    this.simulation = simulation
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
    const session = this.create(setting, spec, name)
    const sandbox = session.sandbox
    let index = 0
    const step = () => {
      if (sandbox.deleted) return
      if (index === setting.script.length) {
        if (setting.end === "Delete") this.simulation!.remove(sandbox)
        return
      }
      this.whenRunning(session, () => {
        const command = setting.script[index++]!
        const ms = this.drawn(command.duration, command.durationMedian, command.durationSigma)
        const attempt = sandbox.status.attempt?.name ?? ""
        const id = `cmd-${++session.commands}`
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
  private whenRunning(session: Session, then: () => void) {
    const sandbox = session.sandbox
    const phase = sandbox.status.phase
    if (phase === "Running") return then()
    if (phase === "Failed" || sandbox.deleted) return
    session.waiting = then
    if (phase === "Stopped" && sandbox.status.stopReason === "IdleTimeout") {
      const at = iso(this.now)
      session.startRequests++
      this.record(sandbox, `StartRequested ${at}`)
      this.simulation!.update(sandbox, { ...sandbox.spec, startRequestedAt: at })
    }
  }

  private create(setting: SandboxSessionSettings, spec: SandboxMachineSpec, name: string): Session {
    const sandbox = this.simulation!.submit(this.kind, setting.namespace, name, spec, serviceWorkload)
    const session: Session = {
      sandbox,
      annotations: setting.annotations,
      deletedAt: undefined,
      phases: [],
      commands: 0,
      idleStops: 0,
      startRequests: 0,
      waiting: undefined
    }
    this.sessions.set(sandbox, session)
    this.all.push(session)
    return session
  }

  /** Every Sandbox of the run: its uid (the ledger's owner) and its runs, for the run's cost (Costs.ts). */
  owners(): ReadonlyArray<{ readonly uid: string; readonly attempts: ReadonlyArray<AttemptFacts> }> {
    return this.all.map((session) => session.sandbox)
  }

  /** Every Sandbox of the run, with what the ledger charged for each (billed scenarios). */
  summary(): SandboxesSummary {
    const ledger = this.options.ledger
    const byPhase: Record<string, number> = {}
    let total = 0n
    const rows = this.all.map((session): SandboxRow => {
      const sandbox = session.sandbox
      const phase = sandbox.deleted ? "Deleted" : sandbox.status.phase ?? "Pending"
      byPhase[phase] = (byPhase[phase] ?? 0) + 1
      const charged = ledger?.balance(chargedAccount(sandbox.uid))
      if (charged !== undefined) total += charged
      return {
        name: `${sandbox.namespace}/${sandbox.name}`,
        phase,
        stopReason: sandbox.status.stopReason,
        starts: sandbox.attempts.filter((attempt) => attempt.bootedAt !== undefined).length,
        commands: session.commands,
        idleStops: session.idleStops,
        startRequests: session.startRequests,
        createdAt: iso(sandbox.createdAt),
        deletedAt: session.deletedAt === undefined ? undefined : iso(session.deletedAt),
        phases: session.phases.map(({ at, phase }) => ({ at: iso(at), phase })),
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
