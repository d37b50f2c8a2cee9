/**
 * A WebhookEndpoint's sub-resources over HTTP (spec: Webhook sub-resources; docs/webhooks.md):
 *
 *   GET  /apis/{group}/v1/webhookendpoints/{name}/deliveries?limit=N&after=<continue>   the delivery log, oldest first
 *   POST /apis/{group}/v1/webhookendpoints/{name}/deliveries/{id}/replays               the same body, a new webhook-id
 *   POST /apis/{group}/v1/webhookendpoints/{name}/rotations                             a new signing secret, shown
 *                                                                                       once
 *
 * A rotation takes `{previousSecretTTL}` (default 24h, at most 168h) and an optional Idempotency-Key: a retry with the
 * same key and body answers the same secret, another body under the key is IdempotencyKeyReused.
 */
import { Effect, Result } from "effect"
import type { HttpServerRequest, HttpServerResponse } from "effect/http"
import { Auth } from "../../../apiserver/Auth.ts"
import type { JsonObject } from "../../../core/Json.ts"
import * as Limits from "../../../core/Limits.ts"
import { admit } from "../../../core/meta/Admission.ts"
import { ApiError, badRequest, methodNotAllowed, resourceNotFound, subjectOf } from "../../../core/meta/ApiError.ts"
import type { ResourceRef } from "../../../core/meta/Kinds.ts"
import { durationMs } from "../../../core/StatusText.ts"
import { parseJson, readText } from "../../../http/Body.ts"
import type { KindRegistration } from "../../../http/KindApi.ts"
import { json } from "../../../http/Respond.ts"
import { WebhookService } from "../../../runtime/Webhooks.ts"
import { WebhookEndpointRotation } from "../WebhookEndpointSchema.ts"
import { webhookPaths, webhookSchemas } from "./WebhookEndpointOperations.ts"

type Request = HttpServerRequest.HttpServerRequest
type Response = HttpServerResponse.HttpServerResponse

/** The subresources of a WebhookEndpoint this module answers. */
export const webhookSubresources = ["deliveries", "rotations"] as const

/** An Idempotency-Key is at most this long (as on creates). */
const idempotencyKeyLengthMax = 256

export interface WebhookTarget {
  readonly ref: ResourceRef
  readonly name: string
  readonly subresource: string
  readonly item: string | undefined
  readonly action: string | undefined
  /** The project the caller's key is bound to: it sees only that project's deliveries. */
  readonly project: string | undefined
}

export const makeWebhookApi = (operations: WebhookService["Service"]) => {
  const limitOf = (query: URLSearchParams) => {
    const text = query.get("limit")
    if (text === null || text === "") return Effect.succeed(Limits.webhookDeliveriesPageDefault)
    const limit = Number(text)
    return Number.isInteger(limit) && limit >= 1 && String(limit) === text
      ? Effect.succeed(Math.min(limit, Limits.webhookDeliveriesPageMax))
      : Effect.fail(
        badRequest(
          `limit must be a positive integer (at most ${Limits.webhookDeliveriesPageMax} entries are answered per page), not ${
            JSON.stringify(text)
          }`
        )
      )
  }

  const list = (query: URLSearchParams, target: WebhookTarget) =>
    Effect.gen(function*() {
      const limit = yield* limitOf(query)
      const page = yield* operations.deliveries(target.name, query.get("after") ?? "", limit, target.project)
      return json(200, {
        apiVersion: target.ref.apiVersion,
        kind: "WebhookDeliveryList",
        metadata: page.continue === undefined ? {} : { continue: page.continue },
        items: page.items
      })
    })

  const rotate = (request: Request, target: WebhookTarget) =>
    Effect.gen(function*() {
      const text = yield* readText(request)
      const body = text.trim() === "" ? {} : yield* parseJson(text)
      const admitted = admit(
        WebhookEndpointRotation,
        body,
        "Strict",
        subjectOf(target.ref, target.name),
        "WebhookEndpointRotation"
      )
      if (Result.isFailure(admitted)) return yield* admitted.failure
      const ttl = admitted.success.object["previousSecretTTL"]
      const key = request.headers["idempotency-key"]
      if (key !== undefined && (key === "" || key.length > idempotencyKeyLengthMax)) {
        return yield* badRequest(`the Idempotency-Key header must be 1 to ${idempotencyKeyLengthMax} characters`)
      }
      const rotated = yield* operations.rotate(
        target.name,
        durationMs(String(ttl), 0),
        key === undefined ? undefined : { key, fingerprint: JSON.stringify(admitted.success.object) }
      )
      return json(200, rotated)
    })

  const handle = (
    request: Request,
    query: URLSearchParams,
    target: WebhookTarget
  ): Effect.Effect<Response, ApiError> => {
    const { subresource, item, action } = target
    if (subresource === "deliveries" && item === undefined && action === undefined) {
      return request.method === "GET" ? list(query, target) : Effect.fail(methodNotAllowed(request.method))
    }
    if (subresource === "deliveries" && item !== undefined && action === "replays") {
      return request.method === "POST"
        ? Effect.map(
          operations.replay(target.name, item),
          (entry: JsonObject) => json(201, { apiVersion: target.ref.apiVersion, kind: "WebhookDelivery", ...entry })
        )
        : Effect.fail(methodNotAllowed(request.method))
    }
    if (subresource === "rotations" && item === undefined && action === undefined) {
      return request.method === "POST" ? rotate(request, target) : Effect.fail(methodNotAllowed(request.method))
    }
    return Effect.fail(resourceNotFound())
  }

  return { handle }
}

/** The WebhookEndpoint's registration: its delivery log, replays and rotations, and their operations. */
export const webhookEndpointRegistration: KindRegistration<WebhookService | Auth> = {
  kind: "WebhookEndpoint",
  items: { deliveries: "actions" },
  operations: { version: "v1", paths: webhookPaths, schemas: webhookSchemas },
  make: Effect.gen(function*() {
    const api = makeWebhookApi(yield* WebhookService)
    const auth = yield* Auth
    return {
      subresources: [{
        names: webhookSubresources,
        access: (method, route) => (route.name === undefined ? undefined : method === "GET" ? "read" : "write"),
        handle: (call) =>
          api.handle(call.request, call.query, {
            ref: call.ref,
            name: call.name,
            subresource: call.subresource,
            item: call.item,
            action: call.action,
            project: auth.confinedTo(call.principal)
          })
      }]
    }
  })
}
