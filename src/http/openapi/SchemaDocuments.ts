/**
 * The OpenAPI schemas of each kind's spec and status, generated from the same effect Schemas admission decodes with
 * (src/core/schemas), through JSON Schema and the OpenAPI 3.0.3 conversion. Kinds without a schema of their own keep
 * the permissive object schema.
 */
import { Schema } from "effect"
import { equals, type Json, type JsonObject } from "../../core/Json.ts"
import type { KindInfo } from "../../core/meta/Kinds.ts"
import { definitionOf, isDefined } from "../../kinds/Kinds.ts"
import { type KindSchemas, permissiveSchemas, toOpenApi30 } from "./OpenApi.ts"

interface Converted {
  readonly schema: JsonObject
  readonly definitions: JsonObject
}

const convert = (schema: Schema.Top, description: string): Converted => {
  const document = Schema.toJsonSchemaDocument(schema)
  const root = toOpenApi30(document.schema) as JsonObject
  const definitions = Object.fromEntries(
    Object.entries(document.definitions).map(([name, definition]) => [name, toOpenApi30(definition) as Json])
  )
  // A root that is only a $ref gets its description beside it through allOf (OpenAPI 3.0 ignores $ref siblings).
  const described = typeof root["$ref"] === "string"
    ? { allOf: [root], description }
    : { ...root, description: root["description"] ?? description }
  return { schema: described, definitions }
}

/** Merges named definitions; the same name must always mean the same schema. */
export const mergeDefinitions = (...groups: ReadonlyArray<JsonObject>): JsonObject => {
  const merged: Record<string, Json> = {}
  for (const group of groups) {
    for (const [name, definition] of Object.entries(group)) {
      const existing = merged[name]
      if (existing !== undefined && !equals(existing, definition)) {
        throw new Error(`two different schemas are both named ${name}`)
      }
      merged[name] = definition
    }
  }
  return merged
}

const cache = new Map<string, ReturnType<KindSchemas>>()

/** The spec and status schemas of a kind, from its effect Schemas (computed once per kind). */
export const schemaDocuments: KindSchemas = (info: KindInfo) => {
  if (!isDefined(info.kind)) return permissiveSchemas(info)
  const cached = cache.get(info.kind)
  if (cached !== undefined) return cached
  const definition = definitionOf(info.kind)
  const spec = convert(definition.spec, `The desired state of the ${info.kind}, written by its owner.`)
  const status = convert(definition.status, `The observed state of the ${info.kind}, written by the service.`)
  const result = {
    spec: spec.schema,
    status: status.schema,
    definitions: mergeDefinitions(spec.definitions, status.definitions)
  }
  cache.set(info.kind, result)
  return result
}
