/**
 * The live driver of the capacity port (core/capacity/Capacity.ts): Nodes — hosts whose agents hold a lease — and the
 * runs placed on them. It is the server end of the agent protocol (Protocol.ts): a launch becomes a run the Node's
 * agent should have, the agent's reports become the attempt's facts, and a lease that lapses makes every run of its
 * Node NodeLost, so the machines recover them as they would a lost cloud host.
 *
 * Times in facts are the server's (the moment a report arrives), so a host's clock never moves billing. Every call is
 * idempotent per (owner, attempt), as the port requires. The driver keeps no state of its own on disk: a server that
 * restarts starts with no Node, and agents say hello again (their runs of the previous server are stopped).
 */
import { Effect, PubSub, Stream } from "effect"
import type {
  AttemptFacts,
  BoxReply,
  BoxRequest,
  CapacityChange,
  CapacityPortShape,
  CollectedOutput,
  HostRequest,
  MaterializedInput,
  Outcome,
  ProgramRequest,
  WorkloadProgram
} from "../../core/capacity/Capacity.ts"
import type { Offering, Variant } from "../../core/capacity/Offering.ts"
import type { Market } from "../../core/capacity/Placement.ts"
import { nodeOfferings } from "../../core/capacity/PoolOffering.ts"
import { isBoxActivity } from "../../core/SandboxBox.ts"
import {
  type BoxCall,
  type Desired,
  type Exit,
  type Hello,
  type Lease,
  leaseExpiryMs,
  leaseRenewMs,
  type OutputTarget,
  runIdOf,
  type RunInput,
  type RunReport,
  type RunSpec,
  type SyncRequest,
  type SyncResponse,
  type VolumeInput
} from "./Protocol.ts"
import { scrub } from "./Scrub.ts"

type Facts = { -readonly [K in keyof AttemptFacts]: AttemptFacts[K] }

/** What a program receives beyond its spec: secret values, resolved as it starts (never stored). */
export interface Resolved {
  readonly env: Readonly<Record<string, string>>
  readonly secretFiles: ReadonlyArray<{ readonly name: string; readonly contentBase64: string }>
  /** Every secret value the program was given: scrubbed from its log and status. */
  readonly secretValues: ReadonlyArray<string>
  /**
   * The inputs the server holds (other Jobs' outputs, blobs, Volume revisions), by input name: their digest, and their
   * bytes on demand.
   */
  readonly inputs: ReadonlyMap<string, ServerInput>
}

/** Bytes the server holds for a run's input. */
export interface ServerInput {
  readonly sha256: string
  /** A Volume's revision: its archive, unpacked where the input is materialized. */
  readonly volume?: VolumeInput | undefined
  readonly open: () => AsyncIterable<Uint8Array>
}

/** Why a program could not be given what it needs (a Secret or key gone): the run fails without starting. */
export interface ResolveProblem {
  readonly message: string
}

export interface LiveOptions {
  /** The server's clock (epoch ms). */
  readonly now: () => number
  /** Resolves a workload's secret references in its project when its program starts. */
  readonly resolve: (namespace: string, workload: WorkloadProgram) => Effect.Effect<Resolved, ResolveProblem>
  /** Log text of a run, in order, scrubbed (the server keeps it for the Job's logs). */
  readonly appendLog: (owner: string, attempt: string, text: string) => void
  /**
   * Keeps an output of a run (its owner, in the owner's project) from its bytes, answering its SHA-256 and size, by
   * which status.outputs finds it; fails past `outputBytesMax`.
   */
  readonly storeOutput: (
    owner: string,
    namespace: string,
    bytes: AsyncIterable<Uint8Array>
  ) => Promise<{ readonly sha256: string; readonly sizeBytes: number }>
  /**
   * Keeps a checkpoint of an owner (in its project) under its number, content-addressed by its SHA-256, and reads one
   * back (undefined when none is kept under that number).
   */
  readonly checkpoints: {
    readonly store: (
      owner: string,
      namespace: string,
      seq: number,
      bytes: AsyncIterable<Uint8Array>
    ) => Promise<{ readonly sha256: string; readonly sizeBytes: number }>
    readonly open: (owner: string, seq: number) => Promise<AsyncIterable<Uint8Array> | undefined>
    /** The highest number kept for the owner (0 when none), so numbers keep growing across server restarts. */
    readonly latest: (owner: string) => Promise<number>
  }
  /** Lease timing; default 10 s renew, 40 s expiry (Protocol.ts). Tests of lease loss shorten it. */
  readonly lease?: { readonly renewMs: number; readonly expiryMs: number }
}

/**
 * Where a Node belongs: its Pool, and the project whose work it takes — an enrolled host its project's alone (a
 * customer's host never runs another customer's work), the local backend's host every project's.
 */
export interface NodeScope {
  readonly pool: string
  readonly namespace: string | undefined
}

/** A Node's key: its name, within its project when it has one. */
export const nodeKey = (
  name: string,
  scope: NodeScope
) => (scope.namespace === undefined ? name : `${scope.namespace}/${name}`)

/** A Node as the server sees it (what Node objects show). */
export interface NodeView {
  readonly key: string
  readonly name: string
  readonly pool: string
  readonly namespace: string | undefined
  readonly hostname: string
  readonly agentVersion: string
  readonly hello: Hello
  readonly ready: boolean
  readonly cordoned: boolean
  readonly lastHeartbeat: number
  readonly runs: number
  readonly gpusUsed: number
}

interface NodeState {
  readonly key: string
  readonly name: string
  readonly scope: NodeScope
  hello: Hello
  offerings: ReadonlyArray<Offering>
  epoch: number
  leaseExpiresAt: number
  lastHeartbeat: number
  ready: boolean
  cordoned: boolean
  /** Programs running or starting: one per vCPU at a time. */
  slotsUsed: number
  gpusUsed: number
  /** Slots kept warm for a project after a run ended (spec: Job.scaledownWindow). */
  warm: Array<{ readonly namespace: string; readonly until: number; readonly gpus: number }>
  readonly desired: Map<string, RunSpec>
  readonly checkpoints: Map<string, number>
  /** Runs a previous server process placed here that the agent said it still runs: kept, with no spec to start. */
  readonly adopted: Set<string>
  /**
   * Runs the agent said it holds that this process has not heard of yet (its store is still being read after a
   * restart): kept until then, at most a lease's length, and adopted or let go when their records come.
   */
  readonly held: Map<string, number>
  version: number
  readonly waiters: Set<() => void>
  /** Box calls waiting for the agent's reply, by id. */
  readonly calls: Map<number, PendingCall>
}

