/**
 * The server's admission rules of Functions and FunctionCalls, those a pure schema cannot decide because they read the
 * store (spec: Function, FunctionCall; docs/kinds/FunctionCall.md, "Admission at the server"):
 *
 * - a FunctionCall names a Function of its project that is not being deleted (FunctionNotFound otherwise);
 * - its timeout is at most the Function's, and unset takes the Function's;
 * - a caller that says its Python minor (annotation `<group>/python`) must be on the Function's (Invalid otherwise);
 * - a call of a class Function names one of its methods (annotation `<group>/method`), and a call of a function none;
 * - a `sha256:` reference — a Function's code archive, a call's input — names a blob the project may read
 *   (docs/blobs.md), so a worker never starts on bytes that are not there or not the project's.
 */
import { Effect, Option } from "effect"
import type { AdmissionPlugin } from "../apiserver/AdmissionPlugins.ts"
import { type Blobs, projectReader } from "../apiserver/Blobs.ts"
import { isObject, type Json, type JsonObject } from "../core/Json.ts"
import * as Limits from "../core/Limits.ts"
import { ApiError, type Cause, fieldInvalid, invalid, subjectOf } from "../core/meta/ApiError.ts"
import type { ResourceRef } from "../core/meta/Kinds.ts"
import { durationMs } from "../core/StatusText.ts"
import { mapLabel } from "../kinds/function/FunctionCallBatchSchema.ts"
import type { StoreShape } from "../store/Store.ts"

const specOf = (object: JsonObject): JsonObject => (isObject(object["spec"]) ? object["spec"] : {})
const nameOf = (
  object: JsonObject
) => (isObject(object["metadata"]) && typeof object["metadata"]["name"] === "string"
  ? object["metadata"]["name"]
  : undefined)

/** The annotation a client sets to its Python minor (e.g. "3.12"), checked against the Function's `python`. */
export const pythonAnnotation = (group: string) => `${group}/python`

/**
 * The annotation naming the method a call runs on a class Function (spec.code.cls; nodus: the spec's FunctionCall has
 * no field for it, docs/functions.md). Required for a class, refused for a function.
 */
export const methodAnnotation = (group: string) => `${group}/method`

/** Why a call's method does not fit its Function's code, if it does not. */
const methodProblem = (code: Json | undefined, method: Json | undefined, functionName: string): string | undefined => {
  const cls = isObject(code) && isObject(code["cls"]) ? code["cls"] : undefined
  if (cls === undefined) {
    return method === undefined
      ? undefined
      : `Forbidden: Function "${functionName}" runs a function, not a class: a call names no method`
  }
  const methods = Array.isArray(cls["methods"]) ? cls["methods"].map(String) : []
  if (method === undefined) {
    return `Required value: Function "${functionName}" runs class ${String(cls["name"])}: name one of its methods (${
      methods.join(", ")
    })`
  }
  return methods.includes(String(method))
    ? undefined
    : `Unsupported value: "${String(method)}": class ${String(cls["name"])} serves ${
      methods.map((name) => `"${name}"`).join(", ")
    }`
}

/** Causes for `sha256:` references at `fields` that name no blob `project` may read. */
const unreadableBlobs = (
  blobs: Blobs["Service"],
  project: string,
  references: ReadonlyArray<readonly [string, unknown]>
) =>
  Effect.map(
    Effect.forEach(references, ([field, reference]) =>
      typeof reference !== "string" || !reference.startsWith("sha256:")
        ? Effect.succeed<ReadonlyArray<Cause>>([])
        : Effect.map(
          blobs.stat(reference.slice("sha256:".length), projectReader(project)),
          (blob): ReadonlyArray<Cause> =>
            blob === undefined
              ? [
                fieldInvalid(
                  field,
                  `Not found: "${reference}": no such blob in project "${project}"; upload it first with PUT /blobs/v1/${reference} (docs/blobs.md)`,
                  "FieldValueNotFound"
                )
              ]
              : []
        )),
    (causes) => causes.flat()
  )

const codeBlobOf = (object: JsonObject) => {
  const code = specOf(object)["code"]
  return isObject(code) ? code["blob"] : undefined
}

/**
 * A Function's code archive must be a blob of its project: at create, and at an update that names another one (an
 * update that keeps it — a label, a finalizer, scaling — is not refused for a blob collected since).
 */
