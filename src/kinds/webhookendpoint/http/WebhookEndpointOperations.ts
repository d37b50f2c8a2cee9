// The OpenAPI description of a WebhookEndpoint's sub-resources (spec: Webhook sub-resources;
// kinds/webhookendpoint/http/WebhookApi.ts, docs/webhooks.md), added to the v1 document beside the kind's own paths.
// The rotation body's schema is the one admission decodes with (kinds/webhookendpoint/WebhookEndpointSchema.ts); the
// log entries are described here. Pure.

import { Schema } from "effect"
import type { JsonObject } from "../../../core/Json.ts"
import * as Limits from "../../../core/Limits.ts"
import { schemaName, toOpenApi30 } from "../../../http/openapi/OpenApi.ts"
import { json, operation, pathParameter, schemaRef } from "../../../http/openapi/Operations.ts"
import { WebhookEndpointRotation } from "../WebhookEndpointSchema.ts"

const delivery: JsonObject = {
  type: "object",
  description: "An entry of a WebhookEndpoint's delivery log (kept 7 days).",
  required: ["id", "webhookId", "type", "phase", "attempts", "createdTime"],
  properties: {
    id: { type: "string", description: "The entry's id, for .../deliveries/{id}/replays." },
    webhookId: { type: "string", description: "The webhook-id header of every attempt of this delivery." },
    type: { type: "string", description: "The event type, such as job.succeeded." },
    phase: {
      type: "string",
      enum: ["Pending", "Succeeded", "Failed", "Abandoned"],
      description: "Pending, Succeeded, Failed or Abandoned."
    },
    attempts: { type: "integer", description: "Attempts made." },
    createdTime: {
      type: "string",
      format: "date-time",
      description: "When the delivery was made (the event's fan-out, or the replay)."
    },
    lastAttemptTime: { type: "string", format: "date-time", description: "When its last attempt was signed." },
    nextAttemptTime: { type: "string", format: "date-time", description: "When a Pending delivery is tried next." },
    responseCode: { type: "integer", description: "The receiver's last HTTP status code." },
    durationMs: { type: "integer", description: "How long the last attempt took." },
    error: { type: "string", description: "Why the last attempt failed, or why the delivery was abandoned." },
    replayOf: { type: "string", description: "The entry this one replays." }
  }
}

/** The components the WebhookEndpoint sub-resources refer to. */
export const webhookSchemas = (): JsonObject => ({
  WebhookEndpointRotation: toOpenApi30(Schema.toJsonSchemaDocument(WebhookEndpointRotation).schema) as JsonObject,
  WebhookDelivery: delivery,
  WebhookDeliveryList: {
    type: "object",
    description: "A page of a delivery log, oldest first.",
    required: ["items"],
    properties: {
      apiVersion: { type: "string" },
      kind: { type: "string", enum: ["WebhookDeliveryList"] },
      metadata: {
        type: "object",
        properties: { continue: { type: "string", description: "The `after` of the next page, when there is one." } }
      },
      items: { type: "array", items: schemaRef("WebhookDelivery") }
    }
  }
})

/** The path items of a WebhookEndpoint's sub-resources, under the v1 root of `group`. */
export const webhookPaths = (group: string): ReadonlyArray<readonly [string, JsonObject]> => {
  const endpoint = `/apis/${group}/v1/webhookendpoints/{name}`
  const scope = [pathParameter("name", "The name of the WebhookEndpoint.")]
  return [
    [`${endpoint}/deliveries`, {
      parameters: scope,
      get: operation("listWebhookDeliveries", "list", "The endpoint's delivery log, oldest first.", {
        parameters: [
          {
            name: "limit",
            in: "query",
            description:
              `Entries per page, 1 to ${Limits.webhookDeliveriesPageMax} (default ${Limits.webhookDeliveriesPageDefault}).`,
            schema: { type: "integer" }
          },
          {
            name: "after",
            in: "query",
            description: "The `continue` value of the previous page.",
            schema: { type: "string" }
          }
        ],
        responses: { "200": { description: "OK", content: json("WebhookDeliveryList") } }
      })
    }],
    [`${endpoint}/deliveries/{id}/replays`, {
      parameters: [...scope, pathParameter("id", "The log entry to replay.")],
      post: operation("replayWebhookDelivery", "post", "A new delivery of the entry's body under a new webhook-id.", {
        responses: { "201": { description: "The new entry", content: json("WebhookDelivery") } }
      })
    }],
    [`${endpoint}/rotations`, {
      parameters: scope,
      post: operation(
        "rotateWebhookSecret",
        "post",
        "A new signing secret, shown once in status.signingSecret; the previous one keeps signing beside it " +
          "until previousSecretTTL ends (status.secretRotation). With an Idempotency-Key, a retry answers the same secret.",
        {
          parameters: [{
            name: "Idempotency-Key",
            in: "header",
            description: "Makes the rotation retry-safe.",
            schema: { type: "string" }
          }],
          requestBody: { required: false, content: json("WebhookEndpointRotation") },
          responses: {
            "200": {
              description: "The endpoint, with its new secret",
              content: json(schemaName(group, "v1", "WebhookEndpoint"))
            }
          }
        }
      )
    }]
  ]
}
