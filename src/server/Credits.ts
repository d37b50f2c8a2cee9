/**
 * Credits arrive (docs/billing.md, "Credits"; spec: Accounts and billing — CreditGrant, TopUp; events topup.succeeded,
 * topup.failed, topup.refunded). One source of truth, the ledger; the objects show it:
 *
 * - **TopUps** are processed level-triggered, like a Kubernetes controller: at start and on every change, a TopUp not
 *   yet final is charged through the payment port (keyed by its uid), its credits are granted in the ledger under
 *   `topup/<uid>` (so a replay or a restart never grants twice), and its status and event follow. A create also runs
 *   that step before it answers, so credits are there when the client gets its 201.
 * - **CreditGrants** show the ledger's Grant postings: one object per grant (`starter`, `topup-<name>`, the operator's),
 *   with `status.remainingUSD` attributed by core/Credits.ts and refreshed as the ledger moves. The operator's grant is
 *   the one object that comes first: its create (admin only, src/server/http/Api.ts) is the intent, and its posting
 *   `grant/<uid>` follows, retried here until it exists.
 * - **Refunds** are an operator's operation on a Succeeded TopUp: the processor refunds (keyed), the ledger takes the
 *   credits back under `refund/<uid>`, and the TopUp ends Refunded. A crash between the two is finished at start.
 *
 * Every step runs under one lock: payments are few, and a TopUp is then never charged or announced twice at once.
 */
import { Clock, Context, Effect, Layer, Result, Schema, Semaphore } from "effect"
import { ApiError, fieldInvalid, invalid } from "../core/ApiError.ts"
import { CreditLots, type GrantLot, phaseOf } from "../core/Credits.ts"
import { isObject, type Json, type JsonObject } from "../core/Json.ts"
import { apiVersionOf, byResource, type KindInfo } from "../core/Kinds.ts"
import type { Ledger } from "../core/Ledger.ts"
import * as Limits from "../core/Limits.ts"
import { formatMicroUsd, parseMicroUsd } from "../core/Money.ts"
import type { ResourceObject } from "../core/ObjectMeta.ts"
import { CreditGrantSpec } from "../core/schemas/CreditGrant.ts"
import { TopUpSpec } from "../core/schemas/TopUp.ts"
import { timestamp } from "../core/Strategy.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import type { Change } from "../store/Store.ts"
import { EventStream } from "./EventStream.ts"
import { followStore, surviving } from "./Following.ts"
import { ApiConfig } from "./http/Api.ts"
import { LedgerService } from "./LedgerService.ts"
import { notConfigured, Payments } from "./Payments.ts"
import { type ResourceRef, Resources, type WriteOptions } from "./Resources.ts"

/** The field manager of this module's writes. */
export const creditsComponent = "nodus-credits"

/** The CreditGrant that shows the starter credits: the source LedgerService grants them with. */
export const starterGrantName = "starter"

/** Names the operator's grants may not take: the service names its own grants so. */
const reservedGrantPrefix = "topup-"

export const topUpKey = (uid: string): string => `topup/${uid}`
export const refundKey = (uid: string): string => `refund/${uid}`
export const adminGrantKey = (uid: string): string => `grant/${uid}`

/** The CreditGrant of a TopUp: `topup-<name>`, or `topup-<uid>` where that name would be too long. */
export const topUpGrantName = (topUp: ResourceObject): string => {
  const name = `${reservedGrantPrefix}${topUp.metadata.name}`
  return name.length <= 253 ? name : `${reservedGrantPrefix}${topUp.metadata.uid}`
}

/** Real time between two refreshes of CreditGrant statuses from the ledger (and retries of failed steps). */
export const refreshInterval = "1 second"

/** Status writes retried when another writer got there first. */
const conflictRetries = 5

const writeOptions: WriteOptions = { dryRun: false, fieldValidation: "Ignore", fieldManager: creditsComponent }