interface PendingCall {
  readonly call: BoxCall
  readonly answer: (reply: BoxReply) => void
  /** Sent to the agent in an answer to its sync: not sent again (a file's bytes ride once). */
  delivered: boolean
}

/** How soon a box's change of activity reaches its machine (status.activity, lastActivityTime). */
const activityReportMs = 1_000

/** How long a box call may wait for its agent's reply beyond what it asked to wait (a command's own timeout). */
const boxCallSlackMs = 30_000

interface Run {
  readonly owner: string
  readonly namespace: string
  readonly facts: Facts
  /** The Node key it runs on ("" once it belongs to none: an offered-back run that was lost). */
  node: string
  readonly gpus: number
  program: ProgramRequest | undefined
  /** The server no longer wants it: its exit is Stopped whatever its code. */
  stopAsked: boolean
  logAck: number
  /** Secret values it was given, to scrub from what it says. */
  secretValues: ReadonlyArray<string>
  /** Outputs uploaded so far, by name. */
  readonly stored: Map<string, { readonly sha256: string; readonly sizeBytes: number }>
  /** Its inputs the server holds, by name. */
  inputs: ReadonlyMap<string, ServerInput>
  /** Offered back after a server restart: until when its host may say it still runs it (then it is lost). */
  adoptedUntil: number | undefined
  /** Offered back: its log is taken on from wherever its agent's next report starts. */
  logBaseline: boolean
  /** Handed over to the server that took its object: until when that server must ask after it (then it is stopped). */
  handedUntil?: number | undefined
}

/** Whether the Node takes a project's work at all. */
const serves = (node: NodeState, namespace: string) =>
  node.scope.namespace === undefined || node.scope.namespace === namespace

/** Whether the Node takes this project's work of this variant now. */
const takes = (node: NodeState, namespace: string, variant: Variant) =>
  node.ready && !node.cordoned && serves(node, namespace) &&
  node.offerings.some((offering) => offering.id === variant.offering.id)

/** The GPUs an offering takes on its Node. */
const gpusOf = (variant: Variant) => variant.offering.accelerator?.count ?? 0

export class LiveCapacity {
  private readonly options: LiveOptions
  private readonly nodes = new Map<string, NodeState>()
  private readonly runs = new Map<string, Map<string, Run>>()
  /** Checkpoint sequence numbers per owner: they grow across every attempt of the owner. */
  private readonly seqs = new Map<string, number>()
  private readonly nodeListeners = new Set<
    (node: NodeView | { readonly key: string; readonly removed: true }) => void
  >()
  private readonly changes: PubSub.PubSub<CapacityChange>
  readonly port: CapacityPortShape

  private readonly lease: { readonly renewMs: number; readonly expiryMs: number }

  private constructor(options: LiveOptions, changes: PubSub.PubSub<CapacityChange>) {
    this.options = options
    this.lease = options.lease ?? { renewMs: leaseRenewMs, expiryMs: leaseExpiryMs }
    this.changes = changes
    this.port = this.portOf(changes)
  }

  static readonly make = (options: LiveOptions): Effect.Effect<LiveCapacity> =>
    Effect.map(PubSub.unbounded<CapacityChange>(), (changes) => new LiveCapacity(options, changes))

  // -------------------------------------------------------------------------------------------------------------------
  // The port

  private portOf(changes: PubSub.PubSub<CapacityChange>): CapacityPortShape {
    return {
      // Facts are answered as values: what the caller holds does not change under it.
      acquire: (request) => Effect.sync(() => ({ ...this.acquire(request) })),
      release: (owner, attempt) => Effect.sync(() => this.release(owner, attempt)),
      facts: (owner, attempt) =>
        Effect.sync(() => {
          const run = this.find(owner, attempt)
          // Its object came back to this process: it is this process's own run again.
          if (run?.handedUntil !== undefined) this.keep(run)
          const facts = run?.facts
          return facts === undefined ? undefined : { ...facts }
        }),
      market: (namespace) => this.market(namespace),
      forget: (owner) =>
        Effect.sync(() => {
          for (const run of this.runs.get(owner)?.values() ?? []) {
            this.offered.delete(run)
            this.handed.delete(run)
            // Offered back and never claimed: it holds no slot of its Node.
            if (run.adoptedUntil !== undefined) run.node = ""
            // A run still stopping (released by a process that lost its shard, and forgotten at once): its exit report
            // would find no run, so its slot goes back now; its agent stops it on its next sync (it is no longer
            // desired).
            this.end(run, { type: "Stopped" })
          }
          this.runs.delete(owner)
          this.seqs.delete(owner)
        }),
      changes: Stream.fromPubSub(changes),
      start: (owner, attempt, program) => this.start(owner, attempt, program),
      checkpoint: (owner, attempt, episode) => Effect.sync(() => this.checkpoint(owner, attempt, episode)),
      adopt: (owner, namespace, facts) => Effect.sync(() => ({ ...this.adopt(owner, namespace, facts) })),
      box: (owner, attempt, request) => Effect.promise(() => this.box(owner, attempt, request)),
      handOver: (owner) => Effect.sync(() => this.handOver(owner))
    }
  }

  /** Runs handed over to another server of the store (docs/scale-out.md, "Local hosts"). */
  private readonly handed = new Set<Run>()

  /**
   * The owner's object went to another server (a rebalance): its live runs go on here for that server, which asks
   * after them (`peerFacts`) and stops them (`release`) as their owner; one it does not ask after within a lease is
   * stopped. Its ended runs are forgotten.
   */
  private handOver(owner: string) {
    const until = this.options.now() + this.lease.expiryMs
    for (const run of [...(this.runs.get(owner)?.values() ?? [])]) {
      if (run.facts.phase === "Ended") this.runs.get(owner)?.delete(run.facts.name)
      else {
        run.handedUntil = until
        this.handed.add(run)
      }
    }
    if (this.runs.get(owner)?.size === 0) this.runs.delete(owner)
  }

  private keep(run: Run) {
    run.handedUntil = undefined
    this.handed.delete(run)
  }

