/**
 * The admission plugins the runtime registers with the API server (src/apiserver/AdmissionPlugins.ts):
 *
 * - `secretValues` (Secret): a Secret's values leave the object for a sealed version record committed beside it, and
 *   go with its removal (spec: Secret is addressed by name and version); they never stay in its metadata either.
 * - `secretReferences` (every other project kind): no secret value literally in env (SecretValueInEnv, told as the
 *   writing principal may be told), and secret mounts pin their versions at create (spec: SecretMount); a Sandbox's
 *   are found again at each write, for its next start to pin (spec: Sandbox secrets).
 * - `pricing` (every nodus kind; kinds without an estimate pass through): the estimate on dry runs and creates, the
 *   price consent of a create bound by a dry run's ETag, and the refusal the estimate foresees (spec: Create
 *   semantics 1-3), which a Budget that refused reports as budget.exceeded.
 * - `enrollmentToken` (EnrollmentToken): its token, shown once in the create response, kept as a hash (Enrollment.ts).
 * - `webhookSecret` (WebhookEndpoint): its signing secret, shown once, kept sealed, and its ping (WebhookSecrets.ts).
 * - `functionCode` (Function) and `functionCall` (FunctionCall): blob references the project may read, the call's
 *   Function, timeout and Python minor (FunctionAdmission.ts).
 * - `resourceFit` (project kinds): no cpu, memory or disk floor that no offering could ever hold (ResourceFit.ts).
 */