export const functionCodePlugin = (blobs: Blobs["Service"]): AdmissionPlugin => {
  const check = (ref: ResourceRef, namespace: string | undefined, object: JsonObject) =>
    Effect.gen(function*() {
      const causes = yield* unreadableBlobs(blobs, namespace ?? "", [["spec.code.blob", codeBlobOf(object)]])
      if (causes.length > 0) return yield* invalid(subjectOf(ref, nameOf(object)), causes, ref.info.kind)
    })
  const pass = <A>(object: JsonObject) => ({
    input: object,
    finish: (result: A) => Effect.succeed({ result, ops: [] })
  })
  return {
    name: "functionCode",
    prepareCreate: ({ ref, namespace, object }) => Effect.as(check(ref, namespace, object), pass(object)),
    prepareUpdate: ({ ref, namespace, object, current }) =>
      codeBlobOf(object) === codeBlobOf(current as unknown as JsonObject)
        ? Effect.succeed(pass(object))
        : Effect.as(check(ref, namespace, object), pass(object))
  }
}

/**
 * A call of a map carries `mapLabel` with its mapId, so a map's calls are listed with `-l <group>/map=<mapId>`;
 * whatever the body says under that label is replaced.
 */
const withMapLabel = (group: string, object: JsonObject): JsonObject => {
  const mapId = specOf(object)["mapId"]
  if (typeof mapId !== "string") return object
  const metadata = isObject(object["metadata"]) ? object["metadata"] : {}
  const labels = isObject(metadata["labels"]) ? metadata["labels"] : {}
  return { ...object, metadata: { ...metadata, labels: { ...labels, [mapLabel(group)]: mapId } } }
}

/**
 * A FunctionCall's Function, timeout, Python minor and input blob (only at create: the rest of its spec is immutable).
 */
export const functionCallPlugin = (store: StoreShape, blobs: Blobs["Service"]): AdmissionPlugin => ({
  name: "functionCall",
  prepareCreate: ({ ref, namespace, object }) =>
    Effect.gen(function*() {
      const project = namespace ?? ""
      const subject = subjectOf(ref, nameOf(object))
      const spec = specOf(object)
      const functionName = String(spec["function"])
      const found = yield* store.get({ resource: "functions", namespace: project, name: functionName }).pipe(
        Effect.mapError((error) =>
          new ApiError({
            code: "Unavailable",
            message: `the store is unavailable: ${error.message}`,
            retryAfterSeconds: 1
          })
        )
      )
      if (Option.isNone(found) || found.value.metadata.deletionTimestamp !== undefined) {
        return yield* new ApiError({
          code: "FunctionNotFound",
          message: `Function "${functionName}" ${
            Option.isNone(found) ? "does not exist" : "is being deleted"
          } in project "${project}"`,
          causes: [
            fieldInvalid(
              "spec.function",
              `Not found: "${functionName}": no such Function in the project`,
              "FieldValueNotFound"
            )
          ],
          subject
        })
      }
      const target = specOf(found.value as unknown as JsonObject)
      const targetTimeout = typeof target["timeout"] === "string" ? target["timeout"] : Limits.functionTimeoutDefault
      const causes: Array<Cause> = []
      if (typeof spec["timeout"] === "string" && durationMs(spec["timeout"], 0) > durationMs(targetTimeout, 0)) {
        causes.push(
          fieldInvalid(
            "spec.timeout",
            `Invalid value: "${spec["timeout"]}": must be at most the Function's timeout (${targetTimeout})`
          )
        )
      }
      const annotations = isObject(object["metadata"]) && isObject(object["metadata"]["annotations"])
        ? object["metadata"]["annotations"]
        : {}
      const callerPython = annotations[pythonAnnotation(ref.group)]
      if (callerPython !== undefined && typeof target["python"] === "string" && callerPython !== target["python"]) {
        causes.push(
          fieldInvalid(
            `metadata.annotations[${pythonAnnotation(ref.group)}]`,
            `Invalid value: "${String(callerPython)}": Function "${functionName}" runs Python ${
              target["python"]
            }; call it from Python ${target["python"]} (pickled values do not cross minors)`
          )
        )
      }
      const method = methodProblem(target["code"], annotations[methodAnnotation(ref.group)], functionName)
      if (method !== undefined) {
        causes.push(fieldInvalid(`metadata.annotations[${methodAnnotation(ref.group)}]`, method))
      }
      const input = spec["input"]
      causes.push(
        ...yield* unreadableBlobs(blobs, project, [["spec.input.blob", isObject(input) ? input["blob"] : undefined]])
      )
      if (causes.length > 0) return yield* invalid(subject, causes, ref.info.kind)
      const defaulted = spec["timeout"] === undefined
        ? { ...object, spec: { ...spec, timeout: targetTimeout } }
        : object
      return { input: withMapLabel(ref.group, defaulted), finish: (result) => Effect.succeed({ result, ops: [] }) }
    })
})
