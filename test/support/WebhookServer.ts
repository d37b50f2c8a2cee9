/**
 * A nodus server in a process of its own, for tests that kill it (`kill -9`) and start it again on the same store:
 * the whole server (Server.layerWith) over embedded PGlite in `argv[2]`, plain HTTP on loopback, the sim backend on a
 * test clock that stands still unless moved, and webhook deliveries to loopback receivers whose names resolve
 * through a stub (`receiver.example.com` → 127.0.0.1; no network here). Prints `serving <url>` once it listens.
 *
 *   node test/support/WebhookServer.ts <data dir> <admin token>
 */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import * as Server from "../../src/server/Server.ts"
import { defaultFeedOptions } from "../../src/store/ChangeFeed.ts"
import * as SqlStore from "../../src/store/SqlStore.ts"
import { testSecretKey } from "./TestServer.ts"

const [dataDir, adminToken] = process.argv.slice(2)
if (dataDir === undefined || adminToken === undefined) {
  throw new Error("usage: WebhookServer.ts <data dir> <admin token>")
}

const resolve = async (host: string) => {
  if (host !== "receiver.example.com") throw new Error(`getaddrinfo ENOTFOUND ${host}`)
  return [{ address: "127.0.0.1", family: 4 }]
}

const server = Server.layerWith({
  host: "127.0.0.1",
  port: 0,
  apiGroup: "nodus.dev",
  tls: undefined,
  adminToken,
  secretKey: testSecretKey,
  bookmarkInterval: "30 seconds",
  feed: defaultFeedOptions,
  onListening: (url) => console.log(`serving ${url}`),
  sim: { speed: 1e-9 },
  webhooks: { allowLoopback: true, resolve, timeoutMs: 2_000 }
}, SqlStore.layerPglite(dataDir))

NodeRuntime.runMain(Layer.launch(server))