  /** A run's facts, as the server its object went to asks after them: it stays handed over a lease longer. */
  readonly peerFacts = (owner: string, attempt: string): AttemptFacts | undefined => {
    const run = this.find(owner, attempt)
    if (run === undefined) return undefined
    if (run.handedUntil !== undefined) {
      run.handedUntil = Math.max(run.handedUntil, this.options.now() + this.lease.expiryMs)
    }
    return { ...run.facts }
  }

  /** Handed-over runs nobody asked after in time are stopped, and forgotten once ended. */
  private expireHanded(now: number) {
    for (const run of [...this.handed]) {
      if (run.handedUntil === undefined || run.handedUntil > now) continue
      if (run.facts.phase !== "Ended") {
        this.release(run.owner, run.facts.name)
        continue
      }
      this.handed.delete(run)
      this.runs.get(run.owner)?.delete(run.facts.name)
      if (this.runs.get(run.owner)?.size === 0) this.runs.delete(run.owner)
    }
  }

  /**
   * The offerings of every Node a project's work may use: what placement ranks for it (the same array until a Node
   * comes or goes, so rankings are kept meanwhile).
   */
  readonly catalog = (namespace: string): ReadonlyArray<Offering> => {
    let offerings = this.offerings.get(namespace)
    if (offerings === undefined) {
      offerings = [...this.nodes.values()].filter((node) => serves(node, namespace)).flatMap((node) => node.offerings)
      this.offerings.set(namespace, offerings)
    }
    return offerings
  }
  private readonly offerings = new Map<string, ReadonlyArray<Offering>>()
  /** Runs offered back and not yet claimed or lost (each with `adoptedUntil`): the few `tick` looks at. */
  private readonly offered = new Set<Run>()

  /** The version of what the Node should run (an agent that applied it is up to date). */
  readonly versionOf = (key: string) => this.nodes.get(key)?.version

  /** Whether the run is over (or unknown): its log gets no more text. */
  readonly ended = (owner: string, attempt: string) => {
    const run = this.find(owner, attempt)
    return run === undefined || run.facts.phase === "Ended"
  }

  readonly nodeViews = (): ReadonlyArray<NodeView> => [...this.nodes.values()].map((node) => this.viewOf(node))

  /** Called with a Node's view whenever it changes (hello, lease, cordon, runs), and when it is removed. */
  readonly onNode = (listener: (node: NodeView | { readonly key: string; readonly removed: true }) => void) => {
    this.nodeListeners.add(listener)
    return () => this.nodeListeners.delete(listener)
  }

  private find(owner: string, attempt: string): Run | undefined {
    return this.runs.get(owner)?.get(attempt)
  }

  /** The run of an id the agent protocol names it by (`<owner>/<attempt>`, runIdOf). */
  private findById(id: string): Run | undefined {
    const slash = id.indexOf("/")
    return this.find(id.slice(0, slash), id.slice(slash + 1))
  }

  private acquire(request: HostRequest): AttemptFacts {
    const known = this.find(request.owner, request.attempt)
    if (known !== undefined) return known.facts
    const now = this.options.now()
    const facts: Facts = {
      name: request.attempt,
      index: request.index,
      number: request.number,
      variant: request.variant,
      warmReuse: false,
      recovery: request.recovery,
      restoreFromSeq: undefined,
      requestedAt: now,
      bootedAt: undefined,
      endedAt: undefined,
      stoppingAt: undefined,
      releasedAt: undefined,
      phase: "Provisioning",
      outcome: undefined,
      checkpoint: undefined,
      checkpointFailures: 0,
      suspend: undefined,
      progressUnits: undefined
    }
    const gpus = gpusOf(request.variant)
    const node = this.nodeFor(request.variant, request.namespace, now)
    if (node === undefined) {
      Object.assign(facts, {
        phase: "Ended",
        outcome: { type: "Unavailable" },
        endedAt: now,
        stoppingAt: now,
        releasedAt: now
      })
      return facts
    }
    const warm = node.warm.findIndex((host) =>
      host.namespace === request.namespace && host.gpus === gpus && host.until > now
    )
    if (warm >= 0) {
      node.warm.splice(warm, 1)
      facts.warmReuse = true
    } else {
      node.slotsUsed++
      node.gpusUsed += gpus
    }
    const run: Run = {
      owner: request.owner,
      namespace: request.namespace,
      facts,
      node: node.key,
      gpus,
      program: undefined,
      stopAsked: false,
      logAck: 0,
      secretValues: [],
      stored: new Map(),
      inputs: new Map(),
      adoptedUntil: undefined,
      logBaseline: false
    }
    if (!this.runs.has(request.owner)) this.runs.set(request.owner, new Map())
    this.runs.get(request.owner)!.set(request.attempt, run)
    this.nodeChanged(node)
    return facts
  }

  /** A ready Node that sells the variant and has room for it (a warm slot of the project first). */
  private nodeFor(variant: Variant, namespace: string, now: number): NodeState | undefined {
    let fallback: NodeState | undefined
    for (const node of this.nodes.values()) {
      if (!takes(node, namespace, variant)) continue
      if (node.warm.some((host) => host.namespace === namespace && host.gpus === gpusOf(variant) && host.until > now)) {
        return node
      }
      if (fallback === undefined && this.freeOn(node, variant) > 0) fallback = node
    }
    return fallback
  }

  /** Programs of the variant the Node can take now (warm slots are its project's alone). */
  private freeOn(node: NodeState, variant: Variant): number {
    const taken = node.slotsUsed + node.warm.length
    const slots = node.hello.capacity.cpus - taken
    const gpus = gpusOf(variant)
    if (gpus === 0) return Math.max(0, slots)
    const gpusFree = node.hello.capacity.gpus.length - node.gpusUsed -
      node.warm.reduce((sum, host) => sum + host.gpus, 0)
    return Math.max(0, Math.min(slots, Math.floor(gpusFree / gpus)))
  }

  private market(namespace: string): Market {
    return {
      available: (variant) => {
        const now = this.options.now()
        let count = 0
        for (const node of this.nodes.values()) {
          if (!takes(node, namespace, variant)) continue
          count += this.freeOn(node, variant) +
            node.warm.filter((host) =>
              host.namespace === namespace && host.gpus === gpusOf(variant) && host.until > now
            ).length
        }
        return count
      },
      // A Node is up already: its programs start without a boot.
      bootMs: () => 0,
      // A customer's host is not taken back by a provider.
      meanTimeBetweenInterruptionsMs: () => undefined
    }
  }

