/**
 * The node agent (docs/live.md, "The node agent"): runs on a host, says hello to the control plane, and keeps the host
 * running exactly the programs the server wants (Protocol.ts) — each isolated with bubblewrap (Isolation.ts), its
 * log kept and shipped, its /platform/state checkpointed. The same code runs in-process behind `nodus serve --backend
 * local` and as `nodus agent` on another host; only the link differs.
 *
 * Level-triggered: each sync sends every run's state and gets back the runs that should exist. A run the server no
 * longer wants is stopped; an ended run is dropped once the server has been told. When the lease is lost (Stale), every
 * run stops: the server has declared them lost and is recovering them elsewhere, so nothing runs twice for long.
 */
import { createHash } from "node:crypto"
import {
  chmodSync,
  chownSync,
  closeSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  realpathSync,
  rmSync,
  statSync
} from "node:fs"
import { join, posix, relative } from "node:path"
import { pipeline } from "node:stream/promises"
import type { BoxReply, BoxRequest } from "../../core/capacity/Capacity.ts"
import * as Limits from "../../core/Limits.ts"
import type { AddressRange, ConnectRules } from "../../core/PublicAddress.ts"
import { syncRepliesBytesMax } from "../../core/SandboxBox.ts"
import { hostAddresses } from "../../net/Outbound.ts"
import { AgentHttpError } from "./AgentHttp.ts"
import { packArchive, unpackArchive } from "./Archive.ts"
import { BoxChannel, hostOutputBounds } from "./BoxChannel.ts"
import { imageOf, mountArea, overQuota, quotaPollMs, removeArea, unmountUnder } from "./DiskQuota.ts"
import { type RunningProxy, startEgressProxy } from "./EgressProxy.ts"
import { fetchInput, fetchProblem } from "./InputFetch.ts"
import { type IsolationSupport, type Outcome as ProgramExit, runIsolated, type RunningProgram } from "./Isolation.ts"
import { keptLogOf, KeptWorkspaces } from "./KeptWorkspaces.ts"
import {
  type AgentLink,
  type BoxCallReply,
  type Desired,
  type Exit,
  type Hello,
  type Lease,
  leaseExpiryMs,
  outputBytesMax,
  type RunInput,
  type RunReport,
  type RunSpec
} from "./Protocol.ts"
import { workerArgv, WorkerConnection, workerEnv, WorkerLost, type WorkerTarget } from "./PythonWorker.ts"
import { ReadyAreas } from "./ReadyAreas.ts"
import { givenValues, scrub } from "./Scrub.ts"
import { isWarmable, type WarmBox, WarmBoxes } from "./WarmBoxes.ts"

/** The most log text one sync carries per run: a noisy program never makes a sync slow. */
const logChunkMax = 256 * 1024
/** How long a stopped program has between SIGTERM and SIGKILL. */
const stopGraceMs = 10_000

export interface AgentOptions {
  readonly link: AgentLink
  readonly hello: Hello
  /** The agent's own files: checkpoints (never visible to a program). */
  readonly dataDir: string
  /**
   * Runs' areas and logs: each run's directory is bound into its box, so this one must be searchable (not readable)
   * by the user boxes run as — unlike the data directory, which is private (0700).
   */
  readonly runsDir: string
  readonly support: IsolationSupport
  /** Host paths no program may see (the control plane's data directory, the agent's credential). */
  readonly hidden: ReadonlyArray<string>
  /** The agent's clock for checkpoint intervals (epoch ms). */
  readonly now: () => number
  /** CA certificates (PEM) trusted for `url` inputs besides the system's (a host behind a TLS-inspecting proxy). */
  readonly inputCa?: string | undefined
  /**
   * The operator's exceptions to the address rule (`--egress-allow-cidr`): ranges a box's proxy (Open, AllowList) and
   * `url` inputs may reach although they are not public — a loopback test server, a private mirror.
   */
  readonly egressAllow?: ReadonlyArray<AddressRange> | undefined
  /** Addresses no box and no input may reach besides this host's own: the control plane's, for a remote agent. */
  readonly unreachable?: ReadonlyArray<string> | undefined
  /** Sandbox boxes kept started ahead of any Sandbox (WarmBoxes.ts); 0 or absent: none. */
  readonly warmBoxes?: number | undefined
  /** The device nodes of this host's GPUs (HostFacts.detectGpus), in the order the hello lists them; absent: none. */
  readonly gpus?: ReadonlyArray<string> | undefined
  readonly log?: (message: string) => void
}

interface LocalRun {
  readonly spec: RunSpec
  /** Its host directory (the warm box's, or one made ahead, where it took one). */
  area: string
  /** Where its stdout and stderr go: the area's `log` (moved beside the area when its /workspace is kept). */
  logPath: string
  phase: RunReport["phase"]
  program: RunningProgram | undefined
  exit: Exit | undefined
  stopping: boolean
  /** Log bytes the server has kept. */
  logAcked: number
  checkpoint: { seq: number; sizeBytes: number } | undefined
  checkpointFailures: number
  nextCheckpointAt: number | undefined
  suspend: { episode: number; state: "Pending" | "Saved" | "Failed"; failures: number } | undefined
  checkpointing: boolean
  /** The server has been sent its exit (so it may be dropped once no longer wanted). */
  exitReported: boolean
  /** Its egress proxy (Open, AllowList), while it runs. */
  proxy: RunningProxy | undefined
  /** A box's supervisor, once it is up (a Sandbox's run). */
  channel: BoxChannel | undefined
  /** A Function's worker, once it imported its code (a worker run). */
  worker: WorkerConnection | undefined
  /** A box whose /workspace is kept if it ends unasked: it was served, or it took a kept one (KeptWorkspaces.ts). */
  keepable: boolean
  /** Its /workspace came from one its host kept: nothing is restored into it. */
  fromKept: boolean
  /** Stopped because the lease lapsed: lost, not asked to stop. */
  lost: boolean
  /** Its quota is polled: the host polls them all, or its area's filesystem could not be made. */
  pollQuota: boolean
  /** Where disk quotas are polled: why the box was stopped past its quota, and whether a check is under way. */
  overQuota?: string | undefined
  quotaChecking?: boolean | undefined
  quotaCheckAt?: number | undefined
}

