/**
 * The local backend (docs/live.md): the runtime's reconciler over live hosts (backends/live/LiveCapacity.ts), on the
 * wall clock, with a node agent for this host running in-process — the same Agent as `nodus agent`, over an
 * in-process link to the same protocol handler a remote agent reaches over HTTPS. Jobs run as real processes in
 * bubblewrap boxes; their logs are kept under the data directory (`logs/`, JobLogs.ts), their outputs, checkpoints and
 * snapshots in the blob store (WorkloadBlobs.ts).
 *
 * The loop: whenever a key is due (a change, a capacity report, a timer) the reconciler runs it at once — a run's
 * start and end reach the store within milliseconds; a lease lapses at its instant; and every second the agent's
 * checkpoint timers, expired holds, offerings and Node heartbeats are looked at.
 */
import { Effect, Layer, Stream } from "effect"
import { createHash } from "node:crypto"
import { createReadStream, mkdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { Blobs, projectReader } from "../apiserver/Blobs.ts"
import { Resources } from "../apiserver/Resources.ts"
import { Agent } from "../backends/live/Agent.ts"
import { detectGpus, helloOf } from "../backends/live/HostFacts.ts"
import { detectIsolation } from "../backends/live/Isolation.ts"
import { LiveCapacity, nodeKey, type NodeScope } from "../backends/live/LiveCapacity.ts"
import { type AgentLink, leaseExpiryMs } from "../backends/live/Protocol.ts"
import { currentPricebook } from "../core/billing/Pricebook.ts"
import { CapacityPort, type WorkloadProgram } from "../core/capacity/Capacity.ts"
import { isObject } from "../core/Json.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import type { AddressRange } from "../core/PublicAddress.ts"
import type { BoxRequest } from "../core/SandboxBox.ts"
import { parseQuantity } from "../core/Units.ts"
import { pickRevision, volumeSizeBytes } from "../core/VolumeRevisions.ts"
import { refOfKind } from "../kinds/Kinds.ts"
import { Enrollment } from "../runtime/Enrollment.ts"
import { EventOutbox } from "../runtime/EventOutbox.ts"
import { surviving } from "../runtime/Following.ts"
import * as FunctionDispatch from "../runtime/FunctionDispatch.ts"
import { LedgerService } from "../runtime/LedgerService.ts"
import { LiveMarket } from "../runtime/LiveMarket.ts"
import { NodeAgents } from "../runtime/NodeAgents.ts"
import { makeOfferings } from "../runtime/Offerings.ts"
import { Reconciler } from "../runtime/Reconciler.ts"
import { Secrets } from "../runtime/Secrets.ts"
import { SimulationControl } from "../runtime/SimulationControl.ts"
import { WorkloadFiles } from "../runtime/WorkloadFiles.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import { Store } from "../store/Store.ts"
import { makeNodeAgents } from "./AgentEndpoint.ts"
import { makeForwarding } from "./BoxForwarding.ts"
import { makeJobLogs } from "./JobLogs.ts"
import { aliveRecorder, restoreAlive } from "./NodeLiveness.ts"
import { followNodes } from "./NodeObjects.ts"
import { withPeerRuns } from "./PeerRuns.ts"
import { makeWorkloadBlobs } from "./WorkloadBlobs.ts"

export interface LocalSettings {
  /** The server's data directory: logs, outputs and checkpoints, and the local agent's own files in `agent/`. */
  readonly dataDir: string
  /** The local Node's name; default `local` (one server on its store), LocalNodeName.ts's on a shared database. */
  readonly node?: string
  /** Paths no program may see besides the data directory (the store's files when they live elsewhere). */
  readonly hidden?: ReadonlyArray<string>
  /** Lease timing of every Node; default 10 s renew, 40 s expiry (tests of lease loss shorten it). */
  readonly lease?: { readonly renewMs: number; readonly expiryMs: number }
  /** CA certificates (PEM) the local agent trusts for `url` inputs besides the system's. */
  readonly inputCa?: string
  /**
   * `--egress-allow-cidr`: ranges boxes and `url` inputs may reach although they are not public (docs/live.md,
   * "Network").
   */
  readonly egressAllow?: ReadonlyArray<AddressRange>
  /** Sandbox boxes kept started ahead (docs/sandboxes.md, "Warm boxes"); default 1. */
  readonly warmBoxes?: number
  /**
   * On a database shared with other servers: box calls reach the boxes of the others' hosts through them
   * (BoxForwarding.ts); `ca` is the certificate this server serves, when it serves TLS. Absent: one server alone.
   */
  readonly peers?: { readonly ca: string | undefined }
}

/** The Pool of the in-process agent's Node, and the Node's name (an enrolled host may not take it). */
export const localPool = "local"
export const localNode = "local"

/** The longest the loop sleeps: leases lapse and checkpoints fall due on this beat at the latest. */
const beatMs = 1_000

/** An agent in this process reaches the server's protocol handler directly: the same messages, no socket. */
export const inProcessLink = (capacity: LiveCapacity, scope: NodeScope): AgentLink => ({
  hello: async (hello) => capacity.hello(hello, scope),
  sync: (request) => capacity.sync(request, scope),
  putOutput: async (target, file) => {
    if (!(await capacity.putOutput(target, scope, createReadStream(file)))) {
      throw new Error(`the server no longer takes outputs of ${target.run}`)
    }
  },
  getInput: async (target) => {
    const bytes = capacity.getInput(target, scope)
    if (bytes === undefined) throw new Error(`the server holds no input ${target.name} of ${target.run} now`)
    return bytes
  },
  putCheckpoint: async (target, file) => {
    const stored = await capacity.putCheckpoint(target, scope, createReadStream(file))
    if (stored === undefined) throw new Error(`the server no longer takes checkpoints of ${target.run}`)
    return stored
  },
  getCheckpoint: async (target) => {
    const bytes = await capacity.getCheckpoint(target, scope)
    if (bytes === undefined) throw new Error(`the server holds no checkpoint for ${target.run} to restore`)
    return bytes
  }
})

/**
 * The enrolled Nodes the store knows, taken in before anything is reconciled: the runs a previous process placed on
 * them are offered back to them (their agents reconnect and say what still runs).
 */
const rememberNodes = (capacity: LiveCapacity, store: Store["Service"], group: string) =>
  Effect.gen(function*() {
    const page = yield* store.list({ resource: refOfKind(group, "Node").info.plural }).pipe(
      Effect.orElseSucceed(() => ({ items: [] }))
    )
    for (const object of page.items) {
      const spec = isObject(object.spec) ? object.spec : {}
      const status = isObject(object.status) && isObject(object.status["capacity"])
        ? object.status["capacity"]
        : undefined
      if (status === undefined || object.metadata.namespace === undefined) continue
      const models = Array.isArray(status["models"])
        ? status["models"].filter((model): model is string => typeof model === "string")
        : []
      const gpuCount = typeof status["gpus"] === "number" ? status["gpus"] : 0
      capacity.remember(object.metadata.name, {
        pool: String(spec["pool"] ?? ""),
        namespace: object.metadata.namespace
      }, {
        cpus: Number(status["cpu"] ?? 1),
        memoryBytes: (parseQuantity(String(status["memory"] ?? "0")) ?? 0),
        diskBytes: (parseQuantity(String(status["disk"] ?? "0")) ?? 0),
        gpus: Array.from({ length: gpuCount }, () => ({ model: models[0] ?? "GPU", memoryMiB: 0 }))
      })
    }
  })

/** This host serves every project, in the Pool `local`. */
const localScope: NodeScope = { pool: localPool, namespace: undefined }

/** Needs the store's runtime services (LedgerService, Secrets, LiveMarket, the reconciler's) and provides the port. */
export const layer = (settings: LocalSettings) =>
  Layer.unwrap(Effect.gen(function*() {
    const secrets = yield* Secrets
    const logs = makeJobLogs(join(settings.dataDir, "logs"), {
      ended: (owner, attempt) => capacity.ended(owner, attempt)
    })
    const kept = makeWorkloadBlobs(yield* Blobs, yield* Store)
    const resources = yield* Resources
    const jobRef = refOfKind((yield* ApiConfig).group, "Job")
    const blobs = yield* Blobs
    /** A blob input (a Function's code archive): its bytes, if the workload's project may read it (docs/blobs.md). */
    const blobInput = (namespace: string, name: string, reference: string) => {
      const digest = reference.startsWith("sha256:") ? reference.slice("sha256:".length) : ""
      const missing = new ApiError({
        code: "NotFound",
        message:
          `input ${name}: blob ${reference} is not stored, or project ${namespace} may not read it (upload it: PUT /blobs/v1/${reference})`
      })
      return (/^[0-9a-f]{64}$/u.test(digest) ? blobs.stat(digest, projectReader(namespace)) : Effect.succeed(undefined))
        .pipe(
          Effect.flatMap((blob) =>
            blob === undefined
              ? Effect.fail(missing)
              : Effect.succeed({ sha256: blob.digest, open: () => Stream.toAsyncIterable(blobs.read(blob)) })
          ),
          Effect.mapError((error) => (error.code === "NotFound"
            ? missing
            : new ApiError({ code: error.code, message: `input ${name}: ${error.message}` }))
          )
        )
    }
    const volumeRef = refOfKind((yield* ApiConfig).group, "Volume")
    /** A Volume's revision (absent: its latest): its archive in the project's blobs, unpacked by the agent. */
    const volumeInput = (
      namespace: string,
      name: string,
      wanted: { readonly name: string; readonly revision: number | undefined }
    ) =>
      Effect.gen(function*() {
        const volume = yield* resources.get(volumeRef, namespace, wanted.name).pipe(
          Effect.mapError(() =>
            new ApiError({
              code: "NotFound",
              message: `input ${name}: Volume "${wanted.name}" is not in project ${namespace}`
            })
          )
        )
        const picked = pickRevision(wanted.name, volume.status, wanted.revision)
        if (typeof picked === "string") {
          return yield* new ApiError({ code: "NotFound", message: `input ${name}: ${picked}` })
        }
        const blob = yield* blobs.stat(picked.sha256, projectReader(namespace))
        if (blob === undefined) {
          return yield* new ApiError({
            code: "NotFound",
            message: `input ${name}: the archive of Volume "${wanted.name}" revision ${picked.revision} is not stored`
          })
        }
        return {
          sha256: blob.digest,
          volume: {
            name: wanted.name,
            revision: picked.revision,
            uid: volume.metadata.uid,
            ...(volumeSizeBytes(volume.spec) > 0 ? { sizeBytes: volumeSizeBytes(volume.spec) } : {})
          },
          open: () => Stream.toAsyncIterable(blobs.read(blob))
        }
      })
    /**
     * The inputs of a workload this server holds the bytes of: other Jobs' outputs, blobs of its project, Volume
     * revisions.
     */
    const serverInputs = (namespace: string, workload: WorkloadProgram) =>
      Effect.forEach(
        (workload.inputs ?? []).flatMap((
          input
        ) => ("output" in input || "blob" in input || "volume" in input ? [input] : [])),
        (input) =>
          ("blob" in input
            ? blobInput(namespace, input.name, input.blob)
            : "volume" in input
            ? volumeInput(namespace, input.name, input.volume)
            : resources.get(jobRef, namespace, input.output.job).pipe(
              Effect.flatMap((job) => kept.inputOf(job, input.output.name, input.output.index)),
              Effect.mapError(() =>
                new ApiError({
                  code: "NotFound",
                  message:
                    `input ${input.name}: Job "${input.output.job}" has no output "${input.output.name}" for index ${input.output.index}`
                })
              )
            )).pipe(Effect.map((held) => [input.name, held] as const))
      ).pipe(Effect.map((entries) => new Map(entries)))
    const capacity: LiveCapacity = yield* LiveCapacity.make({
      now: () => Date.now(),
      resolve: (namespace, workload) =>
        Effect.all({ program: secrets.resolveProgram(namespace, workload), inputs: serverInputs(namespace, workload) })
          .pipe(
            Effect.map(({ program, inputs }) => ({ ...program, inputs })),
            Effect.mapError((error) => ({ message: error.message }))
          ),
      appendLog: logs.append,
      storeOutput: kept.outputs.store,
      checkpoints: kept.checkpoints,
      ...(settings.lease === undefined ? {} : { lease: settings.lease })
    })
    yield* rememberNodes(capacity, yield* Store, (yield* ApiConfig).group)
    const started = Date.now()
    const alive = yield* restoreAlive(capacity, yield* Store, started)
    const ownNode = settings.node ?? localNode
    const ownOfferings = () =>
      capacity.catalog("").map((offering) => offering.id).filter((id) =>
        id === ownNode || id.startsWith(`${ownNode}-gpu`)
      )
    const forwarding = settings.peers === undefined
      ? undefined
      : makeForwarding({
        store: yield* Store,
        url: (yield* ApiConfig).publicUrl,
        ca: settings.peers.ca,
        offerings: ownOfferings,
        host: () => {
          const view = capacity.nodeViews().find((candidate) =>
            candidate.namespace === undefined && candidate.name === ownNode
          )
          return view === undefined ? undefined : { node: ownNode, capacity: view.hello.capacity }
        }
      })
    const forgetting = {
      ...capacity.port,
      // A box this host does not run may run on another server's (docs/scale-out.md, "Local hosts"): the call goes
      // there.
      box: (owner: string, attempt: string, request: BoxRequest) =>
        capacity.port.box!(owner, attempt, request).pipe(
          Effect.flatMap((reply) =>
            forwarding === undefined || reply._tag !== "Refused" || reply.code !== "SandboxNotRunning"
              ? Effect.succeed(reply)
              : Effect.map(forwarding.forward(owner, attempt, request), (forwarded) => forwarded ?? reply)
          )
        ),
      forget: (owner: string) =>
        capacity.port.forget(owner).pipe(
          Effect.andThen(Effect.sync(() => logs.forget(owner))),
          Effect.andThen(kept.forget(owner))
        )
    }
    // On a shared database, runs a rebalance left on another server's host are reached there (PeerRuns.ts).
    const port = forwarding === undefined
      ? Layer.succeed(CapacityPort, forgetting)
      : Layer.effect(CapacityPort, withPeerRuns(forgetting, forwarding, settings.lease?.expiryMs ?? leaseExpiryMs))
    // Runs of a previous process died with it (the in-process agent's boxes die with their parent): they ended when it
    // last knew its own Node alive.
    const lostAt = Math.min(started, alive.get(nodeKey(settings.node ?? localNode, localScope)) ?? started)
    const reconciler = Reconciler.layer({
      catalog: capacity.catalog,
      pricebook: currentPricebook,
      lostAt,
      ...(forwarding === undefined ? {} : { recorded: () => forwarding.peers() })
    }).pipe(Layer.provide(FunctionDispatch.layer(FunctionDispatch.liveDispatch)), Layer.provideMerge(port))
    const running = Layer.effectDiscard(
      run(capacity, settings, aliveRecorder(capacity, yield* Store, alive), forwarding?.announce ?? Effect.void)
    )
    const agents = Layer.effect(
      NodeAgents,
      Effect.gen(function*() {
        const resources = yield* Resources
        const nodeRef = refOfKind((yield* ApiConfig).group, "Node")
        const poolOf = (namespace: string, node: string) =>
          Effect.map(
            resources.get(nodeRef, namespace, node),
            (object) => (isObject(object.spec) && typeof object.spec["pool"] === "string" ? object.spec["pool"] : "")
          )
        return makeNodeAgents({
          capacity,
          enrollment: yield* Enrollment,
          localNode: settings.node ?? localNode,
          poolOf,
          peerKey: forwarding?.key
        })
      })
    ).pipe(Layer.provide(Enrollment.layer))
    return Layer.mergeAll(
      SimulationControl.layerNone,
      Layer.succeed(WorkloadFiles, { log: logs.log, output: kept.outputs.output }),
      agents,
      running
    ).pipe(Layer.provideMerge(reconciler))
  }))

/** Starts this host's agent, then runs the reconciler on the wall clock for the layer's lifetime. */
const run = (
  capacity: LiveCapacity,
  settings: LocalSettings,
  recordAlive: Effect.Effect<void, unknown>,
  announce: Effect.Effect<void>
) =>
  Effect.gen(function*() {
    const reconciler = yield* Reconciler
    const ledgers = yield* LedgerService
    yield* (yield* LiveMarket).provide((namespace) => capacity.port.market(namespace), capacity.catalog)
    mkdirSync(settings.dataDir, { recursive: true, mode: 0o700 })
    const isolation = detectIsolation()
    for (const problem of isolation.problems) yield* Effect.logWarning(`nodus local backend: ${problem}`)
    const agentDir = join(settings.dataDir, "agent")
    // Runs' areas are bound into boxes, so they live outside the private data directory (docs/live.md, "Isolation").
    const runsDir = join(
      tmpdir(),
      `nodus-runs-${createHash("sha256").update(resolve(settings.dataDir)).digest("hex").slice(0, 12)}`
    )
    const gpus = detectGpus()
    const agent = new Agent({
      link: inProcessLink(capacity, localScope),
      hello: helloOf(settings.node ?? localNode, settings.dataDir, isolation, gpus),
      gpus: gpus.map((gpu) => gpu.device),
      dataDir: agentDir,
      runsDir,
      support: isolation,
      hidden: [settings.dataDir, ...(settings.hidden ?? [])],
      now: () => Date.now(),
      inputCa: settings.inputCa,
      egressAllow: settings.egressAllow,
      warmBoxes: settings.warmBoxes ?? 1,
      log: (message) => console.warn(message)
    })
    // The Node says hello before the first reconcile, so runs of the stored objects have somewhere to go.
    yield* Effect.promise(() => agent.connect())
    yield* Effect.addFinalizer(() => Effect.promise(() => agent.stop()))
    // The local Node's offerings, as Offering objects every project sees (kubectl get offerings).
    const offerings = makeOfferings({
      resources: yield* Resources,
      group: (yield* ApiConfig).group,
      catalog: capacity.catalog(""),
      market: capacity.port.market("")
    })
    yield* offerings.seed
    const nodes = yield* followNodes({
      capacity,
      resources: yield* Resources,
      store: yield* Store,
      feed: yield* ChangeFeed,
      outbox: yield* EventOutbox,
      group: (yield* ApiConfig).group,
      now: () => Date.now()
    })
    let lastBeat = 0
    const pass = Effect.gen(function*() {
      const now = Date.now()
      // Leases lapse at their instant (a lost host's runs recover at once), not on the next beat.
      capacity.tick(now)
      if (now - lastBeat >= beatMs) {
        lastBeat = now
        agent.tick()
        yield* ledgers.update((ledger) => ledger.expire(now)).pipe(
          Effect.catch((error) => Effect.logWarning(`local backend: expiring holds: ${error.message}`))
        )
        yield* offerings.refresh
        yield* nodes.heartbeats
        yield* recordAlive.pipe(
          Effect.catch(() => Effect.logWarning("local backend: recording when the Nodes were last alive failed"))
        )
        yield* announce
      }
      yield* reconciler.runDue(now)
      const due = [lastBeat + beatMs, reconciler.nextWakeAt(), capacity.nextDeadline()].filter((at): at is number =>
        at !== undefined
      )
      yield* reconciler.awaitWork(Math.max(0, Math.min(...due) - Date.now()))
    })
    yield* Effect.forkScoped(Effect.forever(surviving("local backend", "running the reconciler")(pass)))
  })