  private start(owner: string, attempt: string, program: ProgramRequest): Effect.Effect<void> {
    const run = this.find(owner, attempt)
    if (run === undefined || run.program !== undefined || run.facts.phase !== "Provisioning") return Effect.void
    run.program = program
    run.facts.restoreFromSeq = program.restoreFromSeq
    const workload = program.workload
    if (workload === undefined) {
      this.end(run, {
        type: "Failed",
        exitCode: 1,
        message: "Nothing to run: the workload names no program (docs/live.md)."
      })
      return Effect.void
    }
    const refused = refusalOf(workload)
    if (refused !== undefined) {
      this.end(run, { type: "Failed", exitCode: 1, message: `The program did not start: ${refused}` })
      return Effect.void
    }
    return this.options.resolve(run.namespace, workload).pipe(
      Effect.match({
        onFailure: (problem) =>
          this.end(run, { type: "Failed", exitCode: 1, message: `The program did not start: ${problem.message}` }),
        onSuccess: (resolved) => this.want(run, attempt, program, workload, resolved)
      })
    )
  }

  /** The run joins what its Node should run. */
  private want(run: Run, attempt: string, program: ProgramRequest, workload: WorkloadProgram, resolved: Resolved) {
    const node = this.nodes.get(run.node)
    if (node === undefined || run.stopAsked || run.facts.phase !== "Provisioning") return
    // A box or a worker runs a program of the platform's: neither needs a command.
    if (workload.argv.length === 0 && workload.sandbox !== true && workload.worker === undefined) {
      return this.end(run, {
        type: "Failed",
        exitCode: 1,
        message:
          "The program did not start: spec.command is empty; a live host runs the command it is given (docs/live.md, \"Images\")."
      })
    }
    if ((workload.unknownPresets ?? []).length > 0) {
      return this.end(run, {
        type: "Failed",
        exitCode: 1,
        message: `The program did not start: no egress preset is named ${
          workload.unknownPresets!.join(", ")
        } (docs/live.md, "Network").`
      })
    }
    run.secretValues = resolved.secretValues
    run.inputs = resolved.inputs
    const inputs = (workload.inputs ?? []).flatMap((input): ReadonlyArray<RunInput> => {
      if ("url" in input) return [{ name: input.name, url: input.url, sha256: input.sha256 }]
      const held = resolved.inputs.get(input.name)
      if (held === undefined) return []
      return [{
        name: input.name,
        fromServer: true,
        sha256: held.sha256,
        ...(held.volume === undefined ? {} : { volume: held.volume }),
        ...("mount" in input && input.mount !== undefined ? { mountPath: input.mount.path } : {})
      }]
    })
    const worker = workload.worker
    if (worker?.codeInput !== undefined && !inputs.some((input) => input.name === worker.codeInput)) {
      return this.end(run, {
        type: "Failed",
        exitCode: 1,
        message: `The program did not start: the worker's code input ${worker.codeInput} is not among its inputs.`
      })
    }
    const inputEnv = Object.fromEntries(
      inputs.filter((input) => !("mountPath" in input)).map((
        input
      ) => [`PLATFORM_INPUT_${input.name}`, `/platform/inputs/${input.name}`])
    )
    const restore = program.restoreFromSeq === undefined ? undefined : { owner: run.owner, seq: program.restoreFromSeq }
    const spec: RunSpec = {
      id: runIdOf(run.owner, attempt),
      owner: run.owner,
      argv: workload.argv,
      env: { ...resolved.env, ...inputEnv, ...program.env },
      secretFiles: resolved.secretFiles,
      workingDir: workload.workingDir,
      egress: workload.egress === "AllowList" ? { allow: workload.allow ?? [] } : workload.egress,
      memoryBytes: workload.memoryBytes,
      ...(workload.pidsMax === undefined ? {} : { pidsMax: workload.pidsMax }),
      ...(workload.diskBytes === undefined ? {} : { diskBytes: workload.diskBytes }),
      init: workload.init,
      checkpointIntervalMs: program.checkpointIntervalMs,
      checkpoint: workload.checkpoint ?? { paths: ["/platform/state"], maxBytes: Number.MAX_SAFE_INTEGER },
      restore,
      outputs: workload.outputs ?? [],
      inputs,
      ...(workload.sandbox === true ? { box: true } : {}),
      ...(workload.keepWorkspace === true ? { keepWorkspace: true } : {}),
      ...(worker === undefined ? {} : { worker }),
      ...(run.gpus === 0 ? {} : { gpus: run.gpus })
    }
    node.desired.set(spec.id, spec)
    node.held.delete(spec.id)
    this.bump(node)
  }

  /**
   * A run a previous server process left live: it waits for its Node's agent to say hello and report it (then it is
   * kept, and reports as before), until a lease's length from now; a Node already here that did not report it, or no
   * hello in time, makes it NodeLost. The local Node says hello before anything is adopted, so its runs (which died
   * with the previous process) are lost at once.
   */
  private adopt(owner: string, namespace: string, facts: AttemptFacts): AttemptFacts {
    const known = this.find(owner, facts.name)
    if (known !== undefined) return known.facts
    const offering = facts.variant.offering.id
    const local = this.nodes.get(offering)
    const key = local !== undefined && local.scope.namespace === undefined
      ? offering
      : nodeKey(offering, { pool: "", namespace })
    const now = this.options.now()
    const node = this.nodes.get(key)
    const run: Run = {
      owner,
      namespace,
      facts: { ...facts },
      node: key,
      gpus: gpusOf(facts.variant),
      program: undefined,
      stopAsked: false,
      logAck: 0,
      secretValues: [],
      stored: new Map(),
      inputs: new Map(),
      adoptedUntil: now + this.lease.expiryMs,
      logBaseline: true
    }
    if (!this.runs.has(owner)) this.runs.set(owner, new Map())
    this.runs.get(owner)!.set(facts.name, run)
    this.offered.add(run)
    // Its Node said hello already: it runs this one if it said so.
    if (node?.ready === true) this.reclaim(node, new Set(node.held.keys()))
    return run.facts
  }