export class Agent {
  private readonly options: AgentOptions
  private readonly runs = new Map<string, LocalRun>()
  private lease: Lease | undefined
  private version = 0
  /** When a sync was last answered under a lease: past the lease's expiry without one, the agent stops everything. */
  private lastSynced = 0
  /** How long the server's leases last (from the last hello). */
  private expiryMs = leaseExpiryMs
  private stopped = false
  private pokes = 0
  private syncing: Promise<void> | undefined
  private loop: Promise<void> | undefined
  /** Box calls taken (by id) and the replies not yet sent. */
  private readonly calls = new Set<number>()
  private readonly replies: Array<BoxCallReply> = []
  /** The GPUs (device nodes) each run holds until it exits: the server counts them per Node, the agent picks which. */
  private readonly gpusHeld = new Map<string, ReadonlyArray<string>>()

  private readonly warm: WarmBoxes
  /** Areas of the default disk quota made ahead, where areas are filesystems of their quota (ReadyAreas.ts). */
  private readonly areas: ReadyAreas
  private readonly kept: KeptWorkspaces
  /**
   * The bounds of the output this host's boxes' commands keep in this process, all boxes together (CommandOutput.ts).
   */
  private readonly outputBounds = hostOutputBounds()
  /** Mounts a previous agent left under runsDir (its boxes died with it), unmounted before any area is made. */
  private readonly swept: Promise<void>

  constructor(options: AgentOptions) {
    this.options = options
    mkdirSync(options.runsDir, { recursive: true })
    chmodSync(options.runsDir, 0o711)
    // Boxes a previous agent here left (it stopped or was killed): their /workspace is kept before anything starts.
    this.kept = new KeptWorkspaces({
      dir: join(options.runsDir, "kept"),
      now: options.now,
      maxAgeMs: Limits.keptWorkspaceMaxAgeMs
    })
    this.kept.keepLeftovers(options.runsDir)
    this.swept = unmountUnder(options.runsDir)
    this.areas = new ReadyAreas({
      dir: join(options.runsDir, "ready"),
      size: options.support.diskQuotas === "loop" ? 1 : 0,
      bytes: Limits.boxDiskBytesDefault,
      say: (message) => this.say(message)
    })
    this.warm = new WarmBoxes({
      size: options.warmBoxes ?? 0,
      dir: join(options.runsDir, "warm"),
      support: options.support,
      hidden: options.hidden,
      now: options.now,
      say: (message) => this.say(message),
      outputBounds: this.outputBounds
    })
  }

  /** Says hello (once it is answered the Node can take work) and keeps syncing until `stop`. */
  readonly connect = async () => {
    this.lease ??= await this.hello()
    this.loop ??= this.syncLoop()
    this.warm.fill()
    this.areas.fill()
  }

  /** Stops every program and the loop (the agent is going away). */
  readonly stop = async () => {
    this.stopped = true
    this.warm.stop()
    const areasGone = this.areas.stop()
    for (const run of this.runs.values()) run.program?.stop(0)
    await Promise.all([...this.runs.values()].map((run) => run.program?.exited.catch(() => undefined)))
    await areasGone
    // Nothing of ours stays mounted on the host: the areas' images keep what the boxes wrote.
    await this.warm.ended
    await unmountUnder(this.options.runsDir)
  }

  /**
   * Checkpoints due by the agent's clock (the agent's timer calls it every second; tests call it as they move time).
   */
  readonly tick = () => {
    const now = this.options.now()
    // No answer under a lease for longer than a lease lasts: the server has given these runs up (and is recovering
    // them elsewhere), so they stop here — nothing runs twice for long, however the network is cut.
    if (
      this.lastSynced > 0 && now - this.lastSynced > this.expiryMs &&
      [...this.runs.values()].some((run) => run.phase !== "Exited" && !run.stopping)
    ) {
      this.say("no answer from the server for longer than a lease: stopping every program")
      for (const run of this.runs.values()) {
        if (run.phase === "Exited") continue
        run.lost = true
        this.halt(run)
      }
    }
    for (const run of this.runs.values()) if (run.pollQuota) void this.checkQuota(run)
    for (const run of this.runs.values()) {
      if (run.phase === "Running" && run.nextCheckpointAt !== undefined && run.nextCheckpointAt <= now) {
        run.nextCheckpointAt = now + run.spec.checkpointIntervalMs!
        void this.saveCheckpoint(run, undefined)
      }
    }
  }

  /** The runs the agent has now, for tests and `nodus agent`'s status line. */
  readonly runIds = (): ReadonlyArray<string> => [...this.runs.keys()]

  /** Warm boxes ready to be taken now (WarmBoxes.ts). */
  readonly warmReady = () => this.warm.readyCount

  /** The newest desired version applied. */
  readonly appliedVersion = () => this.version

  /**
   * Whether something is under way here that the server has not been told of: a program starting or stopping, an
   * exit or checkpoint not yet reported, a sync in flight. Tests that move time wait until it is not.
   */
  readonly busy = (): boolean =>
    this.syncing !== undefined || this.pokes > 0 ||
    [...this.runs.values()].some((run) =>
      run.phase === "Starting" || run.checkpointing || (run.stopping && run.phase !== "Exited") ||
      (run.phase === "Exited" && !run.exitReported)
    )

  /** Syncs now (renewing the lease), beside the long poll. */
  readonly syncNow = () => this.syncOnce(0)

  /** The host directory of a run: /platform/{work,state,outputs,inputs} inside. */
  readonly areaOf = (id: string) => join(this.options.runsDir, ...id.split("/"))

  // -------------------------------------------------------------------------------------------------------------------
  // Syncing

  private async syncLoop() {
    while (!this.stopped) {
      try {
        if (this.lease === undefined) this.lease = await this.hello()
        await this.syncOnce(this.lease.renewMs)
        // A link that answers without waiting (in-process, nothing to hold the poll) must not keep the event loop to
        // itself: the next poll goes after whatever else is due.
        await new Promise((resolve) => setImmediate(resolve))
      } catch (error) {
        this.say(`sync failed (${error instanceof Error ? error.message : String(error)}); trying again in a second`)
        await new Promise((resolve) => setTimeout(resolve, 1_000))
      }
    }
  }

  /** A hello that names the runs held here, so a restarted server can keep the ones it placed. */
  private async hello(): Promise<Lease> {
    const lease = await this.options.link.hello({ ...this.options.hello, runs: [...this.runs.keys()] })
    // Calls of the previous lease were given up by the server (answered as lost): their replies go nowhere.
    this.calls.clear()
    this.replies.length = 0
    this.lastSynced = this.options.now()
    this.expiryMs = lease.expiryMs
    return lease
  }