/** Steps a create of a credits kind takes around the generic create (src/server/http/Api.ts). */
export interface CreateHooks {
  /** Before the create (dry runs too): refuses what the kind's rules refuse; answers the body to create. */
  readonly admit: (body: unknown) => Effect.Effect<unknown, ApiError>
  /** After a real create: the processing, answering the object as it then stands (failures are retried later). */
  readonly settle: (object: ResourceObject) => Effect.Effect<ResourceObject>
}

export interface CreditsShape {
  /** The hooks of creates of `plural` (topups, creditgrants), if it has any. */
  readonly createHooks: (plural: string) => CreateHooks | undefined
  /** Refunds a Succeeded TopUp (an operator's operation); a Refunded one is answered as it is. */
  readonly refund: (name: string) => Effect.Effect<ResourceObject, ApiError>
}

export class Credits extends Context.Service<Credits, CreditsShape>()("nodus/server/Credits") {
  static readonly layer = Layer.effect(Credits, make())
}

type TopUpPhase = "Pending" | "Succeeded" | "Failed" | "Refunded"

const statusOf = (object: ResourceObject): JsonObject => (isObject(object.status) ? object.status : {})

const specOf = (value: unknown): JsonObject => {
  const spec = isObject(value as Json) ? (value as JsonObject)["spec"] : undefined
  return isObject(spec) ? spec : {}
}

const phaseOfTopUp = (topUp: ResourceObject): TopUpPhase => {
  const phase = statusOf(topUp)["phase"]
  return phase === "Succeeded" || phase === "Failed" || phase === "Refunded" ? phase : "Pending"
}

/** A USD amount of a spec, or undefined when it is none (the kind's schema reports that). */
const microOf = (value: Json | undefined): bigint | undefined => {
  if (typeof value !== "string") return undefined
  try {
    return parseMicroUsd(value)
  } catch {
    return undefined
  }
}

const isTopUpSpec = Schema.is(TopUpSpec)
const isCreditGrantSpec = Schema.is(CreditGrantSpec)

const nameOf = (body: unknown): string | undefined => {
  const metadata = isObject(body as Json) ? (body as JsonObject)["metadata"] : undefined
  return isObject(metadata) && typeof metadata["name"] === "string" ? metadata["name"] : undefined
}

const condition = (type: string, status: "True" | "False", reason: string, message: string, at: number) =>
  ({ type, status, reason, message, lastTransitionTime: timestamp(at) })

