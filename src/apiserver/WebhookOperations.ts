/**
 * What the HTTP layer asks of the webhook service (spec: Webhook sub-resources; docs/webhooks.md), declared here and
 * implemented by the runtime (src/runtime/Webhooks.ts), so the API server never imports the service it serves: an
 * endpoint's delivery log, a replay of one delivery, and a rotation of its signing secret.
 */
import { Context, Effect, Layer } from "effect"
import type { JsonObject } from "../core/Json.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"

/** One page of a delivery log: its entries, oldest first, and where the next page starts. */
export interface DeliveryPage {
  readonly items: ReadonlyArray<JsonObject>
  readonly continue: string | undefined
}

export class WebhookOperations extends Context.Service<WebhookOperations, {
  /**
   * The log of the endpoint `name` after `after` (a `continue` value; "" for the first page), at most `limit`; for a
   * key bound to `project`, only the deliveries of that project's events.
   */
  readonly deliveries: (
    name: string,
    after: string,
    limit: number,
    project: string | undefined
  ) => Effect.Effect<DeliveryPage, ApiError>
  /** A new delivery of the same body as delivery `id`, under a new webhook-id: the new entry. */
  readonly replay: (name: string, id: string) => Effect.Effect<JsonObject, ApiError>
  /**
   * A new signing secret; the previous one signs for `previousSecretTtlMs` more. Answers the endpoint with the new
   * secret shown. Under an idempotency key, a retry with the same fingerprint answers the same secret again.
   */
  readonly rotate: (
    name: string,
    previousSecretTtlMs: number,
    idempotency: { readonly key: string; readonly fingerprint: string } | undefined
  ) => Effect.Effect<ResourceObject, ApiError>
}>()("nodus/apiserver/WebhookOperations") {
  /** No webhook service behind the API (tests of the bare machinery). */
  static readonly layerNone = Layer.succeed(
    WebhookOperations,
    WebhookOperations.of({
      deliveries: () => Effect.fail(unavailable),
      replay: () => Effect.fail(unavailable),
      rotate: () => Effect.fail(unavailable)
    })
  )
}

const unavailable = new ApiError({ code: "Unavailable", message: "webhook deliveries are not served by this server" })