  /** Once a Node said what it holds: the offered-back runs it still runs are kept; the others are lost. */
  private reclaim(node: NodeState, held: ReadonlySet<string>) {
    for (const run of [...this.offered]) {
      if (run.node !== node.key) continue
      this.offered.delete(run)
      run.adoptedUntil = undefined
      const id = runIdOf(run.owner, run.facts.name)
      node.held.delete(id)
      if (!held.has(id)) {
        run.node = ""
        this.end(run, { type: "NodeLost" }, this.aliveBefore.get(node.key))
        continue
      }
      node.adopted.add(id)
      node.slotsUsed++
      node.gpusUsed += run.gpus
      this.told(run.owner)
    }
  }

  private release(owner: string, attempt: string) {
    const run = this.find(owner, attempt)
    if (run === undefined || run.facts.phase === "Ended" || run.facts.phase === "Terminating") return
    run.stopAsked = true
    if (run.adoptedUntil !== undefined) {
      // Offered back and not claimed yet: it holds no slot; its agent stops it when no record claims it.
      this.offered.delete(run)
      run.adoptedUntil = undefined
      run.node = ""
      return this.end(run, { type: "Stopped" })
    }
    const node = this.nodes.get(run.node)
    const id = runIdOf(owner, attempt)
    if (node === undefined || !(node.desired.has(id) || node.adopted.has(id))) return this.end(run, { type: "Stopped" })
    // The agent stops it; its exit report ends the attempt Stopped.
    run.facts.phase = "Terminating"
    run.facts.stoppingAt = this.options.now()
    node.desired.delete(id)
    node.adopted.delete(id)
    node.checkpoints.delete(id)
    this.bump(node)
    this.told(owner)
  }

  /**
   * A request to a running box, through its Node's agent (the call rides the next sync; its reply a later one). The
   * box's activity is now: the server's clock says when a command, file request or input was last seen.
   */
  private box(owner: string, attempt: string, request: BoxRequest): Promise<BoxReply> {
    const run = this.find(owner, attempt)
    if (run === undefined || run.facts.phase === "Ended" || run.facts.phase === "Terminating" || run.stopAsked) {
      return Promise.resolve({ _tag: "Refused", code: "SandboxNotRunning", message: "the box is not running" })
    }
    if (run.facts.phase === "Provisioning") {
      return Promise.resolve({ _tag: "Refused", code: "SandboxStarting", message: "the box is starting" })
    }
    const node = this.nodes.get(run.node)
    if (node === undefined || !node.ready) {
      return Promise.resolve({ _tag: "Refused", code: "Unavailable", message: "the box's host is not connected" })
    }
    // A Function's worker takes calls and nothing else; a Sandbox's box no calls (docs/functions.md, "The worker"). A
    // run offered back after a restart has no program here: its agent, which has its spec, says.
    const worker = run.program?.workload?.worker !== undefined
    if (run.program !== undefined && worker !== (request._tag === "Call")) {
      return Promise.resolve({
        _tag: "Refused",
        code: "Invalid",
        message: worker
          ? "a Function's worker takes calls only"
          : "a call goes to a Function's worker; this run is not one"
      })
    }
    // Reading a command's state or output is not activity: a silent open terminal is idle (spec: Sandbox idleTimeout).
    if (isBoxActivity(request)) {
      run.facts.activity = { busy: run.facts.activity?.busy ?? false, lastAt: this.options.now() }
    }
    const id = this.nextCall++
    const waitMs = request._tag === "Exec" && !request.background
      ? request.timeoutMs ?? 24 * 3_600_000
      : request._tag === "Output"
      ? request.waitMs
      : request._tag === "Call"
      ? request.timeoutMs
      : 0
    return new Promise((resolve) => {
      const timer = setTimeout(
        () => answer({ _tag: "Refused", code: "Unavailable", message: "the box's host did not answer in time" }),
        waitMs + boxCallSlackMs
      )
      const answer = (reply: BoxReply) => {
        clearTimeout(timer)
        if (!node.calls.delete(id)) return
        this.bump(node)
        resolve(reply)
      }
      node.calls.set(id, { call: { id, run: runIdOf(owner, attempt), request }, answer, delivered: false })
      this.bump(node)
    })
  }

  /** Call ids go on from this process's start time: an agent holding replies of a previous server's calls (it answers
   * them after a restart) can never answer one of this process's with them. */
  private nextCall = Date.now() * 1_000

  /** A run's box calls that will get no reply: its box stopped, or its Node is gone. */
  private dropCalls(node: NodeState, runId: string | undefined, reply: BoxReply) {
    for (const pending of [...node.calls.values()]) {
      if (runId === undefined || pending.call.run === runId) pending.answer(reply)
    }
  }

  private checkpoint(owner: string, attempt: string, episode: number) {
    const run = this.find(owner, attempt)
    if (run === undefined || run.facts.phase !== "Running") return
    if (run.facts.suspend?.episode === episode && run.facts.suspend.state !== "Failed") return
    run.facts.suspend = { episode, state: "Pending", failures: 0 }
    const node = this.nodes.get(run.node)
    if (node === undefined) return
    node.checkpoints.set(runIdOf(owner, attempt), episode)
    this.bump(node)
    this.told(owner)
  }

  /**
   * Ends a run: its slot goes back (or stays warm for its project), and whoever waits for capacity looks again. A run
   * lost with its Node ends `aliveAt`, the last moment it was known alive (its Node's last lease renewal), not when the
   * loss was noticed: what it is charged stops there (docs/billing.md).
   */
  private end(run: Run, outcome: Outcome, aliveAt?: number) {
    if (run.facts.phase === "Ended") return
    const now = this.options.now()
    const at = aliveAt === undefined
      ? now
      : Math.min(now, Math.max(aliveAt, run.facts.bootedAt ?? run.facts.requestedAt))
    Object.assign(run.facts, { phase: "Ended", outcome, endedAt: at, releasedAt: at })
    run.facts.stoppingAt = Math.min(run.facts.stoppingAt ?? at, at)
    const node = this.nodes.get(run.node)
    if (node !== undefined) {
      const id = runIdOf(run.owner, run.facts.name)
      this.dropCalls(node, id, { _tag: "Refused", code: "SandboxNotRunning", message: "the box stopped" })
      node.desired.delete(id)
      node.adopted.delete(id)
      node.checkpoints.delete(id)
      node.slotsUsed--
      node.gpusUsed -= run.gpus
      const keepWarmMs = run.program?.keepWarmMs ?? 0
      if (keepWarmMs > 0 && (outcome.type === "Succeeded" || outcome.type === "Failed")) {
        node.warm.push({ namespace: run.namespace, until: now + keepWarmMs, gpus: run.gpus })
      }
      this.bump(node)
    }
    this.told(run.owner)
    this.freed()
  }