  /** Something changed here: tell the server now, beside the long poll. */
  private poke() {
    this.pokes++
    if (this.syncing !== undefined || this.lease === undefined || this.stopped) return
    this.syncing = (async () => {
      while (this.pokes > 0 && this.lease !== undefined && !this.stopped) {
        this.pokes = 0
        await this.syncOnce(0).catch(() => undefined)
      }
      this.syncing = undefined
    })()
  }

  private async syncOnce(waitMs: number) {
    const lease = this.lease
    if (lease === undefined) return
    const reports = [...this.runs.values()].map((run) => this.reportOf(run))
    const replies = this.takeReplies()
    const response = await this.options.link.sync({
      node: this.options.hello.node,
      epoch: lease.epoch,
      version: this.version,
      runs: reports,
      waitMs,
      ...(replies.length === 0 ? {} : { replies })
    })
      .catch((error: unknown) => {
        // A reply the server refused (too large, malformed) would be refused again at every sync: it goes as a refusal.
        const refused = error instanceof AgentHttpError && error.status >= 400 && error.status < 500 &&
          error.status !== 401
        this.replies.unshift(
          ...(refused
            ? replies.map((reply) => ({
              id: reply.id,
              reply: {
                _tag: "Refused" as const,
                code: "Unavailable" as const,
                message: "the box's answer could not be delivered"
              }
            }))
            : replies)
        )
        if (replies.length > 0) this.poke()
        throw error
      })
    if (response._tag === "Stale") {
      if (this.lease === lease) {
        // The server lost this lease (it lapsed, or the server restarted): say hello again with the runs held here;
        // the server keeps the ones it still wants, and the first sync stops the rest.
        this.say("the lease lapsed or the server restarted: saying hello again with the runs held here")
        this.lease = undefined
        this.version = 0
      }
      return
    }
    this.lastSynced = this.options.now()
    for (const report of reports) {
      const run = this.runs.get(report.id)
      if (run === undefined) continue
      const acked = response.logAcks[report.id]
      if (acked !== undefined) run.logAcked = Math.max(run.logAcked, acked)
      if (report.phase === "Exited") run.exitReported = true
    }
    if (response.desired.version >= this.version || this.version === 0) this.apply(response.desired)
  }

  /** The replies one sync carries: as many as fit `syncRepliesBytesMax` (at least one); the rest go in the next. */
  private takeReplies(): Array<BoxCallReply> {
    let bytes = 0
    let count = 0
    for (const reply of this.replies) {
      bytes += replySize(reply)
      if (count > 0 && bytes > syncRepliesBytesMax) break
      count++
    }
    const taken = this.replies.splice(0, count)
    if (this.replies.length > 0) this.poke()
    return taken
  }

  private reportOf(run: LocalRun): RunReport {
    const log = readFrom(run.logPath, run.logAcked, logChunkMax)
    return {
      id: run.spec.id,
      phase: run.phase,
      exit: run.exit,
      checkpoint: run.checkpoint,
      checkpointFailures: run.checkpointFailures,
      suspend: run.suspend,
      logOffset: run.logAcked,
      log,
      ...(run.channel === undefined ? {} : { busy: run.channel.busy }),
      ...(run.worker === undefined ? {} : { busy: run.worker.busy })
    }
  }

  /** Makes the host run what the server wants: new runs start, unwanted ones stop, told-about ended ones go. */
  private apply(desired: Desired) {
    this.version = desired.version
    const wanted = new Set([...desired.runs.map((spec) => spec.id), ...desired.adopted])
    for (const spec of desired.runs) if (!this.runs.has(spec.id)) this.begin(spec)
    for (const [id, run] of this.runs) {
      if (wanted.has(id)) continue
      if (run.phase !== "Exited") this.halt(run)
      else if (run.exitReported) this.drop(run)
    }
    this.call(desired.calls)
    for (const [id, episode] of Object.entries(desired.checkpoints)) {
      const run = this.runs.get(id)
      if (run === undefined || run.phase !== "Running" || run.suspend?.episode === episode) continue
      run.suspend = { episode, state: "Pending", failures: 0 }
      void this.saveCheckpoint(run, episode)
    }
  }

  // -------------------------------------------------------------------------------------------------------------------
  // A run's life

  private begin(spec: RunSpec) {
    const keep = keepsWorkspace(spec)
    // A Sandbox's box of the common shape takes a warm one, whose area is then the run's — unless this host kept its
    // last box's /workspace, which its own area starts from (makeArea).
    const warm = !(keep && this.kept.has(spec.owner, spec.restore?.seq ?? 0)) && isWarmable(spec)
      ? this.warm.take()
      : undefined
    const area = warm?.area ?? this.areaOf(spec.id)
    if (warm !== undefined && keep) this.kept.mark(area, spec.owner, spec.restore?.seq ?? 0)
    const run: LocalRun = {
      spec,
      area,
      logPath: join(area, "log"),
      phase: "Starting",
      program: undefined,
      exit: undefined,
      stopping: false,
      logAcked: 0,
      checkpoint: undefined,
      checkpointFailures: 0,
      nextCheckpointAt: undefined,
      suspend: undefined,
      checkpointing: false,
      exitReported: false,
      proxy: undefined,
      channel: undefined,
      worker: undefined,
      keepable: false,
      fromKept: false,
      lost: false,
      pollQuota: this.options.support.diskQuotas === "polled"
    }
    this.runs.set(spec.id, run)
    // No program runs unisolated: a host without bubblewrap refuses each run with the fix (the agent said so at start).
    const missing = this.options.support.bwrap === undefined ? this.options.support.problems.join("; ") : undefined
    if (missing !== undefined) return this.exited(run, undefined, `this host cannot isolate programs: ${missing}`)
    const gpus = this.takeGpus(spec)
    if (typeof gpus === "string") return this.exited(run, undefined, gpus, true)
    // The host could not set the run up (its box, its area, a checkpoint to restore): not the program's failure.
    void (warm === undefined ? this.execute(run) : this.serveWarm(run, warm)).catch((error) =>
      this.exited(
        run,
        undefined,
        `the host could not start it: ${error instanceof Error ? error.message : String(error)}`,
        true
      )
    )
  }

