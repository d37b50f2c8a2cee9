/**
 * The server, wired once: a store driver, the change feed, the generic resource machinery, auth, the HTTP API and
 * the API machinery's controllers, served over HTTPS (or HTTP) by Node. `nodus serve` runs `layer(config)`; tests run
 * `layerWith` with an in-memory store and an ephemeral port.
 */
import { randomBytes } from "node:crypto"
import { createServer as createHttpServer } from "node:http"
import { createServer as createHttpsServer } from "node:https"
import { hostname } from "node:os"
import { join } from "node:path"
// By its own path: the package index loads its Redis client too (about 700 modules; cli/main.ts says so too).
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { type Duration, Effect, Layer } from "effect"
import { HttpServer } from "effect/http"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import type { WatchLimits } from "../apiserver/ApiConfig.ts"
import { Auth } from "../apiserver/Auth.ts"
import { Blobs } from "../apiserver/Blobs.ts"
import * as Controllers from "../apiserver/Controllers.ts"
import { Idempotency } from "../apiserver/Idempotency.ts"
import { Ids } from "../apiserver/Ids.ts"
import * as Maintenance from "../apiserver/Maintenance.ts"
import { Resources } from "../apiserver/Resources.ts"
import { Watches } from "../apiserver/Watch.ts"
import { Api, app } from "../http/Api.ts"
import { ResourceHandlers } from "../http/Handlers.ts"
import { KindApis } from "../http/KindApi.ts"
import { registrations } from "../kinds/Registry.ts"
import * as Admission from "../runtime/Admission.ts"
import { BudgetService } from "../runtime/Budgets.ts"
import * as BudgetStatus from "../runtime/BudgetStatus.ts"
import * as Credits from "../runtime/Credits.ts"
import { Estimates, type EstimatesReads } from "../runtime/Estimates.ts"
import { EventOutbox } from "../runtime/EventOutbox.ts"
import { LedgerService, starterCreditsMicro } from "../runtime/LedgerService.ts"
import { LiveMarket } from "../runtime/LiveMarket.ts"
import { NodeAgents } from "../runtime/NodeAgents.ts"
import { layerStarting, Ownership } from "../runtime/Ownership.ts"
import * as Payments from "../runtime/Payments.ts"
import { KindRegistry } from "../runtime/Registry.ts"
import { SandboxBoxes } from "../runtime/SandboxBoxes.ts"
import * as SandboxBoxesOverPort from "../runtime/SandboxBoxes.ts"
import { SecretCipher, secretKeyBytes } from "../runtime/SecretCipher.ts"
import { Secrets } from "../runtime/Secrets.ts"
import { SimulationControl } from "../runtime/SimulationControl.ts"
import * as Webhooks from "../runtime/Webhooks.ts"
import * as WorkerSampler from "../runtime/WorkerSampler.ts"
import { WorkloadFiles } from "../runtime/WorkloadFiles.ts"
import type { BlobStore } from "../store/BlobStore.ts"
import { ChangeFeed, defaultFeedOptions, type FeedOptions } from "../store/ChangeFeed.ts"
import * as SqlStore from "../store/SqlStore.ts"
import { Store, StoreError } from "../store/Store.ts"
import {
  ensureAdminToken,
  ensureDataDir,
  ensureSecretKey,
  ensureTls,
  lockDataDir,
  pgliteDirectory,
  serverUrl,
  type TlsFiles
} from "./Bootstrap.ts"
import type { ClusterSettings } from "./Cluster.ts"
import type { Role, ServerConfig } from "./Config.ts"
import type { LocalSettings } from "./LiveBackend.ts"
import { sharedLocalNode } from "./LocalNodeName.ts"
import * as VirtualClock from "./VirtualClock.ts"