  // -------------------------------------------------------------------------------------------------------------------
  // The agent protocol (server end)

  /**
   * A Node the store knows from before this process (its object's measured capacity): not Ready until its agent says
   * hello, but its offerings are known, so the runs a previous process placed there can be offered back to it.
   */
  readonly remember = (name: string, scope: NodeScope, capacity: Hello["capacity"]) => {
    const key = nodeKey(name, scope)
    if (this.nodes.has(key)) return
    const hello: Hello = {
      node: name,
      hostname: name,
      agentVersion: "",
      capacity,
      isolation: { bubblewrap: true, memoryLimits: true, problems: [] }
    }
    this.nodes.set(key, {
      key,
      name,
      scope,
      hello,
      offerings: nodeOfferings({ pool: scope.pool, node: name, ...capacity }),
      epoch: 0,
      leaseExpiresAt: 0,
      lastHeartbeat: 0,
      ready: false,
      cordoned: false,
      slotsUsed: 0,
      gpusUsed: 0,
      warm: [],
      desired: new Map(),
      checkpoints: new Map(),
      adopted: new Set(),
      held: new Map(),
      version: 0,
      waiters: new Set(),
      calls: new Map()
    })
    this.offerings.clear()
  }

  /**
   * When a previous server process last knew a Node alive (its last lease renewal, as recorded): the runs it left
   * there that are lost end then, not when this process finds them gone.
   */
  readonly rememberAlive = (key: string, at: number) => {
    this.aliveBefore.set(key, Math.max(at, this.aliveBefore.get(key) ?? at))
  }
  private readonly aliveBefore = new Map<string, number>()

  /** A Node's agent says hello: `scope` is where the transport says it belongs (its enrollment, or this host). */
  readonly hello = (hello: Hello, scope: NodeScope): Lease => {
    const now = this.options.now()
    const key = nodeKey(hello.node, scope)
    const known = this.nodes.get(key)
    const node: NodeState = known ?? {
      key,
      name: hello.node,
      scope,
      hello,
      offerings: [],
      epoch: 0,
      leaseExpiresAt: 0,
      lastHeartbeat: now,
      ready: false,
      cordoned: false,
      slotsUsed: 0,
      gpusUsed: 0,
      warm: [],
      desired: new Map(),
      checkpoints: new Map(),
      adopted: new Set(),
      held: new Map(),
      version: 0,
      waiters: new Set(),
      calls: new Map()
    }
    // A new connection: whatever the Node ran under its old lease is lost (the agent stops what it still has).
    if (known !== undefined) this.lose(known, known.lastHeartbeat)
    node.hello = hello
    node.offerings = nodeOfferings({ pool: scope.pool, node: node.name, ...hello.capacity })
    node.epoch++
    node.leaseExpiresAt = now + this.lease.expiryMs
    node.lastHeartbeat = now
    node.ready = true
    this.nodes.set(node.key, node)
    this.offerings.clear()
    const held = new Set(hello.runs ?? [])
    this.reclaim(node, held)
    // What it holds that this process has not heard of yet waits for its record (a store still being read).
    for (const id of held) if (this.findById(id) === undefined) node.held.set(id, now + this.lease.expiryMs)
    this.bump(node)
    this.nodeChanged(node)
    this.freed()
    return { epoch: node.epoch, renewMs: this.lease.renewMs, expiryMs: this.lease.expiryMs }
  }

  /** An agent's sync: its reports taken in (under the current lease only), and what the Node should run now. */
  readonly sync = async (request: SyncRequest, scope: NodeScope): Promise<SyncResponse> => {
    const node = this.nodes.get(nodeKey(request.node, scope))
    if (node === undefined || node.epoch !== request.epoch || !node.ready) return { _tag: "Stale" }
    const now = this.options.now()
    node.leaseExpiresAt = now + this.lease.expiryMs
    node.lastHeartbeat = now
    const logAcks: Record<string, number> = {}
    for (const report of request.runs) logAcks[report.id] = this.take(node, report)
    for (const reply of request.replies ?? []) node.calls.get(reply.id)?.answer(reply.reply)
    if (request.waitMs > 0 && request.version >= node.version) {
      await this.changeOf(node, Math.min(request.waitMs, this.lease.renewMs))
    }
    if (node.epoch !== request.epoch || !node.ready) return { _tag: "Stale" }
    return { _tag: "Desired", desired: this.desiredOf(node), logAcks }
  }

  private desiredOf(node: NodeState): Desired {
    const desired = {
      version: node.version,
      runs: [...node.desired.values()],
      adopted: [...node.adopted, ...node.held.keys()],
      checkpoints: Object.fromEntries(node.checkpoints)
    }
    const calls = [...node.calls.values()].filter((pending) => !pending.delivered)
    for (const pending of calls) pending.delivered = true
    return calls.length === 0 ? desired : { ...desired, calls: calls.map((pending) => pending.call) }
  }

