/**
 * Map batches of FunctionCalls (spec: FunctionCall — `.map()` creates one call per input "in batches of up to 1,000";
 * FunctionCallBatchTooLarge above; the spec shows no endpoint, so this is nodus's design, docs/functions.md "Map
 * batches"):
 *
 *   POST /apis/{group}/v1/namespaces/{ns}/functions/{name}/map
 *   {"apiVersion": "{group}/v1", "kind": "FunctionCallBatch", "mapId": "m1", "startIndex": 0, "inputs": [Payload, …]}
 *
 * answers 201 with a FunctionCallList: the created calls in input order, each named `<function>-<batch>-<mapIndex>`,
 * with `spec.mapId`, `spec.mapIndex` = startIndex + i and the label `<group>/map`. Like a Deployment's `scale`
 * subresource it hangs off the object it acts for, and like a create it is authorized as a write of functioncalls.
 * Every call is admitted as `POST …/functioncalls` admits one (schema, FunctionAdmission, the review), then all are
 * committed in one store commit (Resources.createMany): all or nothing. A refused input is named by its place
 * (`inputs[3].inline`). An Idempotency-Key is honoured as on creates (Idempotency.ts): a replay answers the batch's
 * calls as they are now.
 */
import { Effect, Result } from "effect"
import type { HttpServerRequest, HttpServerResponse } from "effect/http"
import { ApiConfig } from "../../../apiserver/ApiConfig.ts"
import type { Principal } from "../../../apiserver/Auth.ts"
import { Idempotency } from "../../../apiserver/Idempotency.ts"
import { Ids } from "../../../apiserver/Ids.ts"
import { Resources, type WriteOptions } from "../../../apiserver/Resources.ts"
import { isObject, type Json, type JsonObject } from "../../../core/Json.ts"
import { functionCallBatchMax } from "../../../core/Limits.ts"
import { admit } from "../../../core/meta/Admission.ts"
import { ApiError, type Cause, fieldInvalid, invalid } from "../../../core/meta/ApiError.ts"
import { apiVersionOf, type ResourceRef } from "../../../core/meta/Kinds.ts"
import type { ResourceObject } from "../../../core/meta/ObjectMeta.ts"
import { readObject } from "../../../http/Body.ts"
import type { KindRegistration } from "../../../http/KindApi.ts"
import { postFingerprint } from "../../../http/Parameters.ts"
import { json, warningHeader } from "../../../http/Respond.ts"
import { byResource } from "../../Kinds.ts"
import {
  FunctionCallBatch,
  functionCallBatchKind,
  type FunctionCallBatchType,
  mapLabel
} from "../FunctionCallBatchSchema.ts"

/** Where a call's field came from in the batch: its input's place, or the batch field every call shares. */
const batchField = (field: string, index: number): string => {
  if (field === "spec.input" || field.startsWith("spec.input.") || field.startsWith("spec.input[")) {
    return `inputs[${index}]${field.slice("spec.input".length)}`
  }
  if (field === "spec.mapIndex") return "startIndex"
  for (const shared of ["mapId", "session", "timeout"]) {
    if (field === `spec.${shared}`) return shared
  }
  return field
}

const tooLarge = (count: number) =>
  new ApiError({
    code: "FunctionCallBatchTooLarge",
    message: `a map batch carries ${count} inputs; at most ${functionCallBatchMax} calls are created per request`,
    causes: [
      fieldInvalid("inputs", `Too many: ${count}: must have at most ${functionCallBatchMax} items`, "FieldValueTooMany")
    ],
    fix:
      `Send at most ${functionCallBatchMax} inputs per request: split them into batches with the same mapId, each with the startIndex of its first input.`
  })

/** The longest part of a call's name taken from its Function's (253 less the batch's part and an index). */
const namePrefixMax = 200