export interface ServerOptions {
  readonly host: string
  readonly port: number
  readonly apiGroup: string
  /** undefined: plain HTTP. */
  readonly tls: TlsFiles | undefined
  readonly adminToken: string
  /**
   * The key Secret values are sealed with (docs/secrets.md); absent: one of this process alone, for stores that do
   * not outlive it (a persistent store started with another key refuses to start).
   */
  readonly secretKey?: Uint8Array | undefined
  readonly bookmarkInterval: Duration.Input
  /** What a watch holds for a client that does not keep up; default defaultWatchLimits (Watch.ts). */
  readonly watchLimits?: WatchLimits | undefined
  readonly feed: FeedOptions
  /** Called with the URL once the server listens. */
  readonly onListening: (url: string) => void
  /** The URL clients reach the server at, when not where it listens (behind a proxy); links in answers use it. */
  readonly publicUrl?: string | undefined
  /** The sim backend behind the API (docs/simulator.md); absent: none, and the test clock is 404. */
  readonly sim?: SimSettings | undefined
  /** The local backend: this host's processes through an in-process node agent (docs/live.md). Not with `sim`. */
  readonly local?: LocalSettings | undefined
  /**
   * Credits granted once to a new ledger (docs/billing.md); default the starter credits, 0 for a production database.
   */
  readonly starterCreditsMicro?: bigint | undefined
  /** The payment processor TopUps charge (docs/billing.md, "Credits"); default the embedded one, none in production. */
  readonly payments?: Payments.PaymentsMode | undefined
  /** Webhook deliveries (docs/webhooks.md): loopback receivers allowed in development; tests stub name resolution. */
  readonly webhooks?: Webhooks.WebhookSettings | undefined
  /**
   * Controllers shared out with the other processes of the same PostgreSQL database (docs/scale-out.md); absent: this
   * process owns every object (the embedded store is one process's, and so is memory).
   */
  readonly cluster?: ClusterSettings | undefined
  /** What this process runs of a shared store (docs/scale-out.md, "Roles"); default all. Only with `cluster`. */
  readonly role?: Role | undefined
}

export interface SimSettings {
  /** Simulated seconds per wall-clock second. */
  readonly speed: number
  readonly hostsPerVariant?: number
}

/** Registers the admin key before the first request is served. */
const bootstrapAdmin = (token: string) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const auth = yield* Auth
    const store = yield* Store
    const ops = yield* auth.bootstrapOps(token)
    yield* store.commit(ops).pipe(Effect.orDie)
  }))

const announce = (options: ServerOptions, listening: (url: string) => void) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const address = server.address
    const port = address._tag === "UnixPathAddress" ? options.port : address.port
    const host = options.host === "0.0.0.0" ? "127.0.0.1" : options.host
    const shown = host.includes(":") ? `[${host}]` : host
    const url = `${options.tls === undefined ? "http" : "https"}://${shown}:${port}`
    listening(url)
    options.onListening(url)
  }))

/**
 * Who owns which objects: Effect Cluster over the database when the server shares it (loaded only then, and in the
 * background: the API listens first; the embedded default never loads it), else this process owns everything.
 */
const ownershipOf = (cluster: ClusterSettings | undefined, role: Role) =>
  cluster === undefined
    ? Ownership.layerWhole
    : role === "api"
    ? Ownership.layerNone
    : layerStarting((changes) =>
      Layer.unwrap(Effect.map(Effect.promise(() => import("./Cluster.ts")), (module) => module.layer(cluster, changes)))
    )

/** A process-wide loop of the server run as a singleton: in one process of the store at a time (docs/scale-out.md). */
const singleton = <E, R>(name: string, loop: Layer.Layer<never, E, R>) =>
  Layer.effectDiscard(
    Effect.flatMap(Ownership, (ownership) =>
      ownership.singleton(name, Effect.scoped(Effect.andThen(Layer.build(Layer.orDie(loop)), Effect.never))))
  )

/** Services a test or the simulator may replace. */
export interface Replaceable {
  readonly ids?: Layer.Layer<Ids>
  readonly estimates?: Layer.Layer<Estimates, never, EstimatesReads>
}

/**
 * A backend's layer, its modules loaded when it is built: a server loads the one backend it runs (issue 16: start-up).
 */
const loaded = <A, E, R>(load: () => Promise<Layer.Layer<A, E, R>>) => Layer.unwrap(Effect.promise(load))

/**
 * The sim backend and its clock, or neither. With the sim backend the whole server runs on simulated time: its Clock
 * is the VirtualClock, so metadata times and the times in status agree (docs/simulator.md).
 */