  /** Resolves when the Node's desired state changes, or after `waitMs`. */
  private changeOf(node: NodeState, waitMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer)
        node.waiters.delete(done)
        resolve()
      }
      const timer = setTimeout(done, waitMs)
      node.waiters.add(done)
    })
  }

  /** One run's report; answers how much of its log is now kept. */
  private take(node: NodeState, report: RunReport): number {
    const run = this.findById(report.id)
    // Offsets count bytes of the UTF-8 log, as the agent reads it.
    if (run === undefined || run.node !== node.key) return report.logOffset + Buffer.byteLength(report.log)
    if (run.logBaseline) {
      // Offered back: what the previous server kept of its log ends where its agent goes on.
      run.logBaseline = false
      run.logAck = report.logOffset
    }
    if (report.log.length > 0 && report.logOffset === run.logAck) {
      this.options.appendLog(run.owner, run.facts.name, scrub(report.log, run.secretValues))
      run.logAck += Buffer.byteLength(report.log)
    }
    let changed = false
    if (report.busy !== undefined && report.busy !== (run.facts.activity?.busy ?? false)) {
      // A command started or ended: the idle clock starts again from now either way. The machine reads it whenever it
      // steps (its idle deadline included), so its owner is told within a second, not at every command.
      run.facts.activity = { busy: report.busy, lastAt: this.options.now() }
      this.toldSoon(run.owner)
    }
    if (report.checkpoint !== undefined && report.checkpoint.seq !== run.facts.checkpoint?.seq) {
      run.facts.checkpoint = {
        seq: report.checkpoint.seq,
        sizeBytes: report.checkpoint.sizeBytes,
        at: this.options.now()
      }
      this.seqs.set(run.owner, Math.max(this.seqs.get(run.owner) ?? 0, report.checkpoint.seq))
      changed = true
    }
    if (report.checkpointFailures !== run.facts.checkpointFailures) {
      run.facts.checkpointFailures = report.checkpointFailures
      changed = true
    }
    if (
      report.suspend !== undefined &&
      (run.facts.suspend?.episode !== report.suspend.episode || run.facts.suspend.state !== report.suspend.state)
    ) {
      run.facts.suspend = report.suspend
      changed = true
    }
    // A box is booted once its supervisor is up (Running), a worker once it imported its code; one that ended before
    // never was (spec: StartupFailed).
    const serving = this.nodes.get(run.node)?.desired.get(report.id)
    const booted = run.facts.phase === "Provisioning" &&
      (report.phase === "Running" ||
        (report.phase === "Exited" && serving?.box !== true && serving?.worker === undefined))
    if (booted) {
      run.facts.phase = "Running"
      run.facts.bootedAt = this.options.now()
      // Its agent materialized every input, each checked against its digest, before the program started.
      const inputs = this.nodes.get(run.node)?.desired.get(report.id)?.inputs
      if (inputs !== undefined && inputs.length > 0) run.facts.inputs = inputs.map(materializedOf)
      changed = true
    }
    if (report.phase === "Exited" && report.exit !== undefined && run.facts.phase !== "Ended") {
      const outcome = this.outcomeOf(run, report.exit)
      if (outcome.type === "Succeeded") run.facts.outputs = this.outputsOf(run, report.exit)
      this.end(run, outcome)
      return run.logAck
    }
    if (changed) this.told(run.owner)
    return run.logAck
  }

  /** The outputs a run reported, as the server stored them (one reported but never uploaded is not shown). */
  private outputsOf(run: Run, exit: Exit): ReadonlyArray<CollectedOutput> {
    return exit.outputs.flatMap((output) => {
      const stored = run.stored.get(output.name)
      return stored === undefined
        ? []
        : [{ name: output.name, path: output.path, sha256: stored.sha256, sizeBytes: stored.sizeBytes }]
    })
  }

  /** The bytes of a run's input the server holds, for its Node under its current lease; undefined otherwise. */
  readonly getInput = (target: OutputTarget, scope: NodeScope): AsyncIterable<Uint8Array> | undefined =>
    this.transferRun(target, scope)?.inputs.get(target.name)?.open()

  /** The run of a transfer, when its Node holds the current lease and the run is still on it. */
  private transferRun(target: OutputTarget, scope: NodeScope): Run | undefined {
    const node = this.nodes.get(nodeKey(target.node, scope))
    const run = this.findById(target.run)
    if (
      node === undefined || node.epoch !== target.epoch || !node.ready || run === undefined || run.node !== node.key ||
      run.facts.phase === "Ended"
    ) return undefined
    return run
  }

  /** An agent's upload of a checkpoint: numbered after every checkpoint of its owner so far; undefined when refused. */
  readonly putCheckpoint = async (
    target: OutputTarget,
    scope: NodeScope,
    bytes: AsyncIterable<Uint8Array>
  ): Promise<{ readonly seq: number } | undefined> => {
    const run = this.transferRun(target, scope)
    if (run === undefined) return undefined
    // The highest number kept is read once per owner; two uploads that both waited for it number on from it in turn.
    if (!this.seqs.has(run.owner)) {
      const latest = await this.options.checkpoints.latest(run.owner)
      if (!this.seqs.has(run.owner)) this.seqs.set(run.owner, latest)
    }
    const seq = this.seqs.get(run.owner)! + 1
    this.seqs.set(run.owner, seq)
    await this.options.checkpoints.store(run.owner, run.namespace, seq, bytes)
    return { seq }
  }

  /** The checkpoint a run restores (its RunSpec.restore), for its Node under its current lease. */
  readonly getCheckpoint = async (
    target: OutputTarget,
    scope: NodeScope
  ): Promise<AsyncIterable<Uint8Array> | undefined> => {
    const run = this.transferRun(target, scope)
    const seq = run?.program?.restoreFromSeq
    return run === undefined || seq === undefined ? undefined : await this.options.checkpoints.open(run.owner, seq)
  }

  /**
   * An agent's upload of a run's output, under its Node's current lease; false when that lease or run is not current.
   */
  readonly putOutput = async (
    target: OutputTarget,
    scope: NodeScope,
    bytes: AsyncIterable<Uint8Array>
  ): Promise<boolean> => {
    const run = this.transferRun(target, scope)
    if (run === undefined) return false
    run.stored.set(target.name, await this.options.storeOutput(run.owner, run.namespace, bytes))
    return true
  }

  private outcomeOf(run: Run, exit: Exit): Outcome {
    if (run.stopAsked || exit.stopped) return { type: "Stopped" }
    if (exit.setupFailed) return { type: "BootFailed" }
    if (exit.oomKilled) return { type: "OOMKilled" }
    if (exit.problem !== undefined) {
      return { type: "Failed", exitCode: exit.exitCode ?? 1, message: scrub(exit.problem, run.secretValues) }
    }
    if (exit.exitCode === 0) return { type: "Succeeded" }
    const message = exit.lastLines.length > 0 ? scrub(exit.lastLines.join("\n"), run.secretValues) : undefined
    const exitCode = exit.exitCode ?? 128 + signalNumber(exit.signal)
    return message === undefined ? { type: "Failed", exitCode } : { type: "Failed", exitCode, message }
  }

  // -------------------------------------------------------------------------------------------------------------------
  // Time: leases and warm slots

  /** When `tick` next has something to do: the earliest lease expiry, warm slot's end, or wait for a held run. */
  readonly nextDeadline = (): number | undefined => {
    let next = Number.POSITIVE_INFINITY
    for (const node of this.nodes.values()) {
      next = Math.min(
        next,
        node.ready ? node.leaseExpiresAt : next,
        ...node.warm.map((host) => host.until),
        ...node.held.values()
      )
    }
    for (const run of this.offered) if (run.adoptedUntil !== undefined) next = Math.min(next, run.adoptedUntil)
    return Number.isFinite(next) ? next : undefined
  }

  /** Lapsed leases make their Nodes NotReady and their runs NodeLost; expired warm slots go back. */
  readonly tick = (now: number) => {
    this.expireHanded(now)
    for (const run of [...this.offered]) {
      if (run.adoptedUntil === undefined || run.adoptedUntil > now) continue
      // No hello from its Node in time: it is lost (no slot of a Node was ever taken for it).
      this.offered.delete(run)
      run.adoptedUntil = undefined
      const aliveAt = this.aliveBefore.get(run.node)
      run.node = ""
      this.end(run, { type: "NodeLost" }, aliveAt)
    }
    for (const node of this.nodes.values()) {
      for (const [id, until] of node.held) {
        if (until > now) continue
        // No record claimed it in time: the agent stops it.
        node.held.delete(id)
        this.bump(node)
      }
      const warm = node.warm.filter((host) => host.until > now)
      if (warm.length !== node.warm.length) {
        node.warm = warm
        this.freed()
      }
      if (node.ready && node.leaseExpiresAt <= now) {
        node.ready = false
        this.lose(node, node.lastHeartbeat)
        this.nodeChanged(node)
      }
    }
  }

  /**
   * Every run of the Node is lost with it (NodeLost); recovery replaces them elsewhere. `aliveAt`: when the Node was
   * last known alive, where it was lost rather than let go (a lapsed lease, a new connection); absent: now (a drain).
   */
  private lose(node: NodeState, aliveAt?: number) {
    for (const owned of this.runs.values()) {
      for (const run of owned.values()) {
        // A run offered back waits for this Node's hello (reclaim), not for its old lease.
        if (run.node === node.key && run.facts.phase !== "Ended" && run.adoptedUntil === undefined) {
          this.end(run, run.stopAsked ? { type: "Stopped" } : { type: "NodeLost" }, aliveAt)
        }
      }
    }
    node.desired.clear()
    node.adopted.clear()
    node.held.clear()
    node.checkpoints.clear()
    this.dropCalls(node, undefined, { _tag: "Refused", code: "SandboxNotRunning", message: "the box's host was lost" })
    node.warm = []
    for (const wake of [...node.waiters]) wake()
  }

  // -------------------------------------------------------------------------------------------------------------------
  // Nodes as users manage them (spec: Node list, patch, delete)

  readonly cordon = (key: string, cordoned: boolean) => {
    const node = this.nodes.get(key)
    if (node === undefined || node.cordoned === cordoned) return
    node.cordoned = cordoned
    this.nodeChanged(node)
    if (!cordoned) this.freed()
  }

  /** A Node drained: its runs stop now (NodeLost, so they recover elsewhere); it takes nothing while cordoned. */
  readonly drain = (key: string) => {
    const node = this.nodes.get(key)
    if (node === undefined) return
    const runs = [...node.desired.keys()]
    this.lose(node)
    if (runs.length > 0) this.nodeChanged(node)
  }

  /**
   * A deleted Node is drained: its runs stop (NodeLost, so they recover elsewhere) and its agent is refused from now
   * on.
   */
  readonly remove = (key: string) => {
    const node = this.nodes.get(key)
    if (node === undefined) return
    node.ready = false
    this.lose(node)
    this.nodes.delete(key)
    this.offerings.clear()
    for (const listener of this.nodeListeners) listener({ key, removed: true })
  }

  // -------------------------------------------------------------------------------------------------------------------

  private viewOf(node: NodeState): NodeView {
    return {
      key: node.key,
      name: node.name,
      pool: node.scope.pool,
      namespace: node.scope.namespace,
      hostname: node.hello.hostname,
      agentVersion: node.hello.agentVersion,
      hello: node.hello,
      ready: node.ready,
      cordoned: node.cordoned,
      lastHeartbeat: node.lastHeartbeat,
      runs: node.slotsUsed,
      gpusUsed: node.gpusUsed
    }
  }

  private bump(node: NodeState) {
    node.version++
    for (const wake of [...node.waiters]) wake()
  }

  private nodeChanged(node: NodeState) {
    const view = this.viewOf(node)
    for (const listener of this.nodeListeners) listener(view)
  }

  /** Owners to tell of their facts within `activityReportMs` (a burst of commands is one step, not one per command). */
  private readonly telling = new Set<string>()

  private toldSoon(owner: string) {
    if (this.telling.has(owner)) return
    this.telling.add(owner)
    setTimeout(() => {
      this.telling.delete(owner)
      this.told(owner)
    }, activityReportMs).unref()
  }

  private told(owner: string) {
    PubSub.publishUnsafe(this.changes, { _tag: "Attempt", owner })
  }

  private freed() {
    PubSub.publishUnsafe(this.changes, { _tag: "Freed" })
  }
}