function make() {
  return Effect.gen(function*() {
    const resources = yield* Resources
    const feed = yield* ChangeFeed
    const ledger = yield* LedgerService
    const payments = yield* Payments
    const stream = yield* EventStream
    const { group } = yield* ApiConfig
    const refOf = (info: KindInfo): ResourceRef => ({ info, group, apiVersion: apiVersionOf(group, info) })
    const topUps = refOf(byResource("v1", "topups")!)
    const grants = refOf(byResource("v1", "creditgrants")!)
    const lock = Semaphore.makeUnsafe(1)
    const locked = <A, E>(effect: Effect.Effect<A, E>) => lock.withPermit(effect)

    // -----------------------------------------------------------------------------------------------------------------
    // Writing

    const read = (ref: ResourceRef, name: string) =>
      Effect.map(Effect.result(resources.get(ref, undefined, name)), (found) => (Result.isSuccess(found) ? found.success : undefined))

    /** Replaces the status with what `next` makes of the stored object (undefined: leave it), retried on Conflict. */
    const writeStatus = (ref: ResourceRef, name: string, next: (current: ResourceObject) => JsonObject | undefined) =>
      Effect.gen(function*() {
        const current = yield* resources.get(ref, undefined, name)
        const status = next(current)
        if (status === undefined) return { object: current, written: false }
        const metadata = { name, uid: current.metadata.uid, resourceVersion: current.metadata.resourceVersion }
        const replaced = yield* resources.replace(ref, undefined, name, { apiVersion: ref.apiVersion, kind: ref.info.kind, metadata, status }, writeOptions, "status")
        return { object: replaced.object, written: true }
      }).pipe(Effect.retry({ times: conflictRetries, while: (error) => error.code === "Conflict" }))

    /** A delivery-shaped event about a TopUp (spec: Delivery; a cluster-scoped object has no namespace). */
    const announce = (topUp: ResourceObject, reason: "Succeeded" | "Failed" | "Refunded", message: string, at: number) =>
      stream.publish({
        type: `topup.${reason.toLowerCase()}`,
        timestamp: new Date(at).toISOString(),
        data: {
          event: { reason, message, count: 1 },
          object: {
            apiVersion: topUps.apiVersion,
            kind: topUps.info.kind,
            metadata: { name: topUp.metadata.name, uid: topUp.metadata.uid },
            status: statusOf(topUp)
          }
        }
      })

    /** Moves a TopUp to a final phase once, and announces it when this call made the move. */
    const conclude = (topUp: ResourceObject, reason: "Succeeded" | "Failed" | "Refunded", message: string, at: number, fields: (current: JsonObject) => JsonObject) =>
      Effect.gen(function*() {
        const { object, written } = yield* writeStatus(topUps, topUp.metadata.name, (current) =>
          current.metadata.uid !== topUp.metadata.uid || phaseOfTopUp(current) === reason ? undefined : { ...statusOf(current), ...fields(statusOf(current)), phase: reason, observedGeneration: current.metadata.generation })
        if (written) yield* announce(object, reason, message, at)
        return object
      })

    // -----------------------------------------------------------------------------------------------------------------
    // CreditGrants: the ledger's grants, shown

    let lots = new CreditLots()
    /** CreditGrants known to exist, with the status text written last. */
    const shown = new Map<string, string>()

    /** Takes the ledger's new postings into the lots; a ledger rebuilt since (a failed commit) is read again. */
    const follow = (current: Ledger): ReadonlyArray<GrantLot> => {
      const postings = current.postings
      const aligned = lots.lastSeq === 0 || postings[lots.lastSeq - 1]?.key === lots.lastKey
      if (!aligned) lots = new CreditLots()
      for (let index = lots.lastSeq; index < postings.length; index++) lots.apply(postings[index]!)
      return [...lots.lots.values()].map((lot) => ({ ...lot }))
    }

    /** The spec of a CreditGrant the service makes for a grant it finds in the ledger (starter, top-ups). */
    const grantSpecOf = (lot: GrantLot): JsonObject => {
      const amountUSD = formatMicroUsd(lot.granted)
      if (lot.source === starterGrantName) return { amountUSD, source: "Starter", reason: "Starter credits of a new account, so work can run at once." }
      if (lot.key.startsWith("topup/")) return { amountUSD, source: "TopUp", reason: `Paid by TopUp ${lot.source.slice(reservedGrantPrefix.length)}.` }
      return { amountUSD, source: "Admin", reason: "Granted by the operator." }
    }

    const ensureGrantObject = (lot: GrantLot) => Effect.gen(function*() {
      if (shown.has(lot.source)) return
      if ((yield* read(grants, lot.source)) === undefined) {
        const body = { apiVersion: grants.apiVersion, kind: grants.info.kind, metadata: { name: lot.source }, spec: grantSpecOf(lot) }
        yield* resources.create(grants, undefined, body, writeOptions).pipe(Effect.catchIf((error) => error.code === "AlreadyExists", () => Effect.void))
      }
      shown.set(lot.source, "")
    })

    /** Brings every CreditGrant up to the ledger: created where missing, `remainingUSD` and phase where they moved. */
    const refreshGrants = Effect.gen(function*() {
      const current = yield* ledger.read(follow)
      for (const lot of current) {
        const status = { remainingUSD: formatMicroUsd(lot.remaining), phase: phaseOf(lot) }
        const text = JSON.stringify(status)
        if (shown.get(lot.source) === text) continue
        yield* ensureGrantObject(lot)
        // A restart finds most statuses as they were: those are not written again.
        yield* writeStatus(grants, lot.source, (object) =>
          statusOf(object)["remainingUSD"] === status.remainingUSD && statusOf(object)["phase"] === status.phase
            ? undefined
            : { ...statusOf(object), ...status, observedGeneration: object.metadata.generation })
        shown.set(lot.source, text)
      }
    })

    /** The operator's grant is the intent; its posting follows once, under `grant/<uid>`. */
    const grantIntent = (grant: ResourceObject) => Effect.gen(function*() {
      if (specOf(grant)["source"] !== "Admin") return
      const amount = microOf(specOf(grant)["amountUSD"])
      const key = adminGrantKey(grant.metadata.uid)
      if (amount === undefined || (yield* ledger.read((current) => current.has(key)))) return
      const at = yield* Clock.currentTimeMillis
      yield* ledger.update((current) => current.grant(key, at, amount, grant.metadata.name))
    })

    // -----------------------------------------------------------------------------------------------------------------
    // TopUps

    const succeeded = (topUp: ResourceObject, amount: bigint, at: number) => {
      const grantName = topUpGrantName(topUp)
      const message = `The payment of ${formatMicroUsd(amount)} USD settled; CreditGrant ${grantName} added the credits.`
      return conclude(topUp, "Succeeded", message, at, () => ({
        creditGrant: grantName,
        completionTime: timestamp(at),
        conditions: [condition("Paid", "True", "PaymentSettled", message, at)]
      }))
    }

    const failed = (topUp: ResourceObject, reason: string, at: number) =>
      conclude(topUp, "Failed", reason, at, () => ({
        failureReason: reason,
        completionTime: timestamp(at),
        conditions: [condition("Paid", "False", "PaymentDeclined", reason, at)]
      }))

    const refunded = (topUp: ResourceObject, amount: bigint, at: number) => {
      const message = `${formatMicroUsd(amount)} USD went back to the payment method, and the credits were taken back.`
      return conclude(topUp, "Refunded", message, at, (current) => ({
        conditions: [...(Array.isArray(current["conditions"]) ? current["conditions"] : []), condition("Refunded", "True", "Refunded", message, at)]
      }))
    }

    /** One TopUp brought to where the ledger and the processor say it is. */
    const reconcileTopUp = (name: string) => Effect.gen(function*() {
      const topUp = yield* read(topUps, name)
      if (topUp === undefined) return undefined
      const phase = phaseOfTopUp(topUp)
      if (phase === "Failed" || phase === "Refunded") return topUp
      const uid = topUp.metadata.uid
      const amount = microOf(specOf(topUp)["amountUSD"])
      const now = yield* Clock.currentTimeMillis
      if (amount === undefined) return yield* failed(topUp, "spec.amountUSD is not a USD amount.", now)
      // A refund whose status was not written (the server stopped in between) is finished now.
      if (yield* ledger.read((current) => current.has(refundKey(uid)))) return yield* refunded(topUp, amount, now)
      if (phase === "Succeeded") return topUp
      const method = specOf(topUp)["paymentMethod"]
      const outcome = yield* payments.charge({ key: uid, amountMicro: amount, method: typeof method === "string" ? method : undefined })
      if (outcome._tag === "Declined") return yield* failed(topUp, outcome.reason, outcome.at)
      yield* ledger.update((current) => current.grant(topUpKey(uid), outcome.at, amount, topUpGrantName(topUp)))
      yield* refreshGrants
      return yield* succeeded(topUp, amount, outcome.at)
    })

    const refund = (name: string) => locked(Effect.gen(function*() {
      const topUp = yield* resources.get(topUps, undefined, name)
      const phase = phaseOfTopUp(topUp)
      if (phase === "Refunded") return topUp
      const amount = microOf(specOf(topUp)["amountUSD"])
      if (phase !== "Succeeded" || amount === undefined) {
        return yield* new ApiError({
          code: "Conflict",
          message: `topups.${group} "${name}" is ${phase}: only a Succeeded TopUp can be refunded`,
          fix: "Refund a TopUp whose status.phase is Succeeded; a Pending one settles first, a Failed one charged nothing."
        })
      }
      yield* payments.refund(topUp.metadata.uid)
      const at = yield* Clock.currentTimeMillis
      const grantName = statusOf(topUp)["creditGrant"]
      yield* ledger.update((current) => current.refund(refundKey(topUp.metadata.uid), at, amount, typeof grantName === "string" ? grantName : topUpGrantName(topUp)))
      yield* refreshGrants
      return yield* refunded(topUp, amount, at)
    }))

    // -----------------------------------------------------------------------------------------------------------------
    // Create-time rules

    /** The spec when the kind's schema admits it; else undefined, and the generic admission reports every issue. */
    const admittedSpec = (decodes: (spec: unknown) => boolean, body: unknown): JsonObject | undefined => {
      const spec = specOf(body)
      return decodes(spec) ? spec : undefined
    }

    /** A reference to nothing on file: Invalid at the field, as other kinds report a missing referent. */
    const notOnFile = (name: string | undefined, field: string, message: string) =>
      invalid({ group, kind: topUps.info.plural, ...(name === undefined ? {} : { name }) }, [fieldInvalid(field, message, "FieldValueNotFound")], topUps.info.kind)

    /** A TopUp's create-time rules, after its schema: payments taken, the limit, the payment method, promo codes. */
    const admitTopUp = (body: unknown) => Effect.gen(function*() {
      // A deployment without a processor refuses every TopUp (docs/billing.md: PaymentsNotConfigured).
      if (!payments.configured) return yield* notConfigured()
      const spec = admittedSpec(isTopUpSpec, body)
      if (spec === undefined) return body
      const name = nameOf(body)
      const amount = microOf(spec["amountUSD"])!
      if (amount > Limits.topUpAmountMicroMax) {
        return yield* new ApiError({
          code: "TopUpLimitReached",
          message: `spec.amountUSD ${spec["amountUSD"]} is above the limit of ${formatMicroUsd(Limits.topUpAmountMicroMax)} USD for one TopUp`,
          fix: `Top up at most ${formatMicroUsd(Limits.topUpAmountMicroMax)} USD at a time; for more, ask the operator for a CreditGrant.`
        })
      }
      const method = spec["paymentMethod"]
      if (typeof method === "string" && !(yield* payments.hasMethod(method))) {
        return yield* notOnFile(name, "spec.paymentMethod", `Not found: "${method}": no payment method with this id is on file; leave it unset to use the default one`)
      }
      if (method === undefined && payments.defaultMethod === undefined) {
        return yield* new ApiError({ code: "PaymentMethodRequired", message: "no payment method is on file, and spec.paymentMethod names none" })
      }
      if (typeof spec["promoCode"] === "string") {
        return yield* notOnFile(name, "spec.promoCode", `Not found: "${spec["promoCode"]}": this deployment has no promo codes yet; promotional credits are granted by the operator`)
      }
      return body
    })

    /** The operator's grant: source Admin (the default), no expiry yet, and a name the service does not use itself. */
    const admitGrant = (body: unknown) => Effect.gen(function*() {
      if (!isObject(body as Json)) return body
      const object = body as JsonObject
      const completed = { ...object, spec: { source: "Admin", ...specOf(object) } }
      const spec = admittedSpec(isCreditGrantSpec, completed)
      if (spec === undefined) return completed
      const metadata = isObject(object["metadata"]) ? object["metadata"] : {}
      const subject = { group, kind: grants.info.plural, ...(typeof metadata["name"] === "string" ? { name: metadata["name"] } : {}) }
      if (spec["expiresAt"] !== undefined) {
        return yield* new ApiError({
          code: "Unsupported",
          message: "spec.expiresAt cannot be set: grant expiry is not enforced yet, so an expiring grant would never expire",
          fix: "Leave spec.expiresAt out; the credits then never expire."
        })
      }
      if (spec["source"] !== "Admin") {
        return yield* invalid(subject, [fieldInvalid("spec.source", `Unsupported value: ${JSON.stringify(spec["source"])}: the operator grants source "Admin"; Starter and TopUp grants are made by the service`, "FieldValueNotSupported")], grants.info.kind)
      }
      for (const field of ["name", "generateName"] as const) {
        const value = metadata[field]
        if (typeof value === "string" && (value === starterGrantName || value.startsWith(reservedGrantPrefix))) {
          return yield* invalid(subject, [fieldInvalid(`metadata.${field}`, `Invalid value: "${value}": "${starterGrantName}" and names starting with "${reservedGrantPrefix}" are the service's own grants`)], grants.info.kind)
        }
      }
      return completed
    })

    // A step that failed (the store or the ledger was unavailable) is tried again at the next refresh.
    const retry = new Set<string>()
    const attempt = (kind: "topups" | "creditgrants", name: string, step: Effect.Effect<unknown, ApiError>) =>
      step.pipe(
        Effect.tap(() => Effect.sync(() => retry.delete(`${kind}/${name}`))),
        Effect.catch((error) => Effect.andThen(Effect.sync(() => retry.add(`${kind}/${name}`)), Effect.logWarning(`credits: ${kind} ${name}: ${error.message}`)))
      )

    const grantStep = (name: string) => Effect.gen(function*() {
      const grant = yield* read(grants, name)
      if (grant === undefined) return
      shown.set(name, shown.get(name) ?? "")
      yield* grantIntent(grant)
      yield* refreshGrants
    })

    const settleWith = (kind: "topups" | "creditgrants", step: (name: string) => Effect.Effect<unknown, ApiError>) => (object: ResourceObject) =>
      Effect.andThen(locked(attempt(kind, object.metadata.name, step(object.metadata.name))), Effect.map(read(kind === "topups" ? topUps : grants, object.metadata.name), (fresh) => fresh ?? object))

    const hooks: Record<string, CreateHooks> = {
      topups: { admit: admitTopUp, settle: settleWith("topups", reconcileTopUp) },
      creditgrants: { admit: admitGrant, settle: settleWith("creditgrants", grantStep) }
    }

    // -----------------------------------------------------------------------------------------------------------------
    // Following the store

    const onChange = (change: Change) => {
      if (change.type === "DELETED") return Effect.void
      if (change.key.resource === topUps.info.plural) return locked(attempt("topups", change.key.name, reconcileTopUp(change.key.name)))
      if (change.key.resource === grants.info.plural) return locked(attempt("creditgrants", change.key.name, grantStep(change.key.name)))
      return Effect.void
    }

    /** Start-up pass: every TopUp and every CreditGrant, whatever happened while no server ran. */
    const resync = Effect.gen(function*() {
      for (const ref of [grants, topUps]) {
        const page = yield* resources.list(ref, undefined, {})
        for (const object of page.items) yield* onChange({ type: "MODIFIED", key: { resource: ref.info.plural, namespace: "", name: object.metadata.name }, object, resourceVersion: 0 })
      }
      yield* locked(attempt("creditgrants", "", refreshGrants))
    })

    const tick = locked(Effect.gen(function*() {
      for (const entry of [...retry]) {
        const [kind, name] = [entry.slice(0, entry.indexOf("/")), entry.slice(entry.indexOf("/") + 1)]
        if (kind === "topups") yield* attempt("topups", name, reconcileTopUp(name))
        else yield* attempt("creditgrants", name, name === "" ? refreshGrants : grantStep(name))
      }
      yield* attempt("creditgrants", "", refreshGrants)
    }))

    // The starter grant's object exists before the first request is served.
    yield* locked(attempt("creditgrants", "", refreshGrants))
    yield* followStore("credits", feed, resync, onChange)
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(refreshInterval), surviving("credits", "refreshing")(tick))))

    return Credits.of({ createHooks: (plural) => hooks[plural], refund })
  })
}
