/**
 * The settings every part of the API server reads: the API group of every nodus kind, the URL clients reach the
 * server at (error documentation links name it), how often watches send bookmarks and what they hold.
 */
import { Context, type Duration } from "effect"
import type { WatchLimits } from "./Watch.ts"

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
  /** The local backend: programs run on the host's userland, so a Job must name its command (a kind's `serverRules`). */
  readonly hostUserland?: boolean
  /**
   * Whether this process serves the API (false: `--role controllers`, which answers only the health checks, /version,
   * the error pages and the node agents; docs/scale-out.md, "Roles"). Absent: true.
   */
  readonly servesApi?: boolean
}

export class ApiConfig extends Context.Service<ApiConfig, ApiSettings>()("nodus/apiserver/ApiConfig") {}