import { Effect, Layer, Option } from "effect"
import { type AdmissionPlugin, AdmissionPlugins, type UpdateRequest } from "../apiserver/AdmissionPlugins.ts"
import { Blobs } from "../apiserver/Blobs.ts"
import { withPriceBoundAnnotation } from "../core/billing/PriceBound.ts"
import type { Offering } from "../core/capacity/Offering.ts"
import { isObject, type JsonObject } from "../core/Json.ts"
import { invalid, subjectOf } from "../core/meta/ApiError.ts"
import type { ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import type { Disposition } from "../core/meta/Strategy.ts"
import { loadCatalog } from "../data/CatalogData.ts"
import { secretVersionsKey } from "../kinds/sandbox/SandboxMachine.ts"
import { Store } from "../store/Store.ts"
import { BudgetService } from "./Budgets.ts"
import { enrollmentTokenPlugin } from "./Enrollment.ts"
import { Estimates, quotedRateOf, refusalOf, withEstimate } from "./Estimates.ts"
import { EventOutbox } from "./EventOutbox.ts"
import { functionCallPlugin, functionCodePlugin } from "./FunctionAdmission.ts"
import { LiveMarket } from "./LiveMarket.ts"
import { consentOf, PriceConsent } from "./PriceConsent.ts"
import { resourceFitPlugin } from "./ResourceFit.ts"
import { SecretCipher } from "./SecretCipher.ts"
import { scrubLastApplied, Secrets, splitData, valuesInMetadata } from "./Secrets.ts"
import { webhookEndpointPlugin } from "./WebhookSecrets.ts"

const nameOf = (object: JsonObject): string | undefined => {
  const metadata = object["metadata"]
  return isObject(metadata) && typeof metadata["name"] === "string" ? metadata["name"] : undefined
}

const withStatus = (object: ResourceObject, fields: JsonObject): ResourceObject => ({
  ...object,
  status: { ...(isObject(object.status) ? object.status : {}), ...fields }
})

/**
 * A Secret write's body without its values: `data` leaves for `finish`, kubectl's last-applied annotation keeps only
 * the manifest's identity, metadata and type, and a label or annotation holding one of the values is refused
 * (Secrets.ts; docs/secrets.md).
 */
const withoutValues = (ref: ResourceRef, object: JsonObject, name: string | undefined) => {
  const { body, data } = splitData(object)
  const scrubbed = scrubLastApplied(body)
  const leaks = data === undefined ? [] : valuesInMetadata(scrubbed, data)
  return leaks.length > 0
    ? Effect.fail(invalid(subjectOf(ref, name), leaks, ref.info.kind))
    : Effect.succeed({ body: scrubbed, data })
}

const secretValues = (secrets: Secrets["Service"]): AdmissionPlugin => ({
  name: "secretValues",
  prepareCreate: ({ ref, object }) =>
    Effect.map(withoutValues(ref, object, nameOf(object)), ({ body, data }) => ({
      input: body,
      finish: (made: ResourceObject) =>
        Effect.map(secrets.prepareWrite(made, data, undefined), ({ object: result, ops }) => ({ result, ops }))
    })),
  prepareUpdate: ({ ref, object, current }) =>
    Effect.map(withoutValues(ref, object, current.metadata.name), ({ body, data }) => ({
      input: body,
      finish: (disposition: Disposition) => {
        if (disposition._tag === "Remove") {
          return Effect.succeed({ result: disposition, ops: secrets.deleteOps(current) })
        }
        return Effect.map(
          secrets.prepareWrite(disposition.object, data, current),
          ({ object: result, ops }) => ({
            result: ops.length === 0 ? disposition : { _tag: "Write", object: result } as const,
            ops
          })
        )
      }
    })),
  removeOps: (current) => secrets.deleteOps(current)
})

/** Whether `ref` is the nodus kind `kind` (never one of the core group's Namespaces and Events). */
const isKind = (ref: ResourceRef, kind: string): boolean => ref.group !== "" && ref.info.kind === kind

/**
 * A Sandbox's body with its server-owned `secret-versions` annotation set to `pins` (removed when there are none):
 * whatever a client sent there is replaced, so only admission decides what a start pins.
 */
const withSecretVersions = (ref: ResourceRef, object: JsonObject, pins: string | undefined): JsonObject => {
  const metadata = isObject(object["metadata"]) ? object["metadata"] : {}
  const key = `${ref.group}/${secretVersionsKey}`
  const { [key]: _sent, ...annotations } = isObject(metadata["annotations"]) ? metadata["annotations"] : {}
  const next = pins === undefined ? annotations : { ...annotations, [key]: pins }
  return { ...object, metadata: { ...metadata, annotations: next } }
}

const pinsText = (pinned: Record<string, number>): string | undefined =>
  Object.keys(pinned).length === 0 ? undefined : JSON.stringify(pinned)

/**
 * Spec (Sandbox secrets): "each start pins the newest version or the version named, so a new value reaches the Sandbox
 * at its next start". Every write of a Sandbox finds its mounts' versions again and keeps them in the annotation, which
 * the machine pins into status.secretVersions when it next starts a box (SandboxMachine.ts `launch`). A write whose
 * Secrets cannot all be found is not refused for it (it may be the stop of a Sandbox whose Secret was deleted): the
 * pins it had stay, and a start that cannot resolve them fails its setup (StartupFailed).
 */
const repinSandbox = (secrets: Secrets["Service"], request: UpdateRequest): Effect.Effect<JsonObject> => {
  const { ref, namespace, current, object } = request
  const kept = current.metadata.annotations?.[`${ref.group}/${secretVersionsKey}`]
  return Effect.map(
    Effect.option(
      secrets.pinVersions(namespace ?? "", object["spec"], subjectOf(ref, current.metadata.name), ref.info.kind)
    ),
    (found) => withSecretVersions(ref, object, Option.isSome(found) ? pinsText(found.value) : kept)
  )
}

const secretReferences = (secrets: Secrets["Service"]): AdmissionPlugin => ({
  name: "secretReferences",
  prepareCreate: ({ ref, namespace, object, principal }) =>
    Effect.gen(function*() {
      const subject = subjectOf(ref, nameOf(object))
      yield* secrets.checkEnv(namespace ?? "", object["spec"], subject, principal)
      const pinned = yield* secrets.pinVersions(namespace ?? "", object["spec"], subject, ref.info.kind)
      return {
        input: isKind(ref, "Sandbox") ? withSecretVersions(ref, object, pinsText(pinned)) : object,
        finish: (made: ResourceObject) =>
          Effect.succeed({
            result: Object.keys(pinned).length === 0 ? made : withStatus(made, { secretVersions: pinned }),
            ops: []
          })
      }
    }),
  prepareUpdate: (request) =>
    Effect.gen(function*() {
      const { ref, namespace, current, object, principal } = request
      yield* secrets.checkEnv(namespace ?? "", object["spec"], subjectOf(ref, current.metadata.name), principal)
      return {
        input: isKind(ref, "Sandbox") ? yield* repinSandbox(secrets, request) : object,
        finish: (result: Disposition) => Effect.succeed({ result, ops: [] })
      }
    })
})

const pricing = (
  estimates: Estimates["Service"],
  priceConsent: PriceConsent["Service"],
  budgets: Option.Option<BudgetService["Service"]>
): AdmissionPlugin => ({
  name: "pricing",
  review: ({ ref, namespace, object: made, dryRun, ifMatch }) =>
    Effect.gen(function*() {
      // Spec: Create semantics 1 and 3 — dry runs and real creates carry the estimate.
      const estimated = yield* estimates.estimate(ref, made)
      const object = withEstimate(made, estimated)
      // Spec: Create semantics 1 — If-Match on a create names a dry run of exactly this object, and quotes its price.
      const quote = ifMatch === undefined ? undefined : yield* priceConsent.verify(ifMatch, object)
      if (dryRun) return { object, etag: priceConsent.quote(object, quotedRateOf(estimated)) }
      // Spec: Create semantics 3 — a create the estimate says would fail is refused with its code, amounts and fix.
      const refusal = refusalOf(estimated)
      if (refusal !== undefined) {
        if (Option.isSome(budgets) && Option.isSome(estimated)) {
          const refused = { kind: ref.info.kind, namespace, name: object.metadata.name }
          for (const reason of estimated.value.blocking) {
            if (reason.budget !== undefined) yield* budgets.value.refused(reason.budget, refused, reason.message)
          }
        }
        return yield* refusal
      }
      // Spec: Create semantics 2 — a bound create is admitted after validUntil too, but never above the quote + 10 %.
      const consent = quote === undefined
        ? undefined
        : consentOf(quote, quotedRateOf(estimated).rateMicro, subjectOf(ref, object.metadata.name))
      if (consent?.refusal !== undefined) return yield* consent.refusal
      if (consent?.bound === undefined) return { object }
      return {
        object: {
          ...object,
          metadata: {
            ...object.metadata,
            annotations: withPriceBoundAnnotation(object.metadata.annotations, ref.group, consent.bound)
          }
        }
      }
    })
})

/** The plugins of every kind: the Secret's own, the secret references of project kinds, and pricing. */
export const layer = Layer.effect(
  AdmissionPlugins,
  Effect.gen(function*() {
    const secrets = yield* Secrets
    const estimates = yield* Estimates
    const priceConsent = yield* PriceConsent
    const budgets = yield* Effect.serviceOption(BudgetService)
    const values = secretValues(secrets)
    const references = secretReferences(secrets)
    const priced = pricing(estimates, priceConsent, budgets)
    // The offerings the estimates read: the backend's (live hosts' Nodes), else the catalog's.
    const live = yield* Effect.serviceOption(LiveMarket)
    let catalog: ReadonlyArray<Offering> | undefined
    const fit = resourceFitPlugin((namespace) => {
      const nodes = Option.isSome(live) ? live.value.catalogNow(namespace) : undefined
      return nodes === undefined
        ? { offerings: (catalog ??= loadCatalog()), joinable: false }
        : { offerings: nodes, joinable: true }
    })
    const secretPlugins = [values, priced]
    const projectPlugins = [fit, references, priced]
    const otherPlugins = [priced]
    const enrollmentPlugins = [enrollmentTokenPlugin]
    const webhookPlugins = [webhookEndpointPlugin(yield* SecretCipher, yield* EventOutbox)]
    const blobs = yield* Blobs
    const functionPlugins = [fit, references, functionCodePlugin(blobs), priced]
    const functionCallPlugins = [references, functionCallPlugin(yield* Store, blobs), priced]
    return AdmissionPlugins.of({
      of: (ref) =>
        isKind(ref, "Secret") ?
          secretPlugins
          : isKind(ref, "EnrollmentToken") ?
          enrollmentPlugins
          : isKind(ref, "WebhookEndpoint") ?
          webhookPlugins
          : isKind(ref, "Function") ?
          functionPlugins
          : isKind(ref, "FunctionCall") ?
          functionCallPlugins
          : ref.info.scope === "Namespaced" && ref.group !== "" ?
          projectPlugins
          : otherPlugins
    })
  })
).pipe(Layer.provide(PriceConsent.layer))
