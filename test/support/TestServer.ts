/**
 * A whole nodus server in the test process, on an ephemeral loopback port: the real HTTP stack, auth, change feed and
 * controllers, over an in-memory store by default (or any store layer). Real clients (fetch, kubectl, the Python
 * client) talk to it; `stop()` shuts it down and frees the port.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { WatchLimits } from "../../src/apiserver/ApiConfig.ts"
import { Ids } from "../../src/apiserver/Ids.ts"
import { generateTlsMaterial } from "../../src/apiserver/tls/Certificates.ts"
import type { AddressRange } from "../../src/core/PublicAddress.ts"
import type { Estimates, EstimatesReads } from "../../src/runtime/Estimates.ts"
import { EventOutbox, type OutboxEvent } from "../../src/runtime/EventOutbox.ts"
import type { WebhookSettings } from "../../src/runtime/Webhooks.ts"
import { kubeconfig } from "../../src/server/Bootstrap.ts"
import * as Server from "../../src/server/Server.ts"
import * as BlobStore from "../../src/store/BlobStore.ts"
import { defaultFeedOptions, type FeedOptions } from "../../src/store/ChangeFeed.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { Store } from "../../src/store/Store.ts"

export const adminToken = "nds_test-admin-token-0123456789abcdefghijklmnopqrstu"

/**
 * The key test servers seal Secret values with unless told another: one for all, so restarts and shared stores open
 * them.
 */
export const testSecretKey: Uint8Array = Buffer.alloc(32, 7)

export interface TestServerOptions {
  readonly tls?: boolean
  /** The store; its blobs too when it provides them (the SQL stores do), else blobs in memory. */
  readonly store?: Layer.Layer<Store, unknown>
  readonly apiGroup?: string
  readonly bookmarkInterval?: string
  readonly watchLimits?: WatchLimits
  readonly feed?: FeedOptions
  readonly estimates?: Layer.Layer<Estimates, never, EstimatesReads>
  /** Where uids and generateName suffixes come from (default: random). */
  readonly ids?: Layer.Layer<Ids>
  /** Runs the sim backend behind the server (docs/simulator.md), at this speed (simulated seconds per second). */
  readonly sim?: { readonly speed: number; readonly hostsPerVariant?: number }
  /** Credits a new ledger starts with (default: the starter credits). */
  readonly starterCreditsMicro?: bigint
  /** The key sealing Secret values (default `testSecretKey`). */
  readonly secretKey?: Uint8Array
  /** Runs the local backend (docs/live.md): real programs on this host, its data under the server's directory. */
  readonly local?: boolean | {
    readonly lease?: { readonly renewMs: number; readonly expiryMs: number }
    readonly inputCa?: string
    readonly egressAllow?: ReadonlyArray<AddressRange>
  }
  /** Webhook deliveries: loopback receivers allowed, a resolver stub, a shorter wait for answers (docs/webhooks.md). */
  readonly webhooks?: WebhookSettings
}

export interface TestServer {
  readonly url: string
  readonly token: string
  /** PEM of the CA that signed the server certificate (TLS only). */
  readonly ca: string | undefined
  /** A directory for this server's client files (kubeconfig, CA file, kubectl cache). */
  readonly directory: string
  /** Path of a kubeconfig for the admin. */
  readonly kubeconfigPath: string
  /** Path of the CA file (TLS only). */
  readonly caPath: string | undefined
  readonly stop: () => Promise<void>
  /** Every record of the server's event outbox (what webhooks will get), in order. */
  readonly streamed: () => Promise<ReadonlyArray<OutboxEvent>>
  /** Runs an effect over the server's own store (tests read what it stored). */
  readonly withStore: <A, E>(use: (store: Store["Service"]) => Effect.Effect<A, E>) => Promise<A>
}

export const startTestServer = async (options: TestServerOptions = {}): Promise<TestServer> => {
  const directory = mkdtempSync(join(tmpdir(), "nodus-test-"))
  const material = options.tls === true
    ? generateTlsMaterial({ hosts: ["127.0.0.1", "localhost"], now: new Date() })
    : undefined
  let announced: (url: string) => void = () => {}
  const listening = new Promise<string>((resolve) => (announced = resolve))
  const layer = Server.layerWith(
    {
      host: "127.0.0.1",
      port: 0,
      apiGroup: options.apiGroup ?? "nodus.dev",
      tls: material === undefined
        ? undefined
        : { cert: material.certPem, key: material.keyPem, ca: material.caCertPem },
      adminToken,
      secretKey: options.secretKey ?? testSecretKey,
      bookmarkInterval: (options.bookmarkInterval ?? "30 seconds") as "30 seconds",
      watchLimits: options.watchLimits,
      feed: options.feed ?? defaultFeedOptions,
      onListening: (url) => announced(url),
      sim: options.sim,
      local: options.local === undefined || options.local === false
        ? undefined
        : { dataDir: join(directory, "data"), ...(options.local === true ? {} : options.local) },
      starterCreditsMicro: options.starterCreditsMicro,
      webhooks: options.webhooks
    },
    options.store === undefined
      ? Layer.fresh(MemoryStore.layer)
      : Layer.merge(Layer.fresh(BlobStore.layerMemory), options.store),
    {
      ...(options.estimates === undefined ? {} : { estimates: options.estimates }),
      ...(options.ids === undefined ? {} : { ids: options.ids })
    }
  )
  const runtime = ManagedRuntime.make(layer)
  await runtime.runPromise(Effect.void)
  const url = await listening
  const caPath = material === undefined ? undefined : join(directory, "ca.crt")
  if (caPath !== undefined) writeFileSync(caPath, material!.caCertPem)
  const kubeconfigPath = join(directory, "kubeconfig")
  writeFileSync(kubeconfigPath, kubeconfig({ server: url, ca: material?.caCertPem, token: adminToken }))
  /** Every record of the server's outbox, expired ones too (a test's clock may run far ahead). */
  const streamed = () =>
    runtime.runPromise(
      EventOutbox.use((outbox) =>
        Effect.map(Effect.orDie(outbox.read("", 1_000_000, 0)), (entries) => entries.map((entry) => entry.event))
      )
    )
  const withStore = <A, E>(use: (store: Store["Service"]) => Effect.Effect<A, E>) => runtime.runPromise(Store.use(use))
  return {
    url,
    token: adminToken,
    ca: material?.caCertPem,
    directory,
    kubeconfigPath,
    caPath,
    stop: () => runtime.dispose(),
    streamed,
    withStore
  }
}

export interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  /** The body parsed as JSON (undefined when it is not JSON). */
  readonly body: any
}

export interface RequestOptions {
  readonly body?: unknown
  /** Raw body text, sent as is. */
  readonly raw?: string
  readonly contentType?: string
  readonly headers?: Record<string, string>
  /** undefined: the admin token; null: no Authorization header. */
  readonly token?: string | null
}

/** One HTTP request to a plain-HTTP test server with fetch. */
export const request = async (
  server: TestServer,
  method: string,
  path: string,
  options: RequestOptions = {}
): Promise<Reply> => {
  const token = options.token === undefined ? server.token : options.token
  const body = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body))
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      ...(body === undefined ? {} : { "content-type": options.contentType ?? "application/json" }),
      ...options.headers
    },
    ...(body === undefined ? {} : { body })
  })
  const text = await response.text()
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = undefined
  }
  return { status: response.status, headers: response.headers, text, body: parsed }
}
