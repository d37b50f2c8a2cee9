/**
 * The updates of the resource API (Resources.ts): replace (PUT), patch (merge, JSON, server-side apply) and the status
 * subresource, each through the kind's rules for changes after create and its admission plugins, then the strategy;
 * status writes of many objects in one commit (`replaceStatusMany`, `decideStatus`). A patch without a pinned
 * resourceVersion is retried on Conflict, as Kubernetes' GuaranteedUpdate does.
 */
import { Effect, Option } from "effect"
import { priceBoundAnnotation } from "../core/billing/PriceBound.ts"
import { isObject, type Json, type JsonObject } from "../core/Json.ts"
import { ApiError, badRequest, conflict, fieldInvalid, invalid, subjectOf } from "../core/meta/ApiError.ts"
import * as JsonPatch from "../core/meta/JsonPatch.ts"
import { type ResourceRef } from "../core/meta/Kinds.ts"
import * as MergePatch from "../core/meta/MergePatch.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import * as ServerSideApply from "../core/meta/ServerSideApply.ts"
import * as Strategy from "../core/meta/Strategy.ts"
import { checkUpdate } from "../core/schemas/Kind.ts"
import { definitionOf } from "../kinds/Kinds.ts"
import { type WriteOp } from "../store/Store.ts"
import { prepareAll } from "./AdmissionPlugins.ts"
import type { Principal } from "./Auth.ts"
import {
  type DecidedWrite,
  keyOf,
  patchConflictRetriesMax,
  type Shared,
  targetOf,
  withBoundAnnotation,
  type WriteOptions,
  type WriteResult
} from "./ResourceShared.ts"

export type PatchType = "merge" | "json" | "apply"

