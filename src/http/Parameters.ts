/**
 * What the HTTP layer reads from a request besides its body, for every kind: query parameters (booleans, integers
 * within a range, dryRun, fieldValidation, fieldManager, selectors), the patch type, the one Authorization header,
 * text the store cannot hold, and the headers of an object's answer.
 */
import { Effect } from "effect"
import type { HttpServerRequest } from "effect/http"
import { fingerprint } from "../apiserver/Idempotency.ts"
import { etagOf, type PatchType, type WriteOptions } from "../apiserver/Resources.ts"
import { canonical, type Json } from "../core/Json.ts"
import { type FieldValidation, fieldValidations } from "../core/meta/Admission.ts"
import { ApiError, badRequest, fieldInvalid } from "../core/meta/ApiError.ts"
import type { ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { mediaTypeOf, textProblem } from "./Body.ts"
import { warningHeader } from "./Respond.ts"
import type * as Routes from "./Routes.ts"

type Request = HttpServerRequest.HttpServerRequest

/** Go's strconv.ParseBool, which kubectl and client-go use (Python sends `watch=True`). */
export const parseBool = (value: string | null): boolean | undefined => {
  if (value === null) return undefined
  if (["1", "t", "T", "true", "TRUE", "True"].includes(value)) return true
  if (["0", "f", "F", "false", "FALSE", "False"].includes(value)) return false
  return undefined
}

export const boolParameter = (query: URLSearchParams, name: string): Effect.Effect<boolean, ApiError> => {
  const raw = query.get(name)
  const value = parseBool(raw)
  if (raw !== null && raw !== "" && value === undefined) {
    return Effect.fail(badRequest(`invalid value for ${name}: "${raw}"`))
  }
  return Effect.succeed(value ?? false)
}

/**
 * An integer query parameter within [min, max]. Out of range is the client's mistake, said before anything reads the
 * store (a number beyond bigint would otherwise fail there, as if the server were down).
 */
export const intParameter = (
  query: URLSearchParams,
  name: string,
  min: number,
  max: number
): Effect.Effect<number | undefined, ApiError> => {
  const raw = query.get(name)
  if (raw === null || raw === "") return Effect.succeed(undefined)
  const value = Number(raw)
  if (/^-?[0-9]+$/u.test(raw) && value >= min && value <= max) return Effect.succeed(value)
  const why = `must be an integer from ${min} to ${max}`
  return Effect.fail(
    badRequest(`invalid value for ${name}: "${raw}" ${why}`, [fieldInvalid(name, `Invalid value: ${why}`)])
  )
}

/** `limit`: Kubernetes reads zero and below as "no limit"; anything a page could hold is accepted. */
export const limitRange = [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER] as const

/** `timeoutSeconds`: the longest wait a Node timer can hold (2^31 - 1 ms); zero means "no timeout". */
export const timeoutSecondsRange = [0, Math.floor(0x7fff_ffff / 1_000)] as const

export const dryRunOf = (query: URLSearchParams): Effect.Effect<boolean, ApiError> => {
  const values = query.getAll("dryRun")
  if (values.every((value) => value === "All")) return Effect.succeed(values.length > 0)
  return Effect.fail(
    badRequest(`invalid dryRun value "${values.find((value) => value !== "All")}": the only supported value is All`)
  )
}

export const fieldValidationOf = (query: URLSearchParams): Effect.Effect<FieldValidation, ApiError> => {
  const raw = query.get("fieldValidation")
  if (raw === null || raw === "") return Effect.succeed("Warn")
  return fieldValidations.includes(raw as FieldValidation)
    ? Effect.succeed(raw as FieldValidation)
    : Effect.fail(badRequest(`invalid fieldValidation value "${raw}": supported values are Strict, Warn and Ignore`))
}

/** fieldManager: the query parameter, or the User-Agent's product as Kubernetes defaults it. */
export const fieldManagerOf = (query: URLSearchParams, request: Request): Effect.Effect<string, ApiError> => {
  const raw = query.get("fieldManager")
  if (raw !== null && raw !== "") {
    return raw.length <= 128
      ? Effect.succeed(raw)
      : Effect.fail(badRequest("fieldManager must be at most 128 characters"))
  }
  const agent = request.headers["user-agent"]
  return Effect.succeed(agent === undefined || agent === "" ? "unknown" : agent.split("/")[0]!.slice(0, 128))
}

export const patchTypeOf = (contentType: string | undefined, ref: ResourceRef): Effect.Effect<PatchType, ApiError> => {
  const mediaType = mediaTypeOf(contentType)
  switch (mediaType) {
    case "application/merge-patch+json":
      return Effect.succeed("merge")
    case "application/json-patch+json":
      return Effect.succeed("json")
    case "application/apply-patch+yaml":
      return Effect.succeed("apply")
    default:
      return Effect.fail(
        new ApiError({
          code: "UnsupportedMediaType",
          message:
            `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (${
              mediaType === "" ? "no Content-Type" : mediaType
            } is not supported by ${ref.apiVersion}, Kind=${ref.info.kind})`,
          fix:
            "Send the patch as application/merge-patch+json (kubectl patch --type merge) or application/json-patch+json (--type json)."
        })
      )
  }
}

/** labelSelector and fieldSelector as sent (absent ones left out). */
export const selectorsOf = (query: URLSearchParams): { labelSelector?: string; fieldSelector?: string } => {
  const labelSelector = query.get("labelSelector")
  const fieldSelector = query.get("fieldSelector")
  return { ...(labelSelector === null ? {} : { labelSelector }), ...(fieldSelector === null ? {} : { fieldSelector }) }
}

/**
 * The one Authorization header of a request. Node keeps the first of repeated ones and drops the rest, so a request
 * with two (one valid, one not) would act as whichever came first: it is refused as ambiguous instead.
 */
export const authorizationOf = (request: Request): Effect.Effect<string | undefined, ApiError> => {
  const raw = (request.source as { readonly rawHeaders?: unknown }).rawHeaders
  const names = Array.isArray(raw) ? raw.filter((_, index) => index % 2 === 0) : []
  return names.filter((name) => typeof name === "string" && name.toLowerCase() === "authorization").length > 1
    ? Effect.fail(
      badRequest("the request carries more than one Authorization header", [
        fieldInvalid("Authorization", "Invalid value: send exactly one `Authorization: Bearer <key>`")
      ])
    )
    : Effect.succeed(request.headers["authorization"])
}

/**
 * Text the store cannot hold, in a path segment or a query parameter (`textProblem`): a client's mistake, refused
 * before anything reads the store rather than failing there as if the store were down.
 */
export const requestTextProblem = (route: Routes.Route, query: URLSearchParams): ApiError | undefined => {
  const fieldOf = (part: string) => (part === "namespace" || part === "name" ? `metadata.${part}` : part)
  const segments = Object.entries(route).flatMap(([part, value]) =>
    typeof value === "string"
      ? [[fieldOf(part), value] as const]
      : Array.isArray(value)
      ? value.map((segment) => ["path", String(segment)] as const)
      : []
  )
  for (const [field, text] of [...segments, ...query.entries()]) {
    const problem = textProblem(text)
    if (problem !== undefined) {
      return badRequest(`${field} holds ${problem}`, [fieldInvalid(field, `Invalid value: ${problem} is not allowed`)])
    }
  }
  return undefined
}

export const objectHeaders = (
  object: ResourceObject,
  warnings: ReadonlyArray<string> = []
): Record<string, string> => ({
  etag: etagOf(object),
  ...warningHeader(warnings)
})

/**
 * The fingerprint an Idempotency-Key binds on a POST: what the client asked for, not what its User-Agent says (a retry
 * from an upgraded client is the same request).
 */
export const postFingerprint = (
  request: Request,
  query: URLSearchParams,
  options: WriteOptions,
  body: unknown
): string =>
  fingerprint([
    "POST",
    new URL(request.url, "http://local").pathname,
    options.fieldValidation,
    query.get("fieldManager") ?? "",
    canonical((body ?? null) as Json)
  ])