  /** The GPUs a run is given: free ones of this host, or why there are not enough (the host's failure to set it up). */
  private takeGpus(spec: RunSpec): ReadonlyArray<string> | string {
    const wanted = spec.gpus ?? 0
    if (wanted === 0) return []
    const held = new Set([...this.gpusHeld.values()].flat())
    const free = (this.options.gpus ?? []).filter((device) => !held.has(device))
    if (free.length < wanted) return `the run needs ${wanted} GPUs and this host has ${free.length} free`
    const taken = free.slice(0, wanted)
    this.gpusHeld.set(spec.id, taken)
    return taken
  }

  /**
   * What a run's egress proxy and its `url` inputs may connect to (core/PublicAddress.ts): public addresses, never this
   * host's own (read now: interfaces come and go) nor the control plane's, and the operator's exceptions.
   */
  private egressRules(): ConnectRules {
    return {
      exceptions: this.options.egressAllow ?? [],
      own: [...hostAddresses(), ...(this.options.unreachable ?? [])]
    }
  }

  /**
   * The run's area, fresh: a filesystem of its quota (DiskQuota.ts) where the host can make one, else a directory
   * whose usage the agent polls.
   */
  private async makeArea(run: LocalRun) {
    const { spec } = run
    await this.swept
    await removeArea(run.area)
    const keep = keepsWorkspace(spec)
    const restoreSeq = spec.restore?.seq ?? 0
    const keptBase = keep ? this.kept.take(spec.owner, restoreSeq, run.area) : undefined
    if (keptBase !== undefined) {
      // What it starts from is kept again should this box end unasked before it serves.
      run.fromKept = true
      run.keepable = true
      this.say(`${spec.id} starts from the /workspace this host kept of its Sandbox's last box`)
    } else if (!run.pollQuota) await this.mountArea(run)
    mkdirSync(join(run.area, "state"), { recursive: true })
    if (keep) this.kept.mark(run.area, spec.owner, keptBase ?? restoreSeq)
  }

  /** The run's area as a filesystem of its quota: one made ahead where its quota is the default, else made now. */
  private async mountArea(run: LocalRun) {
    const ready = diskBytesOf(run.spec) === Limits.boxDiskBytesDefault ? this.areas.take() : undefined
    if (ready !== undefined) {
      run.area = ready
      run.logPath = join(ready, "log")
      return
    }
    try {
      await mountArea(run.area, diskBytesOf(run.spec))
    } catch (error) {
      // (loop devices used up, say): the run goes on, its quota polled.
      this.say(
        `the area of ${run.spec.id} could not be a filesystem of its own (${
          messageOf(error)
        }); its disk quota is polled`
      )
      await removeArea(run.area)
      run.pollQuota = true
    }
  }

  /** Where quotas are polled: a box past its quota is stopped, and its exit says why. */
  private async checkQuota(run: LocalRun) {
    if (
      run.phase === "Exited" || run.program === undefined || run.quotaChecking === true || run.overQuota !== undefined
    ) return
    const now = this.options.now()
    if (now < (run.quotaCheckAt ?? 0)) return
    run.quotaCheckAt = now + quotaPollMs
    run.quotaChecking = true
    try {
      const used = await overQuota(run.area, diskBytesOf(run.spec))
      if (used === undefined || run.program === undefined) return
      run.overQuota = `its writable space holds ${used} bytes, past its disk quota of ${
        diskBytesOf(run.spec)
      } bytes (resources.disk): the box was stopped`
      run.program?.stop(0)
    } catch {
      // the area is going (the run ended meanwhile): nothing to bound
    } finally {
      run.quotaChecking = false
    }
  }

  private async execute(run: LocalRun) {
    const { spec } = run
    await this.makeArea(run)
    // A worker's interpreter is the host's to have: without it nothing is fetched or started.
    const python = spec.worker === undefined ? undefined : interpreterOf(spec.worker.python)
    if (python?.problem !== undefined) return this.exited(run, undefined, python.problem)
    if (spec.restore !== undefined && !run.fromKept) await this.restore(run)
    for (const input of spec.inputs) {
      const problem = await this.materialize(run, input)
      if (problem !== undefined) return this.exited(run, undefined, problem)
    }
    if (spec.egress !== "Deny") {
      const allow = spec.egress === "Open" ? "any" : spec.egress.allow
      run.proxy = await startEgressProxy({
        socket: proxySocketOf(run.area),
        allow,
        logPath: run.logPath,
        rules: this.egressRules()
      })
    }
    if (spec.init !== undefined) {
      const init = await this.launch(run, spec.init.argv, spec.init.timeoutMs)
      if (run.stopping) return this.exited(run, init, undefined)
      if (init.timedOut) {
        return this.exited(run, init, `initCommand did not finish within ${spec.init.timeoutMs / 1000} s`)
      }
      if (init.exitCode !== 0) return this.exited(run, init, `initCommand exited with ${init.exitCode ?? init.signal}`)
    }
    if (run.stopping) return this.exited(run, undefined, undefined)
    if (spec.box === true) return this.serve(run)
    if (spec.worker !== undefined && python?.command !== undefined) return this.work(run, spec.worker, python.command)
    const main = this.launch(run, spec.argv, undefined)
    run.phase = "Running"
    if (spec.checkpointIntervalMs !== undefined) run.nextCheckpointAt = this.options.now() + spec.checkpointIntervalMs
    this.poke()
    const exit = await main
    if (exit.exitCode !== 0 || run.stopping) return this.exited(run, exit, undefined)
    const collected = await this.collectOutputs(run)
    this.exited(
      run,
      collected.problem === undefined ? exit : { ...exit, exitCode: 1 },
      collected.problem,
      false,
      collected.outputs
    )
  }

  /** A Sandbox's box: Running once its supervisor is up, serving box calls until it is stopped. */
  private async serve(run: LocalRun) {
    const exit = this.launch(run, run.spec.argv, undefined, { box: true })
    const control = run.program?.control
    if (control === undefined) return this.exited(run, await exit, "the box has no supervisor")
    const channel = new BoxChannel(control, this.options.now, this.outputBounds)
    channel.onChange = () => this.poke()
    const up = await Promise.race([channel.ready.then(() => true), exit.then(() => false)])
    if (up && !run.stopping) {
      run.channel = channel
      run.phase = "Running"
      run.keepable = true
      this.poke()
    }
    const ended = await exit
    channel.close()
    // A box that ended before its supervisor was up could not be set up: the Sandbox's start failed.
    this.exited(
      run,
      ended,
      up || run.stopping ? undefined : `the box ended before it was ready (${ended.exitCode ?? ended.signal})`
    )
  }