const backendOf = (options: ServerOptions) => {
  const { sim, local } = options
  if (local !== undefined) {
    return {
      clock: Layer.empty,
      control: SandboxBoxesOverPort.layer.pipe(
        Layer.provideMerge(loaded(() => import("./LiveBackend.ts").then((live) => live.layer(local))))
      )
    }
  }
  if (sim === undefined) {
    return {
      clock: Layer.empty,
      control: Layer.mergeAll(
        SimulationControl.layerNone,
        WorkloadFiles.layerNone,
        NodeAgents.layerNone,
        SandboxBoxes.layerNone
      )
    }
  }
  const clock = new VirtualClock.VirtualClock(sim.speed, Date.now())
  const simBackend = loaded(() =>
    import("./SimBackend.ts").then((simulated) =>
      simulated.layer({ clock, ...(sim.hostsPerVariant === undefined ? {} : { hostsPerVariant: sim.hostsPerVariant }) })
    )
  )
  return {
    clock: VirtualClock.layer(clock),
    control: Layer.mergeAll(
      SandboxBoxesOverPort.layer.pipe(Layer.provideMerge(simBackend)),
      WorkloadFiles.layerNone,
      NodeAgents.layerNone
    )
  }
}

/** The whole server over a given store layer. */
export const layerWith = <E>(
  options: ServerOptions,
  storeLayer: Layer.Layer<Store | BlobStore, E>,
  replaced: Replaceable = {}
) => {
  // The address is known once the listener is bound (port 0 picks one); until then, the configured one.
  let publicUrl = options.publicUrl ??
    `${options.tls === undefined ? "http" : "https"}://${options.host}:${options.port}`
  const settings = Layer.succeed(ApiConfig, {
    group: options.apiGroup,
    publicUrl: () => publicUrl,
    bookmarkInterval: options.bookmarkInterval,
    ...(options.watchLimits === undefined ? {} : { watchLimits: options.watchLimits }),
    developmentWebhooks: options.webhooks?.allowLoopback === true,
    hostUserland: options.local !== undefined,
    servesApi: options.role !== "controllers"
  })
  const backend = backendOf(options)
  // The clock goes in first, under everything, so every layer and every fiber they fork reads the same time.
  // Billing: the ledger over the store (starter credits where the server is not a production one) and the estimates.
  // Events of the spec's types are recorded in the outbox in the commits of the changes that cause them.
  const ids = replaced.ids ?? Ids.layer
  const outbox = EventOutbox.layer.pipe(Layer.provideMerge(ids))
  const ledger = LedgerService.layer({
    starterMicro: options.starterCreditsMicro ?? starterCreditsMicro,
    apiGroup: options.apiGroup,
    shared: options.cluster !== undefined
  }).pipe(Layer.provideMerge(outbox))
  // The sim backend provides its live market to the estimates' placement preview through LiveMarket.
  // Budgets (docs/billing.md, "Budgets") follow the store's change feed, the one feed the machinery below serves too.
  const feed = ChangeFeed.layerWith(options.feed)
  const budgets = BudgetService.layer.pipe(Layer.provide(Layer.merge(feed, outbox)))
  // The estimates' sampled runs are the simulator's, on a worker thread off the event loop (docs/billing.md,
  // "Estimates").
  const estimateSampler = WorkerSampler.layer(new URL("../backends/sim/EstimateWorker.ts", import.meta.url))
  // The kinds the runtime runs, with their machines and estimators (src/runtime/Registry.ts).
  const registry = KindRegistry.layer()
  const estimates = (replaced.estimates ?? Estimates.layer().pipe(Layer.provide(estimateSampler))).pipe(
    Layer.provideMerge(budgets),
    Layer.provideMerge(ledger),
    Layer.provideMerge(LiveMarket.layer),
    Layer.provideMerge(registry)
  )
  const foundation = Layer.mergeAll(
    settings,
    estimates,
    Blobs.layer,
    ownershipOf(options.cluster, options.role ?? "all")
  ).pipe(
    Layer.provideMerge(storeLayer),
    Layer.provideMerge(backend.clock)
  )
  const machinery = Layer.mergeAll(Resources.layer, Auth.layer, Idempotency.layer, feed).pipe(
    Layer.provideMerge(Admission.layer),
    Layer.provideMerge(Secrets.layer),
    Layer.provideMerge(SecretCipher.layer(options.secretKey ?? randomBytes(secretKeyBytes))),
    Layer.provideMerge(foundation)
  )
  const controllers = Layer.mergeAll(
    singleton("nodus/controllers", Controllers.layer),
    singleton("nodus/maintenance", Maintenance.layer),
    singleton("nodus/budget-status", BudgetStatus.layer())
  )
  // What each kind adds to the HTTP layer (src/kinds/Registry.ts): the generic layer names no kind.
  const http = Api.layer.pipe(
    Layer.provide(ResourceHandlers.layer),
    Layer.provide(KindApis.layer(registrations))
  )
  const api = Layer.mergeAll(http, controllers, bootstrapAdmin(options.adminToken)).pipe(
    Layer.provideMerge(backend.control),
    Layer.provideMerge(Watches.layer),
    Layer.provideMerge(Credits.layer.pipe(Layer.provide(Payments.layerOf(options.payments ?? "embedded")))),
    Layer.provideMerge(Webhooks.layer(options.webhooks ?? { allowLoopback: false })),
    Layer.provideMerge(machinery)
  )
  const listener = NodeHttpServer.layer(
    () =>
      options.tls === undefined
        ? createHttpServer()
        : createHttpsServer({ cert: options.tls.cert, key: options.tls.key }),
    { host: options.host, port: options.port }
  )
  // Every service stays visible to the caller (tests read the store and the outbox through the same build).
  return HttpServer.serve(app).pipe(
    Layer.provideMerge(announce(options, (url) => (publicUrl = options.publicUrl ?? url))),
    Layer.provide(listener),
    Layer.provideMerge(api)
  )
}

