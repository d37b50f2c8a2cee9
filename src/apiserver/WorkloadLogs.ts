/**
 * A workload's logs (docs/live.md, "Logs"): `GET /apis/{group}/v1/namespaces/{ns}/jobs/{name}/log` with the pod log
 * conventions — `index` (default 0), `attempt` (the run number of that index; default its latest), `tailLines`,
 * `follow` — answered as text/plain. The HTTP layer declares what it needs; a backend that runs programs keeps the
 * logs and implements it (server/LiveBackend.ts). Without one, a log is NotFound with the reason.
 */
import { Context, Effect, Layer, type Stream } from "effect"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"

export interface LogRequest {
  readonly index: number
  /** The run number of the index (1-based); undefined: its latest run. */
  readonly attempt: number | undefined
  /** Only the last lines; undefined: the whole log. */
  readonly tailLines: number | undefined
  /** Keeps the answer open and sends new lines until the run ends. */
  readonly follow: boolean
}

export class WorkloadLogs extends Context.Service<WorkloadLogs, {
  /** The log of one run of the object, as text chunks. */
  readonly read: (object: ResourceObject, request: LogRequest) => Effect.Effect<Stream.Stream<string>, ApiError>
}>()("nodus/apiserver/WorkloadLogs") {
  static readonly layerNone = Layer.succeed(WorkloadLogs, {
    read: (object) =>
      Effect.fail(new ApiError({
        code: "NotFound",
        message: `${object.kind} "${object.metadata.name}" has no log: this server runs no programs (the simulator or --backend none)`,
        fix: "Logs are kept for workloads run on live hosts: start the server with --backend local (the default) or enroll a host (docs/live.md)."
      }))
  })
}