  /**
   * A Function's worker (PythonWorker.ts) in the run's box, isolated as a Job's program is, on the host userland's
   * python3.<minor>: its code archive extracted in the box, Running once it imported the code, answering calls until it
   * is stopped. A worker that could not load its code ends the run before it was Running, with the (scrubbed) error.
   */
  private async work(run: LocalRun, worker: NonNullable<RunSpec["worker"]>, python: string) {
    const codeDir = worker.codeInput === undefined ? run.spec.workingDir ?? "/platform/work" : "/platform/work/code"
    const target: WorkerTarget = {
      codeDir,
      module: worker.module,
      qualname: worker.qualname,
      cls: worker.cls,
      concurrency: worker.concurrency,
      archive: worker.codeInput === undefined ? undefined : `/platform/inputs/${worker.codeInput}`
    }
    // The worker's own variables come last: the Function's env does not redirect what it imports.
    const exit = this.launch(run, workerArgv(python), undefined, {
      pipes: true,
      env: { ...run.spec.env, ...workerEnv(target) }
    })
    const control = run.program?.control
    if (control === undefined) return this.exited(run, await exit, "the worker has no pipes")
    const connection = new WorkerConnection(control.input, control.output, givenValues(run.spec))
    connection.onBusy = () => this.poke()
    const loaded = await connection.ready.then(
      () => undefined,
      (error: unknown) => (error instanceof WorkerLost ? "the worker ended before it was ready" : messageOf(error))
    )
    if (loaded === undefined && !run.stopping) {
      run.worker = connection
      run.phase = "Running"
      this.poke()
    }
    const ended = await exit
    run.worker = undefined
    if (run.stopping || loaded !== undefined) return this.exited(run, ended, run.stopping ? undefined : loaded)
    // It serves until stopped: a worker that ended on its own, even with 0, did not finish anything.
    this.exited(run, ended, ended.exitCode === 0 ? "the worker exited on its own" : undefined)
  }

  /** A Sandbox's box that was warm: its snapshot restored into it, then configured for the run, then served. */
  private async serveWarm(run: LocalRun, warm: WarmBox) {
    run.program = warm.program
    if (run.stopping) warm.program.stop(0)
    try {
      if (run.spec.restore !== undefined) await this.restore(run)
      await warm.channel.configure(run.spec.env, run.spec.workingDir, run.spec.argv)
    } catch (error) {
      // The box never served this run: it goes, and the run ends as the host's failure to set it up (a stop asked
      // meanwhile is a stop).
      warm.program.stop(0)
      await warm.exited.catch(() => undefined)
      if (run.stopping) return this.exited(run, undefined, undefined)
      throw error
    }
    if (!run.stopping) {
      run.channel = warm.channel
      warm.channel.onChange = () => this.poke()
      run.phase = "Running"
      run.keepable = true
      this.poke()
    }
    const ended = await warm.exited
    warm.channel.close()
    this.exited(run, ended, undefined)
  }

  /** Box calls the server asked: each is answered once, in a later sync. */
  private call(calls: Desired["calls"]) {
    const asked = new Set<number>()
    for (const call of calls ?? []) {
      asked.add(call.id)
      if (this.calls.has(call.id)) continue
      this.calls.add(call.id)
      void answerOf(this.runs.get(call.run), call.request).then((answer) => {
        this.replies.push({ id: call.id, reply: answer })
        this.poke()
      })
    }
    // Calls the server no longer asks (answered, or given up): forgotten.
    for (const id of this.calls) if (!asked.has(id)) this.calls.delete(id)
  }

  // -------------------------------------------------------------------------------------------------------------------
  // Inputs: materialized read-only before the program starts (spec: JobInput)

  /**
   * Writes one input to <area>/inputs/<name> (the box's /platform/inputs, read-only) and checks its SHA-256 at the end
   * of the stream: a mismatch keeps nothing and fails the run (SHA256Mismatch). Answers the problem, if any.
   */
  private async materialize(run: LocalRun, input: RunInput): Promise<string | undefined> {
    const dir = join(run.area, "inputs")
    mkdirSync(dir, { recursive: true })
    const file = join(dir, input.name)
    const source = "url" in input ? `${input.url}` : "the server"
    if ("mountPath" in input && input.mountPath !== undefined) {
      return this.unpack(run, input, mountDirOf(run.area, input.name))
    }
    if ("volume" in input && input.volume !== undefined) return this.unpack(run, input, file)
    try {
      const bytes = "url" in input
        ? await fetchInput(input.url, { rules: this.egressRules(), extraCa: this.options.inputCa })
        : await this.fromServer(run, input.name)
      const hash = createHash("sha256")
      async function* hashed() {
        for await (const chunk of bytes) {
          hash.update(chunk)
          yield chunk
        }
      }
      await pipeline(hashed, createWriteStream(file, { mode: 0o644 }))
      const actual = hash.digest("hex")
      if (actual !== input.sha256) {
        rmSync(file, { force: true })
        return `SHA256Mismatch: input ${input.name} from ${source}: its SHA-256 is ${actual}, not the declared ${input.sha256}`
      }
      return undefined
    } catch (error) {
      rmSync(file, { force: true })
      if ("url" in input) return `input ${input.name}: ${fetchProblem(input.url, error)}`
      return `input ${input.name} could not be read from ${source}: ${
        error instanceof Error ? error.message : String(error)
      }`
    }
  }

