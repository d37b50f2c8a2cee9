// What the hand-written operations of the OpenAPI document share (a Sandbox's commands and files, a WebhookEndpoint's
// log, the test clock, a FunctionCall's result): references to components, JSON bodies, the Status error response,
// parameters, and an operation with that error response as its default. Pure.

import type { JsonObject } from "../../core/Json.ts"

export const schemaRef = (name: string): JsonObject => ({ $ref: `#/components/schemas/${name}` })

/** A JSON body of the component `name`. */
export const json = (name: string): JsonObject => ({ "application/json": { schema: schemaRef(name) } })

export const errorResponse: JsonObject = {
  description: "An error, as a Status object (spec: Errors).",
  content: json("Status")
}

export const pathParameter = (name: string, description: string): JsonObject => ({
  name,
  in: "path",
  required: true,
  description,
  schema: { type: "string" }
})

export const queryParameter = (
  name: string,
  description: string,
  schema: JsonObject = { type: "string" }
): JsonObject => ({ name, in: "query", description, schema })

/** An operation whose every other answer is a Status. */
export const operation = (
  operationId: string,
  action: string,
  description: string,
  fields: JsonObject
): JsonObject => ({
  operationId,
  description,
  "x-kubernetes-action": action,
  ...fields,
  responses: { ...(fields["responses"] as JsonObject), default: errorResponse }
})

/** A kind's hand-written operations (its subresources), added to its version's document beside the generic ones. */
export interface KindOperations {
  readonly version: "v1" | "v1beta1"
  readonly paths: (group: string) => ReadonlyArray<readonly [string, JsonObject]>
  readonly schemas: (group: string) => JsonObject
}