const signals: Readonly<Record<string, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGABRT: 6,
  SIGKILL: 9,
  SIGSEGV: 11,
  SIGPIPE: 13,
  SIGTERM: 15
}

/** A signal's number, for the shell's 128+n exit code of a program it killed. */
const signalNumber = (signal: string | undefined) => (signal === undefined ? 0 : signals[signal] ?? 0)

/** An input as status shows it once materialized: its digest, and a Volume's name, revision and uid. */
const materializedOf = (input: RunInput): MaterializedInput =>
  "volume" in input && input.volume !== undefined
    ? {
      name: input.name,
      sha256: input.sha256,
      volumeName: input.volume.name,
      volumeRevision: input.volume.revision,
      volumeUID: input.volume.uid
    }
    : { name: input.name, sha256: input.sha256 }

/** Why a program's inputs cannot be served here, before anything is resolved for it; undefined when they can. */
const refusalOf = (workload: WorkloadProgram): string | undefined => {
  for (const input of workload.inputs ?? []) {
    if ("unsupported" in input) {
      return `input ${input.name}: ${input.unsupported} inputs are not served on live hosts yet; use url, output or volume (docs/live.md, "Inputs").`
    }
    if ("mount" in input && input.mount?.writable === true) {
      return `${input.name} mounts Volume "${input.volume.name}" writable at ${input.mount.path}; live hosts mount Volumes read-only so far (readOnly: true; docs/live.md, "Volumes").`
    }
  }
  return undefined
}