  /**
   * A Volume's revision as a directory: its archive streamed from the server through the hash into `tar -x`, run as
   * the user the box runs as (an archive can write nothing that user could not; GNU tar keeps members inside the
   * directory, refusing `..` and deferring links that lead out). A digest that differs removes what was unpacked.
   */
  private async unpack(run: LocalRun, input: RunInput, dir: string): Promise<string | undefined> {
    const volume = "volume" in input && input.volume !== undefined
      ? `Volume "${input.volume.name}" revision ${input.volume.revision}`
      : input.name
    const runAs = this.options.support.runAs
    try {
      mkdirSync(dir, { recursive: true, mode: 0o755 })
      if (runAs !== undefined) chownSync(dir, runAs.uid, runAs.gid)
      const bytes = await this.fromServer(run, input.name)
      const hash = createHash("sha256")
      async function* hashed() {
        for await (const chunk of bytes) {
          hash.update(chunk)
          yield chunk
        }
      }
      const bound = volumeBoundOf(input, run.spec)
      const { code, stderr, overBound } = await unpackArchive(hashed(), dir, {
        runAs,
        extra: ["--no-same-permissions"],
        bound
      })
      if (overBound !== undefined) throw new Error(overBound)
      const actual = hash.digest("hex")
      if (actual !== input.sha256) {
        rmSync(dir, { recursive: true, force: true })
        return `SHA256Mismatch: input ${input.name} (${volume}) from the server: its SHA-256 is ${actual}, not the committed ${input.sha256}`
      }
      if (code !== 0) throw new Error(`unpacking its archive failed: ${stderr.trim().slice(0, 300)}`)
      return undefined
    } catch (error) {
      rmSync(dir, { recursive: true, force: true })
      return `input ${input.name} (${volume}) could not be read from the server: ${
        error instanceof Error ? error.message : String(error)
      }`
    }
  }

  private fromServer(run: LocalRun, name: string): Promise<AsyncIterable<Uint8Array>> {
    const lease = this.lease
    if (lease === undefined) return Promise.reject(new Error("the lease was lost"))
    return this.options.link.getInput({ node: this.options.hello.node, epoch: lease.epoch, run: run.spec.id, name })
  }

  // -------------------------------------------------------------------------------------------------------------------
  // Outputs: collected when the program succeeds (spec: JobOutput), uploaded to the server

  /**
   * Uploads the run's declared outputs and everything under /platform/outputs (as `outputs`). A declared output that
   * is missing, outside the run's area or too large fails the run (the program said it would leave it). Nothing is
   * read through a link: what a path resolves to must lie in the run's own area.
   */
  private async collectOutputs(
    run: LocalRun
  ): Promise<{ readonly outputs: Array<{ name: string; path: string }>; readonly problem: string | undefined }> {
    const outputs: Array<{ name: string; path: string }> = []
    const wanted = [...run.spec.outputs.map((output) => ({ ...output, declared: true })), {
      name: "outputs",
      path: "/platform/outputs",
      declared: false
    }]
    for (const output of wanted) {
      const found = locate(run.area, output.path)
      if (typeof found === "string") {
        if (!output.declared) continue
        return { outputs, problem: `output ${output.name}: ${found}` }
      }
      if (!output.declared && found.directory && readdirSync(found.path).length === 0) continue
      try {
        const file = found.directory ? await this.archive(run, found.path, output.name) : found.path
        if (statSync(file).size > outputBytesMax) {
          return { outputs, problem: `output ${output.name}: larger than ${outputBytesMax} bytes (FileTooLarge)` }
        }
        const lease = this.lease
        if (lease === undefined) throw new Error("the lease was lost")
        await this.options.link.putOutput({
          node: this.options.hello.node,
          epoch: lease.epoch,
          run: run.spec.id,
          name: output.name
        }, file)
        outputs.push({ name: output.name, path: output.path })
      } catch (error) {
        return {
          outputs,
          problem: `output ${output.name} could not be uploaded: ${
            error instanceof Error ? error.message : String(error)
          }`
        }
      }
    }
    return { outputs, problem: undefined }
  }

  /** A directory as one tar.zst in the agent's private directory. */
  private async archive(run: LocalRun, dir: string, name: string): Promise<string> {
    const staging = join(this.options.dataDir, "outputs", ...run.spec.id.split("/"))
    mkdirSync(staging, { recursive: true, mode: 0o700 })
    const file = join(staging, `${name}.tar.zst`)
    await packArchive(file, dir, ["."])
    return file
  }

