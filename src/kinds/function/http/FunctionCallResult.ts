/**
 * A FunctionCall's result, long-polled (issue: `GET …/functioncalls/{name}/result?timeout=<duration>` "long-polls until
 * the call ends", for `.remote()`; docs/functions.md):
 *
 *   GET /apis/{group}/v1/namespaces/{ns}/functioncalls/{name}/result?timeout=30s
 *
 * answers the FunctionCall as soon as it has ended (phase Succeeded, Failed or Cancelled: its status carries the
 * result or the error), or as it is when `timeout` (default 30s, at most 60s) passes first: a client asks again. The
 * wait is a fiber on the change feed (subscribed before the object is read, so no end falls between), holding nothing
 * but its subscription; a call deleted meanwhile is NotFound.
 */
import { Duration, Effect, Option, Stream } from "effect"
import { Resources } from "../../../apiserver/Resources.ts"
import { functionCallResultWaitDefault, functionCallResultWaitMsMax } from "../../../core/Limits.ts"
import { ApiError, badRequest, fieldInvalid } from "../../../core/meta/ApiError.ts"
import type { ResourceRef } from "../../../core/meta/Kinds.ts"
import type { ResourceObject } from "../../../core/meta/ObjectMeta.ts"
import { durationMs } from "../../../core/StatusText.ts"
import type { KindRegistration } from "../../../http/KindApi.ts"
import { ChangeFeed } from "../../../store/ChangeFeed.ts"
import { functionCallFinalPhases } from "../FunctionCallSchema.ts"
import { functionCallPaths, functionCallSchemas } from "./FunctionCallOperations.ts"

const finalPhases: ReadonlySet<string> = new Set(functionCallFinalPhases)

/** Whether the call has ended: its status has a final phase. */
export const hasEnded = (object: ResourceObject): boolean => {
  const status = object.status as { readonly phase?: unknown } | undefined
  return typeof status?.phase === "string" && finalPhases.has(status.phase)
}

const waitOf = (query: URLSearchParams): Effect.Effect<number, ApiError> => {
  const text = query.get("timeout") ?? functionCallResultWaitDefault
  const ms = durationMs(text, Number.NaN)
  return Number.isFinite(ms) && ms >= 0 && ms <= functionCallResultWaitMsMax
    ? Effect.succeed(ms)
    : Effect.fail(
      badRequest(
        `timeout must be a duration from 0s to ${functionCallResultWaitMsMax / 1000}s, not ${JSON.stringify(text)}`,
        [
          fieldInvalid(
            "timeout",
            `Invalid value: ${JSON.stringify(text)}: a duration such as 30s, at most ${
              functionCallResultWaitMsMax / 1000
            }s; ask again to wait longer`
          )
        ]
      )
    )
}

export const makeFunctionCallResult = (
  parts: { readonly resources: Resources["Service"]; readonly feed: ChangeFeed["Service"] }
) => {
  const { resources, feed } = parts

  /** The call once it ended, or as it is when the wait is over. */
  const await_ = (
    query: URLSearchParams,
    ref: ResourceRef,
    namespace: string | undefined,
    name: string
  ): Effect.Effect<ResourceObject, ApiError> =>
    Effect.gen(function*() {
      const waitMs = yield* waitOf(query)
      return yield* Effect.scoped(Effect.gen(function*() {
        // Subscribed first: an end committed after this read is in the live stream.
        const subscription = yield* Effect.option(feed.subscribe(undefined))
        const object = yield* resources.get(ref, namespace, name)
        if (hasEnded(object) || waitMs === 0 || Option.isNone(subscription)) return object
        const uid = object.metadata.uid
        yield* subscription.value.live.pipe(
          Stream.filter((change) =>
            change.object.metadata.uid === uid && (change.type === "DELETED" || hasEnded(change.object))
          ),
          Stream.runHead,
          Effect.timeoutOption(Duration.millis(waitMs)),
          // A subscriber that fell behind lost its place: the object as it is now answers, as after a timeout.
          Effect.ignore
        )
        // Read as the API renders it (a deleted call is NotFound).
        return yield* resources.get(ref, namespace, name)
      }))
    })

  return { await: await_ }
}

/** The FunctionCall's registration: its result, long-polled, and the operations of it and of a Function's map. */
export const functionCallRegistration: KindRegistration<Resources | ChangeFeed> = {
  kind: "FunctionCall",
  operations: { version: "v1", paths: functionCallPaths, schemas: functionCallSchemas },
  make: Effect.gen(function*() {
    const result = makeFunctionCallResult({ resources: yield* Resources, feed: yield* ChangeFeed })
    return {
      subresources: [{
        names: ["result"],
        access: (method, route) => (method === "GET" && route.item === undefined ? "read" : undefined),
        handle: (call) =>
          Effect.flatMap(
            result.await(call.query, call.ref, call.namespace, call.name),
            (object) => call.render(object, 200, {})
          )
      }]
    }
  })
}