/** Embedded PGlite in the data directory, held by this process alone for the layer's lifetime. */
const pgliteStore = (dataDir: string) =>
  Layer.unwrap(Effect.map(
    Effect.acquireRelease(
      Effect.suspend(() => {
        const lock = lockDataDir(dataDir)
        return lock._tag === "Locked"
          ? Effect.succeed(lock)
          : Effect.fail(
            new StoreError({
              message: `another nodus server (pid ${lock.pid}) uses ${dataDir}; stop it or choose another --data-dir`
            })
          )
      }),
      (lock) => Effect.sync(lock.release)
    ),
    () => SqlStore.layerPglite(pgliteDirectory(dataDir), join(dataDir, "blobs"))
  ))

/** The server `nodus serve` runs: files in the data directory, PostgreSQL or embedded PGlite. */
export const layer = (config: ServerConfig) =>
  Layer.unwrap(Effect.sync(() => {
    ensureDataDir(config.dataDir)
    const tls = config.tls ? ensureTls(config, new Date()) : undefined
    const adminToken = ensureAdminToken(config)
    const secretKey = ensureSecretKey(config)
    const storeLayer = config.databaseUrl === undefined
      ? pgliteStore(config.dataDir)
      : SqlStore.layerPostgres(config.databaseUrl)
    return layerWith({
      host: config.host,
      port: config.port,
      apiGroup: config.apiGroup,
      tls,
      adminToken,
      secretKey,
      bookmarkInterval: "30 seconds",
      feed: defaultFeedOptions,
      sim: config.backend === "sim" ? { speed: config.simSpeed } : undefined,
      // Servers sharing a database each run their own host: distinct Nodes (docs/scale-out.md, "Local hosts").
      local: config.backend === "local"
        ? {
          dataDir: config.dataDir,
          warmBoxes: config.warmBoxes,
          egressAllow: config.egressAllow,
          ...(config.databaseUrl === undefined
            ? {}
            : { node: sharedLocalNode(hostname(), config.dataDir), peers: { ca: tls?.ca } })
        }
        : undefined,
      // docs/billing.md: the embedded default and sim mode start with starter credits, a production database at zero.
      starterCreditsMicro: config.databaseUrl === undefined || config.backend === "sim" ? starterCreditsMicro : 0n,
      publicUrl: config.publicUrl,
      // docs/billing.md, "Credits": the embedded processor where the starter credits are; none on a production
      // database.
      payments: config.databaseUrl === undefined || config.backend === "sim" ? "embedded" : "none",
      webhooks: { allowLoopback: config.webhookAllowLoopback },
      cluster: config.databaseUrl === undefined ? undefined : { databaseUrl: config.databaseUrl },
      role: config.role,
      onListening: (url) =>
        console.log(
          `nodus serving ${url} (store: ${
            config.databaseUrl === undefined ? `PGlite in ${pgliteDirectory(config.dataDir)}` : "PostgreSQL"
          }; backend: ${config.backend === "sim" ? `sim at speed ${config.simSpeed}` : config.backend};${
            config.role === "all" ? "" : ` role: ${config.role};`
          } admin token in ${
            config.bootstrapToken === undefined ? `${config.dataDir}/admin.token` : "NODUS_BOOTSTRAP_TOKEN"
          })${
            config.webhookAllowLoopback
              ? "\nnodus: webhook deliveries may go to loopback receivers (--webhook-allow-loopback: development only)"
              : ""
          }`
        )
    }, storeLayer)
  }))

export { serverUrl }