  /**
   * Runs one program of the run in its box, to its end (or its timeout): a Sandbox's box with its supervisor (`box`),
   * or a program on pipes (`pipes`, a worker) with an env of its own.
   */
  private launch(
    run: LocalRun,
    argv: ReadonlyArray<string>,
    timeoutMs: number | undefined,
    options: { readonly box?: boolean; readonly pipes?: boolean; readonly env?: Readonly<Record<string, string>> } = {}
  ): Promise<ProgramExit & { readonly timedOut: boolean }> {
    const { spec } = run
    const program = runIsolated({
      argv,
      env: options.env ?? spec.env,
      workingDir: spec.workingDir,
      secretFiles: spec.secretFiles.map((file) => ({
        name: file.name,
        content: Buffer.from(file.contentBase64, "base64")
      })),
      egress: spec.egress === "Deny" ? "Deny" : { proxy: proxySocketOf(run.area), node: process.execPath },
      memoryBytes: spec.memoryBytes,
      pidsMax: spec.pidsMax,
      area: run.area,
      logPath: run.logPath,
      box: options.box === true ? { node: process.execPath } : undefined,
      pipes: options.pipes,
      devices: this.gpusHeld.get(spec.id),
      mounts: spec.inputs.flatMap((
        input
      ) => ("mountPath" in input && input.mountPath !== undefined
        ? [{ dir: mountDirOf(run.area, input.name), at: input.mountPath }]
        : [])
      )
    }, { support: this.options.support, hidden: this.options.hidden })
    run.program = program
    if (run.stopping) program.stop(stopGraceMs)
    let timedOut = false
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
      timedOut = true
      program.stop(0)
    }, timeoutMs)
    return program.exited.then((exit) => {
      clearTimeout(timer)
      return { ...exit, timedOut }
    })
  }

  private exited(
    run: LocalRun,
    exit: ProgramExit | undefined,
    problem: string | undefined,
    setupFailed = false,
    outputs: ReadonlyArray<{ name: string; path: string }> = []
  ) {
    if (run.phase === "Exited") return
    void run.proxy?.close()
    this.gpusHeld.delete(run.spec.id)
    // A box that ended without the server asking (its supervisor died, the lease lapsed): its /workspace stays here.
    if (run.spec.keepWorkspace === true && run.keepable && (!run.stopping || run.lost)) this.keepWorkspace(run)
    run.phase = "Exited"
    run.program = undefined
    problem ??= run.overQuota
    run.exit = {
      exitCode: exit?.exitCode ?? (problem === undefined ? undefined : 1),
      signal: exit?.signal,
      oomKilled: exit?.oomKilled ?? false,
      stopped: run.stopping,
      problem,
      setupFailed,
      lastLines: lastLines(run.logPath, Limits.failureLogLines),
      outputs
    }
    this.poke()
  }

  private keepWorkspace(run: LocalRun) {
    try {
      if (!this.kept.keep(run.area)) return
      if (!existsSync(run.logPath)) run.logPath = keptLogOf(run.area)
      this.say(`${run.spec.id} ended unasked: its /workspace is kept for its Sandbox's next box here`)
    } catch (error) {
      this.say(
        `${run.spec.id}: its /workspace could not be kept (${error instanceof Error ? error.message : String(error)})`
      )
    }
  }

  private halt(run: LocalRun) {
    if (run.stopping) return
    run.stopping = true
    run.program?.stop(stopGraceMs)
  }

  private drop(run: LocalRun) {
    this.runs.delete(run.spec.id)
    // An area of the default quota that still holds its filesystem (not kept) serves the next run of that quota.
    const reusable = !run.pollQuota && diskBytesOf(run.spec) === Limits.boxDiskBytesDefault &&
      existsSync(imageOf(run.area))
    void (reusable ? this.areas.recycle(run.area) : removeArea(run.area))
      .catch((error: unknown) => this.say(`the area of ${run.spec.id} could not be removed: ${messageOf(error)}`))
    rmSync(keptLogOf(run.area), { force: true })
    for (const staging of ["outputs", "checkpoints"]) {
      rmSync(join(this.options.dataDir, staging, ...run.spec.id.split("/")), { recursive: true, force: true })
    }
  }

  // -------------------------------------------------------------------------------------------------------------------
  // Checkpoints: the checkpoint paths saved together as one tar.zst, uploaded; restored from the server on any host

  /**
   * Saves the run's checkpoint paths (spec: Recovery.checkpoint.paths, under /platform) as one tar.zst of the run's
   * area, refuses it above maxSize before any upload, and uploads it: the server numbers it among its owner's.
   */
  private async saveCheckpoint(run: LocalRun, episode: number | undefined) {
    if (run.checkpointing) return
    run.checkpointing = true
    try {
      const lease = this.lease
      if (lease === undefined) throw new Error("the lease was lost")
      const root = realpathSync(run.area)
      const entries = run.spec.checkpoint.paths.flatMap((path) => {
        const found = locate(run.area, path)
        return typeof found === "string" ? [] : [relative(root, found.path) || "."]
      })
      const staging = join(this.options.dataDir, "checkpoints", ...run.spec.id.split("/"))
      mkdirSync(staging, { recursive: true, mode: 0o700 })
      const file = join(staging, "checkpoint.tar.zst")
      await packArchive(file, root, entries)
      const sizeBytes = statSync(file).size
      if (sizeBytes > run.spec.checkpoint.maxBytes) {
        throw new Error(`it is ${sizeBytes} bytes, above maxSize (${run.spec.checkpoint.maxBytes})`)
      }
      const { seq } = await this.options.link.putCheckpoint({
        node: this.options.hello.node,
        epoch: lease.epoch,
        run: run.spec.id,
        name: "checkpoint"
      }, file)
      rmSync(file, { force: true })
      run.checkpoint = { seq, sizeBytes }
      if (run.spec.keepWorkspace === true) this.kept.rebase(run.area, seq)
      if (episode !== undefined && run.suspend?.episode === episode) {
        run.suspend = { episode, state: "Saved", failures: run.suspend.failures }
      }
    } catch (error) {
      run.checkpointFailures++
      if (episode !== undefined && run.suspend?.episode === episode) {
        run.suspend = { episode, state: "Failed", failures: run.suspend.failures + 1 }
      }
      // The error may quote the run's own files (tar names them): anything the run was given in secret is scrubbed.
      this.say(
        `checkpoint of ${run.spec.id} failed: ${
          scrub(error instanceof Error ? error.message : String(error), givenValues(run.spec))
        }`
      )
    } finally {
      run.checkpointing = false
      this.poke()
    }
  }

  /**
   * Extracts the checkpoint the run restores into its area, as the user its box runs as: an archive another host made
   * can write nothing that user could not (it never runs as root here).
   */
  private async restore(run: LocalRun) {
    const lease = this.lease
    if (lease === undefined) throw new Error("the lease was lost")
    const bytes = await this.options.link.getCheckpoint({
      node: this.options.hello.node,
      epoch: lease.epoch,
      run: run.spec.id,
      name: "checkpoint"
    })
    const runAs = this.options.support.runAs
    if (runAs !== undefined) {
      for (const dir of [run.area, join(run.area, "state")]) chownSync(dir, runAs.uid, runAs.gid)
    }
    const { code, stderr, overBound } = await unpackArchive(bytes, run.area, {
      runAs,
      extra: [],
      bound: quotaBoundOf(run.spec)
    })
    if (code !== 0) throw new Error(`restoring its checkpoint failed: ${overBound ?? stderr.trim().slice(0, 300)}`)
  }

  private say(message: string) {
    this.options.log?.(`nodus agent ${this.options.hello.node}: ${message}`)
  }
}

/** The quota of a run's writable space: what its kind asked (ProgramParts.boxBoundsOf), or the default. */
const diskBytesOf = (spec: RunSpec) => spec.diskBytes ?? Limits.boxDiskBytesDefault

/** What an archive unpacked into a run's area may expand to: its disk quota. */
const quotaBoundOf = (spec: RunSpec) => ({ bytesMax: diskBytesOf(spec), what: "the box's disk quota (resources.disk)" })

/** A Snapshotted Sandbox's box: its /workspace is kept on this host when it ends unasked (KeptWorkspaces.ts). */
const keepsWorkspace = (spec: RunSpec) => spec.box === true && spec.keepWorkspace === true

/** Where a Volume mount's revision is unpacked on the host: in the run's area, beside what the box sees of it. */
const mountDirOf = (area: string, name: string) => join(area, "mounts", name)

/**
 * What a Volume's revision may expand to on the host: its Volume's size (what a revision of it holds) and room for
 * tar's headers, or the box's quota where the size is not known.
 */
const volumeBoundOf = (input: RunInput, spec: RunSpec): { readonly bytesMax: number; readonly what: string } => {
  const volume = "volume" in input ? input.volume : undefined
  if (volume?.sizeBytes === undefined) return quotaBoundOf(spec)
  return {
    bytesMax: volume.sizeBytes + Limits.volumeArchiveHeadroomBytes,
    what: `the size of Volume "${volume.name}" (${volume.sizeBytes} bytes, spec.size)`
  }
}

