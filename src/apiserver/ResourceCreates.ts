/**
 * The creates of the resource API (Resources.ts): one object, or many of one kind in one commit (a FunctionCall map
 * batch), each admitted with the kind's schema, rules and admission plugins, made by the strategy and reviewed by the
 * kind (its estimate, price consent); a generated name that is taken is drawn again. Controllers decide creates here
 * and commit them with other writes (`decideCreate`).
 */
import { Effect, Option } from "effect"
import { isObject, type Json, type JsonObject } from "../core/Json.ts"
import { alreadyExists, ApiError, badRequest, subjectOf } from "../core/meta/ApiError.ts"
import { type ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import * as Strategy from "../core/meta/Strategy.ts"
import { type WriteOp } from "../store/Store.ts"
import { prepareAll, reviewAll } from "./AdmissionPlugins.ts"
import type { Principal } from "./Auth.ts"
import {
  type DecidedWrite,
  isNamespaceKind,
  keyOf,
  type Shared,
  stringAt,
  targetOf,
  withBoundAnnotation,
  type WriteOptions,
  type WriteResult
} from "./ResourceShared.ts"

/**
 * How often a create whose name comes from `generateName` is made again with a new suffix when the name it drew is
 * taken, as Kubernetes' API server retries it: five characters of 27 collide, among a few thousand objects of a kind,
 * often enough to fail a run of `.remote()` calls (seen once in 2,000 in bench:functions).
 */
export const generatedNameRetriesMax = 7

/** The creates, over the shared steps. */
export const makeCreates = (shared: Shared) => {
  const {
    ids,
    plugins,
    now,
    read,
    requireProject,
    commit,
    commitNamed,
    projectGuard,
    admitBody,
    authorize,
    checkTimeRules,
    checkServerRules
  } = shared

  /** Namespaces start Active; every other kind starts as admitted. */
  const initialStatus = (ref: ResourceRef, object: ResourceObject): ResourceObject =>
    isNamespaceKind(ref) ? { ...object, status: { phase: "Active" } } : object

  /** The kind's admission plugins before and after the strategy of a create (AdmissionPlugins.ts). */
  const prepareCreate = (
    ref: ResourceRef,
    namespace: string | undefined,
    object: JsonObject,
    principal: Principal | undefined
  ) =>
    prepareAll<ResourceObject, never>(
      plugins.of(ref),
      object,
      (plugin, input) => plugin.prepareCreate?.({ ref, namespace, object: input, principal })
    )

  /**
   * A create admitted and decided but not committed: the schema, the kind's rules and admission plugins, the strategy
   * and the kind's review. `create` commits one, `createMany` many in one commit.
   */
  const decideCreate = (ref: ResourceRef, namespace: string | undefined, body: unknown, options: WriteOptions) =>
    Effect.gen(function*() {
      const admitted = yield* admitBody(ref, body, options.fieldValidation, undefined)
      yield* authorize(options, admitted)
      yield* checkTimeRules(ref, admitted.object["spec"], undefined, stringAt(admitted.object, "metadata", "name"))
      yield* checkServerRules(ref, admitted.object["spec"], stringAt(admitted.object, "metadata", "name"))
      const prepared = yield* prepareCreate(
        ref,
        namespace,
        withBoundAnnotation(admitted.object, ref.group, undefined),
        options.principal
      )
      const made = Strategy.create(targetOf(ref, namespace), prepared.input, {
        now: yield* now,
        fieldManager: options.fieldManager,
        uid: ids.uid(),
        nameSuffix: ids.nameSuffix,
        ...(options.operation === undefined ? {} : { operation: options.operation }),
        ...(options.applied === undefined ? {} : { applied: options.applied })
      })
      const first = initialStatus(ref, yield* Effect.fromResult(made))
      const { result: admittedObject, ops, shownOnce } = yield* prepared.finish(
        options.status === undefined ? first : { ...first, status: options.status }
      )
      // The kind's review (spec: Create semantics — the estimate, price consent, a refusal the estimate foresees).
      const reviewed = yield* reviewAll(plugins.of(ref), {
        ref,
        namespace,
        object: admittedObject,
        dryRun: options.dryRun,
        ifMatch: options.ifMatch
      })
      const key = keyOf(ref, isNamespaceKind(ref) ? undefined : namespace, reviewed.object.metadata.name)
      return {
        object: reviewed.object,
        create: { _tag: "Create", key, object: reviewed.object } satisfies WriteOp,
        ops,
        shownOnce,
        warnings: admitted.warnings,
        etag: reviewed.etag
      }
    })

  /** The stored object as the create answers it: with what its plugins show once (a key's secret). */
  const shown = (stored: ResourceObject, shownOnce: JsonObject | undefined): ResourceObject =>
    shownOnce === undefined
      ? stored
      : { ...stored, status: { ...(isObject(stored.status) ? stored.status : {}), ...shownOnce } }

  /** A body that asks the server to name its object (`generateName` and no name): a taken name is drawn again. */
  const generatesName = (body: unknown): boolean =>
    isObject(body as Json) && stringAt(body as JsonObject, "metadata", "name") === undefined &&
    stringAt(body as JsonObject, "metadata", "generateName") !== undefined

  const retryGeneratedNames = <A>(
    bodies: ReadonlyArray<unknown>,
    once: Effect.Effect<A, ApiError>
  ): Effect.Effect<A, ApiError> =>
    bodies.every(generatesName)
      ? once.pipe(Effect.retry({ times: generatedNameRetriesMax, while: (error) => error.code === "AlreadyExists" }))
      : once

  const create = (ref: ResourceRef, namespace: string | undefined, body: unknown, options: WriteOptions) =>
    retryGeneratedNames([body], createOnce(ref, namespace, body, options))

  const createOnce = (ref: ResourceRef, namespace: string | undefined, body: unknown, options: WriteOptions) =>
    Effect.gen(function*() {
      if (ref.info.scope === "Namespaced" && namespace === undefined) {
        return yield* badRequest("a project (namespace) is required")
      }
      const decided = yield* decideCreate(ref, namespace, body, options)
      const { object, warnings } = decided
      if (options.dryRun) {
        if (namespace !== undefined && !isNamespaceKind(ref)) yield* requireProject(namespace)
        const existing = yield* read(decided.create.key)
        if (Option.isSome(existing)) return yield* alreadyExists(subjectOf(ref, object.metadata.name))
        return {
          object,
          warnings,
          created: true,
          ...(decided.etag === undefined ? {} : { etag: decided.etag })
        } satisfies WriteResult
      }
      const committed = yield* commit(ref, namespace, object.metadata.name, [
        decided.create,
        ...projectGuard(ref, namespace),
        ...decided.ops,
        ...(options.commitWith?.(warnings) ?? [])
      ])
      return { object: shown(committed.objects[0]!, decided.shownOnce), warnings, created: true } satisfies WriteResult
    })

  /**
   * Creates of many objects of one kind, all or nothing: each body is admitted as `create` admits one (a failure of
   * body i is `itemError(i, error)`, nothing is created), then all are committed in one store commit, the creates
   * first and in order (`commitWith` sees every warning; op 0 is the first create). For FunctionCall map batches
   * (kinds/function/http/FunctionMap.ts).
   */
  const createMany = (
    ref: ResourceRef,
    namespace: string | undefined,
    bodies: ReadonlyArray<unknown>,
    options: WriteOptions,
    itemError: (index: number, error: ApiError) => ApiError = (_, error) => error
  ) => retryGeneratedNames(bodies, createManyOnce(ref, namespace, bodies, options, itemError))

  const createManyOnce = (
    ref: ResourceRef,
    namespace: string | undefined,
    bodies: ReadonlyArray<unknown>,
    options: WriteOptions,
    itemError: (index: number, error: ApiError) => ApiError
  ) =>
    Effect.gen(function*() {
      if (ref.info.scope === "Namespaced" && namespace === undefined) {
        return yield* badRequest("a project (namespace) is required")
      }
      const decided = yield* Effect.forEach(bodies, (body, index) =>
        Effect.mapError(decideCreate(ref, namespace, body, options), (error) => itemError(index, error)))
      const warnings = [
        ...new Set(decided.flatMap((one) =>
          one.warnings
        ))
      ]
      if (options.dryRun) {
        if (namespace !== undefined && !isNamespaceKind(ref)) yield* requireProject(namespace)
        return decided.map(({ object }) => ({ object, warnings, created: true }) satisfies WriteResult)
      }
      const creates = decided.map((one) => one.create)
      const committed = yield* commitNamed(ref, namespace, (index) =>
        creates[index]?.object.metadata.name ?? creates[0]?.object.metadata.name ?? "", [
        ...creates,
        ...projectGuard(ref, namespace),
        ...decided.flatMap((one) =>
          one.ops
        ),
        ...(options.commitWith?.(warnings) ?? [])
      ])
      return decided.map((one, index) =>
        ({ object: shown(committed.objects[index]!, one.shownOnce), warnings, created: true }) satisfies WriteResult
      )
    })

  return {
    create,
    createMany,
    decideCreate: (ref: ResourceRef, namespace: string | undefined, body: unknown, options: WriteOptions) =>
      Effect.map(decideCreate(ref, namespace, body, options), (decided) =>
        ({
          ref,
          namespace,
          name: decided.object.metadata.name,
          ops: [decided.create, ...projectGuard(ref, namespace), ...decided.ops],
          object: decided.object
        }) satisfies DecidedWrite)
  }
}