/** The updates, over the shared steps; an apply to a missing object is a `create`. */
export const makeUpdates = (
  shared: Shared,
  create: (
    ref: ResourceRef,
    namespace: string | undefined,
    body: unknown,
    options: WriteOptions
  ) => Effect.Effect<WriteResult, ApiError>
) => {
  const {
    plugins,
    now,
    read,
    readExisting,
    admitBody,
    authorize,
    checkIfMatch,
    checkTimeRules,
    checkServerRules,
    writeDisposition,
    commitDecided
  } = shared

  /** The kind's rules for changes after create (spec: FieldImmutable; maxCostUSD can only be raised). */
  const checkUpdateRules = (ref: ResourceRef, current: ResourceObject, disposition: Strategy.Disposition) => {
    if (disposition._tag !== "Write") return Effect.void
    const broken = checkUpdate(definitionOf(ref.info.kind), current.spec, disposition.object.spec)
    const subject = subjectOf(ref, current.metadata.name)
    if (broken.immutable.length > 0) {
      const fields = broken.immutable.map((cause) => `${cause.field}: ${cause.message}`).join(", ")
      return Effect.fail(
        new ApiError({
          code: "FieldImmutable",
          message: `${ref.info.kind}.${ref.group} "${current.metadata.name}" is invalid: ${fields}`,
          causes: broken.immutable,
          subject,
          fix:
            `Only the fields ${ref.info.kind} lists as mutable can change after create; delete and re-create the object to change ${
              broken.immutable.map((cause) => cause.field).join(", ")
            }.`
        })
      )
    }
    return broken.invalid.length > 0 ? Effect.fail(invalid(subject, broken.invalid, ref.info.kind)) : Effect.void
  }

  const prepareUpdate = (
    ref: ResourceRef,
    namespace: string | undefined,
    current: ResourceObject,
    object: JsonObject,
    principal: Principal | undefined
  ) =>
    prepareAll<Strategy.Disposition, never>(
      plugins.of(ref),
      object,
      (plugin, input) => plugin.prepareUpdate?.({ ref, namespace, current, object: input, principal })
    )

  /**
   * The write of an update decided: the kind's store-reading admission, the strategy, the kind's update rules (main
   * resource only), then the commit. Shared by replace, patch and apply.
   */
  const writeUpdate = (
    ref: ResourceRef,
    namespace: string | undefined,
    current: ResourceObject,
    object: JsonObject,
    options: WriteOptions,
    write: { readonly expectedRv: string; readonly subresource?: "status"; readonly applied?: JsonObject }
  ) =>
    Effect.gen(function*() {
      const context = { now: yield* now, fieldManager: options.fieldManager }
      const target = targetOf(ref, namespace)
      if (write.subresource === "status") {
        const disposition = yield* Effect.fromResult(Strategy.updateStatus(target, current, object, context))
        return yield* writeDisposition(ref, namespace, current, disposition, write.expectedRv, {
          dryRun: options.dryRun,
          extraOps: options.commitWith?.([]) ?? []
        })
      }
      yield* checkTimeRules(ref, object["spec"], current.spec, current.metadata.name)
      yield* checkServerRules(ref, object["spec"], current.metadata.name)
      const prepared = yield* prepareUpdate(
        ref,
        namespace,
        current,
        withBoundAnnotation(object, ref.group, current.metadata.annotations?.[priceBoundAnnotation(ref.group)]),
        options.principal
      )
      const decided = yield* Effect.fromResult(
        Strategy.update(
          target,
          current,
          prepared.input,
          context,
          write.applied === undefined ? { operation: "Update" } : { operation: "Apply", applied: write.applied }
        )
      )
      yield* checkUpdateRules(ref, current, decided)
      const { result: disposition, ops } = yield* prepared.finish(decided)
      return yield* writeDisposition(ref, namespace, current, disposition, write.expectedRv, {
        dryRun: options.dryRun,
        extraOps: [...ops, ...(options.commitWith?.([]) ?? [])]
      })
    })

  const replace = (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions,
    subresource?: "status"
  ) =>
    Effect.gen(function*() {
      const admitted = yield* admitBody(
        ref,
        body,
        options.fieldValidation,
        name,
        subresource === "status" ? "status" : "object"
      )
      yield* authorize(options, admitted)
      const metadata = admitted.object["metadata"]
      const expectedRv = isObject(metadata) && typeof metadata["resourceVersion"] === "string"
        ? metadata["resourceVersion"]
        : undefined
      if (expectedRv === undefined || expectedRv === "") {
        return yield* invalid(subjectOf(ref, name), [
          fieldInvalid("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")
        ], ref.info.kind)
      }
      const current = yield* readExisting(ref, namespace, name)
      yield* checkIfMatch(options.ifMatch, current)
      if (current.metadata.resourceVersion !== expectedRv) {
        return yield* conflict(
          subjectOf(ref, name),
          "the object has been modified; please apply your changes to the latest version and try again"
        )
      }
      const object = yield* writeUpdate(ref, namespace, current, admitted.object, options, {
        expectedRv,
        ...(subresource === undefined ? {} : { subresource })
      })
      return { object, warnings: admitted.warnings, created: false } satisfies WriteResult
    })

  const decideStatus = (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions
  ) =>
    Effect.gen(function*() {
      const admitted = yield* admitBody(ref, body, options.fieldValidation, name, "status")
      yield* authorize(options, admitted)
      const metadata = admitted.object["metadata"]
      const expectedRv = isObject(metadata) && typeof metadata["resourceVersion"] === "string"
        ? metadata["resourceVersion"]
        : ""
      const current = yield* readExisting(ref, namespace, name)
      if (current.metadata.resourceVersion !== expectedRv) {
        return yield* conflict(
          subjectOf(ref, name),
          "the object has been modified; please apply your changes to the latest version and try again"
        )
      }
      const disposition = yield* Effect.fromResult(
        Strategy.updateStatus(targetOf(ref, namespace), current, admitted.object, {
          now: yield* now,
          fieldManager: options.fieldManager
        })
      )
      const ops: ReadonlyArray<WriteOp> = disposition._tag === "Write"
        ? [{
          _tag: "Update",
          key: keyOf(ref, namespace, name),
          object: disposition.object,
          previous: current,
          expectedRv
        }]
        : []
      return {
        ref,
        namespace,
        name,
        ops,
        object: ops.length === 0 ? current : disposition.object
      } satisfies DecidedWrite
    })

  const replaceStatusMany = (
    ref: ResourceRef,
    namespace: string | undefined,
    items: ReadonlyArray<{ readonly name: string; readonly body: unknown }>,
    options: WriteOptions
  ) =>
    Effect.gen(function*() {
      const decided = yield* Effect.forEach(
        items,
        ({ name, body }) => decideStatus(ref, namespace, name, body, options)
      )
      const objects = options.dryRun
        ? decided.map((write) => write.object)
        : yield* commitDecided(decided, options.commitWith?.([]) ?? [])
      return objects.map((object) => ({ object, warnings: [], created: false }) satisfies WriteResult)
    })

  const applyPatch = (
    ref: ResourceRef,
    current: ResourceObject,
    patchType: Exclude<PatchType, "apply">,
    patch: unknown
  ): Effect.Effect<Json, ApiError> => {
    if (patchType === "merge") {
      if (!isObject(patch as Json)) return Effect.fail(badRequest("a merge patch must be a JSON object"))
      return Effect.succeed(MergePatch.apply(Strategy.asJson(current), patch as Json))
    }
    const decoded = JsonPatch.decode(patch)
    if (decoded._tag === "Err") return Effect.fail(badRequest(`invalid JSON patch: ${decoded.error.message}`))
    const applied = JsonPatch.apply(Strategy.asJson(current), decoded.operations)
    if (applied._tag === "Err") {
      return Effect.fail(
        invalid(subjectOf(ref, current.metadata.name), [
          fieldInvalid(
            applied.error.path,
            `JSON patch operation ${applied.error.index} failed: ${applied.error.message}`
          )
        ], ref.info.kind)
      )
    }
    return Effect.succeed(applied.value)
  }

  /** The resourceVersion a patch body pins, if any (then the patch is a compare-and-swap, not retried). */
  const pinnedVersion = (patched: Json, current: ResourceObject): string | undefined => {
    const metadata = isObject(patched) ? patched["metadata"] : undefined
    const version = isObject(metadata) ? metadata["resourceVersion"] : undefined
    return typeof version === "string" && version !== current.metadata.resourceVersion ? version : undefined
  }

  const patchOnce = (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    patchType: Exclude<PatchType, "apply">,
    patch: unknown,
    options: WriteOptions,
    subresource: "status" | undefined
  ) =>
    Effect.gen(function*() {
      const current = yield* readExisting(ref, namespace, name)
      yield* checkIfMatch(options.ifMatch, current)
      const patched = yield* applyPatch(ref, current, patchType, patch)
      if (pinnedVersion(patched, current) !== undefined) {
        return yield* conflict(
          subjectOf(ref, name),
          "the object has been modified; please apply your changes to the latest version and try again"
        )
      }
      const admitted = yield* admitBody(
        ref,
        patched,
        options.fieldValidation,
        name,
        subresource === "status" ? "status" : "object"
      )
      yield* authorize(options, admitted)
      const object = yield* writeUpdate(ref, namespace, current, admitted.object, options, {
        expectedRv: current.metadata.resourceVersion,
        ...(subresource === undefined ? {} : { subresource })
      })
      return { object, warnings: admitted.warnings, created: false } satisfies WriteResult
    })

  const applyOnce = (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    configuration: unknown,
    options: WriteOptions
  ) =>
    Effect.gen(function*() {
      const admittedConfiguration = yield* admitBody(ref, configuration, options.fieldValidation, name, "apply")
      const configured = admittedConfiguration.object["metadata"]
      const configuredName = isObject(configured) ? configured["name"] : undefined
      if (typeof configuredName === "string" && configuredName !== "" && configuredName !== name) {
        return yield* badRequest(
          `the name of the object (${configuredName}) does not match the name on the URL (${name})`
        )
      }
      const found = yield* read(keyOf(ref, namespace, name))
      if (Option.isNone(found)) {
        const named = ServerSideApply.withName(admittedConfiguration.object, name)
        const result = yield* create(ref, namespace, named, {
          ...options,
          fieldValidation: "Ignore",
          operation: "Apply",
          applied: named
        })
        return { ...result, warnings: admittedConfiguration.warnings }
      }
      const current = found.value
      yield* checkIfMatch(options.ifMatch, current)
      const merged = ServerSideApply.apply(current, admittedConfiguration.object, options.fieldManager)
      const admitted = yield* admitBody(ref, merged, "Ignore", name)
      yield* authorize(options, admitted)
      const object = yield* writeUpdate(ref, namespace, current, admitted.object, options, {
        expectedRv: current.metadata.resourceVersion,
        applied: admittedConfiguration.object
      })
      return { object, warnings: admittedConfiguration.warnings, created: false } satisfies WriteResult
    })

  /**
   * Patches retry on Conflict like Kubernetes' GuaranteedUpdate: the patch is re-applied to the newer object. A patch
   * that pins `metadata.resourceVersion` is a compare-and-swap and is not retried.
   */
  const patch = (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    patchType: PatchType,
    body: unknown,
    options: WriteOptions,
    subresource?: "status"
  ) => {
    const once: Effect.Effect<WriteResult, ApiError> = patchType === "apply"
      ? applyOnce(ref, namespace, name, body, options)
      : patchOnce(ref, namespace, name, patchType, body, options, subresource)
    const metadata = isObject(body as Json) ? (body as JsonObject)["metadata"] : undefined
    const pinned = isObject(metadata) && typeof metadata["resourceVersion"] === "string"
    return pinned
      ? once
      : once.pipe(Effect.retry({ times: patchConflictRetriesMax, while: (error) => error.code === "Conflict" }))
  }

  return { replace, patch, decideStatus, replaceStatusMany }
}
