/**
 * A Job's files over HTTP (docs/live.md, "Logs", "Outputs"), which a backend that runs programs keeps
 * (runtime/WorkloadFiles.ts):
 *
 *   GET /apis/{group}/v1/namespaces/{ns}/jobs/{name}/log?index=N&attempt=N&tailLines=N&follow=true   text/plain
 *   GET /apis/{group}/v1/namespaces/{ns}/jobs/{name}/outputs/{output}?index=N                      the bytes
 */
import { Effect, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import { Resources } from "../../../apiserver/Resources.ts"
import * as Limits from "../../../core/Limits.ts"
import type { ResourceRef } from "../../../core/meta/Kinds.ts"
import type { KindRegistration } from "../../../http/KindApi.ts"
import { boolParameter, intParameter } from "../../../http/Parameters.ts"
import { WorkloadFiles } from "../../../runtime/WorkloadFiles.ts"

const make = (resources: Resources["Service"], files: WorkloadFiles["Service"]) => {
  /** A Job's log as text/plain, the pod log conventions (runtime/WorkloadFiles.ts). */
  const readLog = (query: URLSearchParams, ref: ResourceRef, namespace: string | undefined, name: string) =>
    Effect.gen(function*() {
      const index = (yield* intParameter(query, "index", 0, Limits.jobCompletionsMax - 1)) ?? 0
      const attempt = yield* intParameter(query, "attempt", 1, Number.MAX_SAFE_INTEGER)
      const tailLines = yield* intParameter(query, "tailLines", 0, Number.MAX_SAFE_INTEGER)
      const follow = yield* boolParameter(query, "follow")
      const object = yield* resources.get(ref, namespace, name)
      const text = yield* files.log(object, { index, attempt, tailLines, follow })
      const encoder = new TextEncoder()
      return HttpServerResponse.stream(Stream.map(text, (chunk) => encoder.encode(chunk)), {
        status: 200,
        contentType: "text/plain; charset=utf-8"
      })
    })

  /** One output of a Job's index (runtime/WorkloadFiles.ts), with its SHA-256 as the Digest header. */
  const readOutput = (
    query: URLSearchParams,
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    output: string
  ) =>
    Effect.gen(function*() {
      const index = (yield* intParameter(query, "index", 0, Limits.jobCompletionsMax - 1)) ?? 0
      const object = yield* resources.get(ref, namespace, name)
      const file = yield* files.output(object, output, index)
      const digest = `sha-256=${Buffer.from(file.sha256, "hex").toString("base64")}`
      return HttpServerResponse.stream(file.bytes, {
        status: 200,
        contentType: "application/octet-stream",
        contentLength: file.sizeBytes,
        headers: { digest, "content-disposition": `attachment; filename="${output}"` }
      })
    })

  return { readLog, readOutput }
}

export const jobRegistration: KindRegistration<Resources | WorkloadFiles> = {
  kind: "Job",
  items: { outputs: "items" },
  make: Effect.gen(function*() {
    const { readLog, readOutput } = make(yield* Resources, yield* WorkloadFiles)
    return {
      subresources: [{
        names: ["log"],
        access: (method, route) => (method === "GET" && route.item === undefined ? "read" : undefined),
        handle: (call) => readLog(call.query, call.ref, call.namespace, call.name)
      }, {
        names: ["outputs"],
        access: (method, route) => (method === "GET" && route.item !== undefined ? "read" : undefined),
        handle: (call) => readOutput(call.query, call.ref, call.namespace, call.name, call.item!)
      }]
    }
  })
}
