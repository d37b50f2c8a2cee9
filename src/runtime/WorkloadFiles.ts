/**
 * A workload's files (docs/live.md, "Logs", "Outputs"), which the HTTP layer serves and a backend that runs programs
 * keeps (server/JobLogs.ts, server/WorkloadBlobs.ts under the local backend):
 *
 *   GET /apis/{group}/v1/namespaces/{ns}/jobs/{name}/log?index=N&attempt=N&tailLines=N&follow=true   text/plain
 *   GET /apis/{group}/v1/namespaces/{ns}/jobs/{name}/outputs/{output}?index=N                      the bytes
 *
 * Logs follow the pod log conventions: `index` (default 0), `attempt` (the run number of that index; default its
 * latest), `tailLines`, `follow`. An output is a file as collected, or a directory as tar.zst (spec: JobOutput), with
 * its SHA-256 in the `Digest` header. Without such a backend, both are NotFound with the reason.
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

/** An output's bytes as the API serves them. */
export interface OutputFile {
  readonly bytes: Stream.Stream<Uint8Array>
  readonly sizeBytes: number
  readonly sha256: string
}

const noPrograms = (object: ResourceObject, what: string) =>
  new ApiError({
    code: "NotFound",
    message:
      `${object.kind} "${object.metadata.name}" has no ${what}: this server runs no programs (the simulator or --backend none)`,
    fix:
      "Logs and outputs are kept for workloads run on live hosts: start the server with --backend local (the default) or enroll a host (docs/live.md)."
  })

export class WorkloadFiles extends Context.Service<WorkloadFiles, {
  /** The log of one run of the object, as text chunks. */
  readonly log: (object: ResourceObject, request: LogRequest) => Effect.Effect<Stream.Stream<string>, ApiError>
  /** One output of one index (spec: Job status.outputs). */
  readonly output: (object: ResourceObject, name: string, index: number) => Effect.Effect<OutputFile, ApiError>
}>()("nodus/runtime/WorkloadFiles") {
  static readonly layerNone = Layer.succeed(WorkloadFiles, {
    log: (object) => Effect.fail(noPrograms(object, "log")),
    output: (object) => Effect.fail(noPrograms(object, "outputs"))
  })
}