export const makeFunctionMap = (
  parts: {
    readonly group: string
    readonly resources: Resources["Service"]
    readonly idempotency: Idempotency["Service"]
    readonly ids: Ids["Service"]
  }
) => {
  const { group, resources, idempotency, ids } = parts
  const callsInfo = byResource("v1", "functioncalls")!
  const calls: ResourceRef = { info: callsInfo, group, apiVersion: apiVersionOf(group, callsInfo) }
  const batchSubject = (mapId: string | undefined) => ({
    group,
    kind: "functioncalls",
    ...(mapId === undefined ? {} : { name: mapId })
  })

  /** The batch as sent, checked: its size first (no schema walks 100,000 inputs to refuse them), then its schema. */
  const admitBatch = (
    body: unknown,
    options: WriteOptions
  ): Effect.Effect<{ readonly batch: FunctionCallBatchType; readonly warnings: ReadonlyArray<string> }, ApiError> => {
    const inputs = isObject((body ?? null) as Json) ? (body as JsonObject)["inputs"] : undefined
    if (Array.isArray(inputs) && inputs.length > functionCallBatchMax) return Effect.fail(tooLarge(inputs.length))
    const sentVersion = isObject((body ?? null) as Json) ? (body as JsonObject)["apiVersion"] : undefined
    if (typeof sentVersion === "string" && sentVersion !== calls.apiVersion) {
      return Effect.fail(
        new ApiError({
          code: "BadRequest",
          message:
            `the API version in the data (${sentVersion}) does not match the expected API version (${calls.apiVersion})`
        })
      )
    }
    const mapId = isObject((body ?? null) as Json) && typeof (body as JsonObject)["mapId"] === "string"
      ? (body as JsonObject)["mapId"] as string
      : undefined
    const admitted = admit(FunctionCallBatch, body, options.fieldValidation, batchSubject(mapId), functionCallBatchKind)
    return Result.isFailure(admitted)
      ? Effect.fail(admitted.failure)
      : Effect.succeed({
        batch: admitted.success.object as unknown as FunctionCallBatchType,
        warnings: admitted.success.warnings
      })
  }

  /**
   * The FunctionCall of input `index`, as a single create would send it, named `<function>-<batch>-<mapIndex>`: one
   * random part per batch and the index, so the names of a batch cannot clash among themselves (a thousand names each
   * generated on its own would, now and then), and a clash with another batch fails it whole (retry it).
   */
  const callOf = (
    functionName: string,
    batchName: string,
    batch: FunctionCallBatchType,
    index: number
  ): JsonObject => ({
    apiVersion: calls.apiVersion,
    kind: callsInfo.kind,
    metadata: { ...(batch.metadata ?? {}), name: `${batchName}-${(batch.startIndex ?? 0) + index}` } as JsonObject,
    spec: {
      function: functionName,
      input: batch.inputs[index] as unknown as JsonObject,
      mapId: batch.mapId,
      mapIndex: (batch.startIndex ?? 0) + index,
      ...(batch.session === undefined ? {} : { session: batch.session }),
      ...(batch.timeout === undefined ? {} : { timeout: batch.timeout })
    }
  })

  /** A call's refusal as the batch's: fields renamed to the batch's, Invalid worded about the batch. */
  const itemError = (mapId: string) => (index: number, error: ApiError): ApiError => {
    const causes: ReadonlyArray<Cause> = (error.causes ?? []).map((cause) => ({
      ...cause,
      field: batchField(cause.field, index)
    }))
    if (error.code === "Invalid") return invalid(batchSubject(mapId), causes, functionCallBatchKind)
    return new ApiError({
      code: error.code,
      message: error.message,
      ...(error.causes === undefined ? {} : { causes }),
      ...(error.subject === undefined ? {} : { subject: error.subject }),
      ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
      ...(error.fix === undefined ? {} : { fix: error.fix })
    })
  }

  const listOf = (items: ReadonlyArray<ResourceObject>, resourceVersion: string) => ({
    apiVersion: calls.apiVersion,
    kind: `${callsInfo.kind}List`,
    metadata: { resourceVersion },
    items
  })

  /** A replayed batch: its calls as they are now, found by their map's label and their indexes. */
  const replay = (namespace: string | undefined, batch: FunctionCallBatchType) =>
    Effect.map(resources.list(calls, namespace, { labelSelector: `${mapLabel(group)}=${batch.mapId}` }), (listed) => {
      const start = batch.startIndex ?? 0
      const indexOf = (call: ResourceObject) =>
        Number((call.spec as { readonly mapIndex?: unknown } | undefined)?.mapIndex ?? -1)
      const items = listed.items.filter((call) => indexOf(call) >= start && indexOf(call) < start + batch.inputs.length)
        .sort((a, b) => indexOf(a) - indexOf(b))
      return listOf(items, listed.resourceVersion)
    })

  const handle = (
    request: HttpServerRequest.HttpServerRequest,
    query: URLSearchParams,
    target: {
      readonly namespace: string | undefined
      readonly name: string
      readonly principal: Principal
      readonly options: WriteOptions
    }
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, ApiError> =>
    Effect.gen(function*() {
      const { namespace, name, principal, options } = target
      const body = yield* readObject(request, functionCallBatchKind)
      const { batch, warnings } = yield* admitBatch(body, options)
      // A name is at most 253 characters: the Function's part leaves room for the batch's and the index (as
      // Kubernetes shortens a generateName), and ends where a name may go on.
      const batchName = `${name.slice(0, namePrefixMax).replace(/[.-]+$/u, "")}-${ids.nameSuffix()}`
      const bodies = batch.inputs.map((_, index) => callOf(name, batchName, batch, index))
      const create = (writeOptions: WriteOptions) =>
        Effect.map(resources.createMany(calls, namespace, bodies, writeOptions, itemError(batch.mapId)), (results) => {
          const items = results.map((result) => result.object)
          return {
            list: listOf(items, items.at(-1)?.metadata.resourceVersion ?? ""),
            warnings: [...new Set([...warnings, ...(results[0]?.warnings ?? [])])]
          }
        })
      const key = request.headers["idempotency-key"]
      if (key === undefined || key === "" || options.dryRun) {
        const created = yield* create(options)
        return json(201, created.list, warningHeader(created.warnings))
      }
      // What the client asked for, as a create's key binds it (http/Parameters.ts postFingerprint, as http/Handlers.ts
      // create): a retry is the same request.
      const claim = yield* idempotency.claim(
        principal.name,
        key,
        postFingerprint(request, query, options, body)
      )
      if (claim._tag === "Replay") {
        return json(claim.response.status, yield* replay(namespace, batch), {
          ...warningHeader(claim.response.warnings),
          "idempotent-replayed": "true"
        })
      }
      const created = yield* create({
        ...options,
        commitWith: (all) => claim.finishOps(201, [...new Set([...warnings, ...all])])
      }).pipe(Effect.tapError(() => claim.release))
      return json(201, created.list, warningHeader(created.warnings))
    })

  return { handle }
}

/**
 * The Function's registration: its map batches. A batch creates FunctionCalls, so it needs what a create of
 * functioncalls needs, not a write of the Function.
 */
export const functionRegistration: KindRegistration<ApiConfig | Resources | Idempotency | Ids> = {
  kind: "Function",
  make: Effect.gen(function*() {
    const map = makeFunctionMap({
      group: (yield* ApiConfig).group,
      resources: yield* Resources,
      idempotency: yield* Idempotency,
      ids: yield* Ids
    })
    return {
      subresources: [{
        names: ["map"],
        access: (method, route) =>
          route.name !== undefined && route.item === undefined && method === "POST" ? "write" : undefined,
        authorizeAs: "functioncalls",
        handle: (call) =>
          Effect.flatMap(call.writeOptions, (options) =>
            map.handle(call.request, call.query, {
              namespace: call.namespace,
              name: call.name,
              principal: call.principal,
              options
            }))
      }]
    }
  })
}