/** Where a box finds its programs (Isolation.ts's PATH): the host's userland, bound read-only. */
const userlandBins = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]

/**
 * The interpreter a worker runs on: the userland's python3.<minor> for a Function's `python`, else its python3; or why
 * the host cannot run it (docs/functions.md, "The worker").
 */
export const interpreterOf = (
  minor: string | undefined,
  bins: ReadonlyArray<string> = userlandBins
): { readonly command: string; readonly problem?: undefined } | {
  readonly command?: undefined
  readonly problem: string
} => {
  if (minor !== undefined && !/^3\.\d{1,3}$/u.test(minor)) {
    return { problem: `python ${JSON.stringify(minor)} is not a Python 3 minor version such as 3.12` }
  }
  const command = minor === undefined ? "python3" : `python${minor}`
  const found = bins.some((dir) => {
    try {
      return statSync(join(dir, command)).isFile()
    } catch {
      return false
    }
  })
  if (found) return { command }
  const looked = `(looked in ${bins.join(", ")})`
  return {
    problem: minor === undefined
      ? `this host has no python3 ${looked}, which a Function's worker runs on: install python3 on the host`
      : `this host has no ${command} ${looked}, the interpreter for the Function's python ${minor}: install it on the host, or deploy the Function with a Python the host has`
  }
}

/** What a run's box or worker answers a request, or why it cannot. */
const answerOf = (run: LocalRun | undefined, request: BoxRequest): Promise<BoxReply> => {
  if (run !== undefined && request._tag === "Call" && run.spec.worker === undefined) {
    return Promise.resolve({
      _tag: "Refused",
      code: "Invalid",
      message: "a call goes to a Function's worker; this run is not one"
    })
  }
  if (run?.phase === "Running" && run.worker !== undefined) return callWorker(run.worker, request)
  if (run?.phase === "Running" && run.channel !== undefined) return run.channel.handle(request)
  return Promise.resolve({
    _tag: "Refused",
    code: run?.phase === "Starting" ? "SandboxStarting" : "SandboxNotRunning",
    message: "the box is not running on this host"
  })
}

/**
 * A Function call on a run's worker: its Result, or Refused when it did not finish there (the runtime dispatches it
 * again).
 */
const callWorker = (worker: WorkerConnection, request: BoxRequest): Promise<BoxReply> => {
  if (request._tag !== "Call") {
    return Promise.resolve({ _tag: "Refused", code: "Invalid", message: "a Function's worker takes calls only" })
  }
  return worker.call({ id: request.call, encoding: request.encoding, input: request.input, method: request.method })
    .then(
      (outcome): BoxReply => ({ _tag: "Result", outcome }),
      (error: unknown): BoxReply =>
        error instanceof WorkerLost
          ? { _tag: "Refused", code: "Unavailable", message: `the worker was lost: ${error.message}` }
          : { _tag: "Refused", code: "Conflict", message: messageOf(error) }
    )
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error))

/** The host path of a run's egress proxy socket: beside its area (bound into the box, never inside its files). */
const proxySocketOf = (area: string) => `${area}.proxy.sock`

/** Where the box's /platform directories are on the host, under a run's area. */
const areaDirs: ReadonlyArray<readonly [string, string]> = [["/platform/work", "work"], ["/platform/state", "state"], [
  "/platform/outputs",
  "outputs"
], [Limits.sandboxWorkspacePath, "workspace"]]

/**
 * A path of the box as a host path in the run's area, or why it cannot be collected. The path is resolved (links
 * included) and must stay in the area: a program cannot point an output at a host file.
 */
export const locate = (
  area: string,
  boxPath: string
): { readonly path: string; readonly directory: boolean } | string => {
  const normal = posix.normalize(boxPath)
  const mount = areaDirs.find(([at]) => normal === at || normal.startsWith(`${at}/`))
  if (mount === undefined) {
    return `${boxPath} is not under /platform/work, /platform/state or /platform/outputs, where a live host collects outputs`
  }
  const host = join(area, mount[1], normal.slice(mount[0].length))
  if (!existsSync(host)) return `${boxPath} does not exist`
  const real = realpathSync(host)
  const root = realpathSync(area)
  if (real !== root && !real.startsWith(`${root}/`)) return `${boxPath} leads out of the run's own files`
  const stats = statSync(real)
  if (!stats.isFile() && !stats.isDirectory()) return `${boxPath} is neither a file nor a directory`
  return { path: real, directory: stats.isDirectory() }
}

/** Up to `max` bytes of a file from `offset`, as text (cut at a whole UTF-8 character). */
const readFrom = (path: string, offset: number, max: number): string => {
  let fd: number
  try {
    fd = openSync(path, "r")
  } catch {
    return ""
  }
  try {
    const buffer = Buffer.alloc(max)
    const read = readSync(fd, buffer, 0, max, offset)
    let end = read
    // Never split a character: back off over continuation bytes of a partial one at the end.
    if (read === max) { while (end > 0 && (buffer[end - 1]! & 0xc0) === 0x80) end-- }
    if (read === max && end > 0 && buffer[end - 1]! >= 0xc0) end--
    return buffer.subarray(0, end).toString("utf8")
  } finally {
    closeSync(fd)
  }
}

/** The last `count` non-empty lines of a log (its last 64 KiB are enough). */
const lastLines = (path: string, count: number): ReadonlyArray<string> => {
  let size = 0
  try {
    size = statSync(path).size
  } catch {
    return []
  }
  const tail = readFrom(path, Math.max(0, size - 65_536), 65_536)
  return tail.split("\n").map((line) => line.trimEnd()).filter((line) => line.length > 0).slice(-count)
}

/** About how many bytes a reply takes in a sync's body (its base64 payloads; the rest is small). */
const replySize = (reply: BoxCallReply): number => {
  const answer = reply.reply
  switch (answer._tag) {
    case "File":
    case "Output":
      return answer.data.length + 256
    case "Command":
      return (answer.state.stdout?.length ?? 0) + (answer.state.stderr?.length ?? 0) + 512
    case "Directory":
      return answer.entries.length * 128 + 256
    case "Commands":
      return answer.commands.reduce(
        (size, command) => size + command.argv.reduce((args, arg) => args + arg.length + 8, 256),
        256
      )
    default:
      return 256
  }
}
