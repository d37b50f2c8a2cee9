/**
 * The settings every part of the API server reads: the API group of every nodus kind, the URL clients reach the
 * server at (error documentation links name it), how often watches send bookmarks and what they hold.
 */
import { Context, type Duration } from "effect"

/** How much a watch holds for a client that does not keep up, and how long it waits for one (Watch.ts). */
export interface WatchLimits {
  /** Events held for the client; the initial listing is also read this many objects at a time. */
  readonly buffer: number
  /** How long a live change waits for room in a full buffer before the watcher is slow. */
  readonly slowAfter: Duration.Input
  /**
   * How long the client of an ended watch (410, timeoutSeconds) may take nothing before its consumer is interrupted:
   * over HTTP that closes the connection, since the writer of a client that stopped reading waits for the socket.
   */
  readonly drainGrace: Duration.Input
}

export interface ApiSettings {
  readonly group: string
  /**
   * The server's address as configured (`--public-url`, else where it listens), known once it listens. Links in
   * answers are built from it, never from the request's Host header, which a client controls.
   */
  readonly publicUrl: () => string
  readonly bookmarkInterval: Duration.Input
  /** What a watch holds for a client that does not keep up (Watch.ts); defaultWatchLimits when absent. */
  readonly watchLimits?: WatchLimits
  /** `--webhook-allow-loopback`: admission takes webhook receivers on loopback (a kind's `serverRules`). */
  readonly developmentWebhooks?: boolean
  /**
   * The local backend: programs run on the host's userland, so a Job must name its command (a kind's `serverRules`).
   */
  readonly hostUserland?: boolean
  /**
   * Whether this process serves the API (false: `--role controllers`, which answers only the health checks, /version,
   * the error pages and the node agents; docs/scale-out.md, "Roles"). Absent: true.
   */
  readonly servesApi?: boolean
}

export class ApiConfig extends Context.Service<ApiConfig, ApiSettings>()("nodus/apiserver/ApiConfig") {}
