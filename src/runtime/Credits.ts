/**
 * Credits arrive (docs/billing.md, "Credits"; spec: Accounts and billing — CreditGrant, TopUp; events topup.succeeded,
 * topup.failed, topup.refunded). One source of truth, the ledger; the objects show it:
 *
 * - **TopUps** are processed level-triggered, like a Kubernetes controller: at start and on every change, a TopUp not
 *   yet final is charged through the payment port (keyed by its uid), its credits are granted in the ledger under
 *   `topup/<uid>` (so a replay or a restart never grants twice), and its status and event follow. A create also runs
 *   that step before it answers, so credits are there when the client gets its 201. A Succeeded TopUp whose grant the
 *   ledger lacks (the commit was lost) is granted again under the same key.
 * - **CreditGrants** show the ledger's Grant postings: one object per grant (`starter`, `topup-<name>`, the
 *   operator's), with `status.remainingUSD` attributed by core/billing/Credits.ts and refreshed as the ledger moves.
 *   The operator's grant is the one object that comes first: its create (admin only,
 *   src/kinds/creditgrant/http/CreditGrantApi.ts) is the intent, and its posting `grant/<uid>` follows, retried here
 *   until it exists.
 * - **Refunds** are an operator's operation on a Succeeded TopUp: the ledger takes the credits back under
 *   `refund/<uid>` first, then the processor refunds (keyed), then the TopUp ends Refunded. The ledger's posting is the
 *   point of no return: once it exists, the TopUp's reconcile finishes the refund (at the next pass, or at start after
 *   a crash), as the processor's refund is idempotent. The other order could leave the money returned and the credits
 *   kept, with nothing in the ledger to say a refund had begun.
 *
 * A step that fails (the store, the ledger or the processor unavailable) is tried again at the next pass. Every step
 * runs under one lock: payments are few, and a TopUp is then never charged or announced twice at once.
 */
import { Clock, Context, Effect, Layer, Schema, Semaphore } from "effect"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { Resources, type WriteOptions } from "../apiserver/Resources.ts"
import { CreditLots, type GrantLot, phaseOf } from "../core/billing/Credits.ts"
import type { Ledger } from "../core/billing/Ledger.ts"
import { conditionsOf, withCondition } from "../core/controller/Conditions.ts"
import { isObject, type Json, type JsonObject } from "../core/Json.ts"
import * as Limits from "../core/Limits.ts"
import { ApiError, fieldInvalid, invalid } from "../core/meta/ApiError.ts"
import { type ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { formatMicroUsd, tryParseMicroUsd } from "../core/Money.ts"
import { iso } from "../core/StatusText.ts"
import { CreditGrantSpec } from "../kinds/creditgrant/CreditGrantSchema.ts"
import { refOfKind } from "../kinds/Kinds.ts"
import { TopUpSpec } from "../kinds/topup/TopUpSchema.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import type { Change, WriteOp } from "../store/Store.ts"
import { deliveredObjectOf, deliveryOf, EventOutbox } from "./EventOutbox.ts"
import { followStore, surviving } from "./Following.ts"
import { LedgerService } from "./LedgerService.ts"
import { statusUpdater } from "./ObjectWriter.ts"
import { notConfigured, Payments, type PaymentsShape } from "./Payments.ts"

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

const writeOptions: WriteOptions = { dryRun: false, fieldValidation: "Ignore", fieldManager: creditsComponent }

/**
 * Steps a client's create of a credits kind takes around the generic create (src/http/Handlers.ts), through the
 * registrations of TopUp and CreditGrant (src/kinds/topup/http, src/kinds/creditgrant/http).
 */
export interface CreateHooks {
  /** Before the create (dry runs too): refuses what the kind's rules refuse; answers the body to create. */
  readonly admit: (body: unknown) => Effect.Effect<unknown, ApiError>
  /** After a real create: the processing, answering the object as it then stands (failures are retried later). */
  readonly settle: (object: ResourceObject) => Effect.Effect<ResourceObject>
}

/**
 * The credit operations the HTTP layer calls (docs/billing.md, "Credits"): the create hooks of the credit kinds a
 * client's request passes through (TopUp, the operator's CreditGrant), and the operator's refund.
 */
export class CreditService extends Context.Service<CreditService, {
  /** The hooks of creates of `plural` (topups, creditgrants), if it has any. */
  readonly createHooks: (plural: string) => CreateHooks | undefined
  /** Refunds a Succeeded TopUp (an operator's operation); a Refunded one is answered as it is. */
  readonly refund: (name: string) => Effect.Effect<ResourceObject, ApiError>
}>()("nodus/runtime/Credits") {}

/** The credit service over the ledger, the store and the payment processor. */
export const layer = Layer.effect(CreditService, make())

/** A TopUp's phase (spec: TopUp); a status without one is Pending. */
export type TopUpPhase = "Pending" | "Succeeded" | "Failed" | "Refunded"

type FinalPhase = Exclude<TopUpPhase, "Pending">

/** The phases a TopUp may move to from each phase: a payment settles or is declined, and a settled one is refunded. */
const topUpMoves: Readonly<Record<TopUpPhase, ReadonlyArray<TopUpPhase>>> = {
  Pending: ["Succeeded", "Failed"],
  Succeeded: ["Refunded"],
  Failed: [],
  Refunded: []
}

/**
 * Whether a TopUp's status moves from `from` to `to`; writing the phase it already has is no move (nothing written).
 */
export const topUpMoveAllowed = (from: TopUpPhase, to: TopUpPhase): boolean => topUpMoves[from].includes(to)

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
const microOf = (
  value: Json | undefined
): bigint | undefined => (typeof value === "string" ? tryParseMicroUsd(value) : undefined)

const isTopUpSpec = Schema.is(TopUpSpec)
const isCreditGrantSpec = Schema.is(CreditGrantSpec)

const nameOf = (body: unknown): string | undefined => {
  const metadata = isObject(body as Json) ? (body as JsonObject)["metadata"] : undefined
  return isObject(metadata) && typeof metadata["name"] === "string" ? metadata["name"] : undefined
}

/** The ledger's grants as last followed, and the CreditGrants known to exist with the status text written last. */
interface GrantView {
  lots: CreditLots
  readonly shown: Map<string, string>
}

/** What every step of this module works with: the services, the two kinds, and the CreditGrants shown. */
interface Parts {
  readonly resources: Resources["Service"]
  readonly ledger: LedgerService["Service"]
  readonly payments: PaymentsShape
  readonly outbox: EventOutbox["Service"]
  readonly group: string
  readonly topUps: ResourceRef
  readonly grants: ResourceRef
  readonly view: GrantView
}

// ---------------------------------------------------------------------------------------------------------------------
// Writing

/** The object, or undefined where there is none; any other failure fails the step, so that it is tried again. */
const read = (parts: Parts, ref: ResourceRef, name: string): Effect.Effect<ResourceObject | undefined, ApiError> =>
  parts.resources.get(ref, undefined, name).pipe(
    Effect.catchIf((error) => error.code === "NotFound", () => Effect.succeed(undefined))
  )

/**
 * A credits object's status, made from the stored one (ObjectWriter.ts statusUpdater); credits kinds are
 * cluster-scoped.
 */
const writeStatus = (
  parts: Parts,
  ref: ResourceRef,
  name: string,
  next: (current: ResourceObject) => JsonObject | undefined,
  ops?: (shown: ResourceObject) => ReadonlyArray<WriteOp>
) => statusUpdater(parts.resources, writeOptions)(ref, undefined, name, next, ops)

/**
 * The outbox record of a delivery-shaped event about a TopUp (spec: Delivery; a cluster-scoped object has no
 * namespace).
 */
const topUpEvent = (parts: Parts, topUp: ResourceObject, reason: FinalPhase, message: string, at: number): WriteOp =>
  parts.outbox.record(deliveryOf(`topup.${reason.toLowerCase()}`, at, { reason, message }, deliveredObjectOf(topUp)))

/**
 * Moves a TopUp to a final phase once, its event recorded in the same commit (so a move is announced exactly when it
 * is stored). A move `topUpMoveAllowed` refuses (a Refunded TopUp back to Succeeded, say) is not written: the TopUp is
 * answered as it stands.
 */
const conclude = (
  parts: Parts,
  topUp: ResourceObject,
  to: FinalPhase,
  message: string,
  at: number,
  fields: (current: JsonObject) => JsonObject
) =>
  Effect.map(
    writeStatus(
      parts,
      parts.topUps,
      topUp.metadata.name,
      (current) =>
        current.metadata.uid !== topUp.metadata.uid || !topUpMoveAllowed(phaseOfTopUp(current), to)
          ? undefined
          : {
            ...statusOf(current),
            ...fields(statusOf(current)),
            phase: to,
            observedGeneration: current.metadata.generation
          },
      (shown) => [topUpEvent(parts, shown, to, message, at)]
    ),
    ({ object }) => object
  )

// ---------------------------------------------------------------------------------------------------------------------
// CreditGrants: the ledger's grants, shown

/** Takes the ledger's new postings into the lots; a ledger rebuilt since (a failed commit) is read again. */
const follow = (view: GrantView) => (current: Ledger): ReadonlyArray<GrantLot> => {
  const postings = current.postings
  const aligned = view.lots.lastSeq === 0 || postings[view.lots.lastSeq - 1]?.key === view.lots.lastKey
  if (!aligned) view.lots = new CreditLots()
  for (let index = view.lots.lastSeq; index < postings.length; index++) view.lots.apply(postings[index]!)
  return [...view.lots.lots.values()].map((lot) => ({ ...lot }))
}

/** Who paid for a TopUp's grant: the TopUp's name, or its uid where the name was too long to name the grant after. */
const payerOf = (lot: GrantLot): string => {
  const uid = lot.key.slice(topUpKey("").length)
  return lot.source === `${reservedGrantPrefix}${uid}`
    ? `the TopUp whose uid is ${uid}`
    : `TopUp ${lot.source.slice(reservedGrantPrefix.length)}`
}

/** The spec of a CreditGrant the service makes for a grant it finds in the ledger (starter, top-ups). */
const grantSpecOf = (lot: GrantLot): JsonObject => {
  const amountUSD = formatMicroUsd(lot.granted)
  if (lot.source === starterGrantName) {
    return { amountUSD, source: "Starter", reason: "Starter credits of a new account, so work can run at once." }
  }
  if (lot.key.startsWith(topUpKey(""))) return { amountUSD, source: "TopUp", reason: `Paid by ${payerOf(lot)}.` }
  return { amountUSD, source: "Admin", reason: "Granted by the operator." }
}

const ensureGrantObject = (parts: Parts, lot: GrantLot) =>
  Effect.gen(function*() {
    if (parts.view.shown.has(lot.source)) return
    if ((yield* read(parts, parts.grants, lot.source)) === undefined) {
      const body = {
        apiVersion: parts.grants.apiVersion,
        kind: parts.grants.info.kind,
        metadata: { name: lot.source },
        spec: grantSpecOf(lot)
      }
      yield* parts.resources.create(parts.grants, undefined, body, writeOptions).pipe(
        Effect.catchIf((error) => error.code === "AlreadyExists", () => Effect.void)
      )
    }
    parts.view.shown.set(lot.source, "")
  })

/** Brings every CreditGrant up to the ledger: created where missing, `remainingUSD` and phase where they moved. */
const refreshGrants = (parts: Parts) =>
  Effect.gen(function*() {
    const current = yield* parts.ledger.read(follow(parts.view))
    for (const lot of current) {
      const status = { remainingUSD: formatMicroUsd(lot.remaining), phase: phaseOf(lot) }
      const text = JSON.stringify(status)
      if (parts.view.shown.get(lot.source) === text) continue
      yield* ensureGrantObject(parts, lot)
      // A restart finds most statuses as they were: those are not written again.
      yield* writeStatus(parts, parts.grants, lot.source, (object) =>
        statusOf(object)["remainingUSD"] === status.remainingUSD && statusOf(object)["phase"] === status.phase
          ? undefined
          : { ...statusOf(object), ...status, observedGeneration: object.metadata.generation })
      parts.view.shown.set(lot.source, text)
    }
  })

/** The operator's grant is the intent; its posting follows once, under `grant/<uid>`. */
const grantIntent = (parts: Parts, grant: ResourceObject) =>
  Effect.gen(function*() {
    if (specOf(grant)["source"] !== "Admin") return
    const amount = microOf(specOf(grant)["amountUSD"])
    const key = adminGrantKey(grant.metadata.uid)
    if (amount === undefined || (yield* parts.ledger.read((current) => current.has(key)))) return
    const at = yield* Clock.currentTimeMillis
    yield* parts.ledger.update((current) => current.grant(key, at, amount, grant.metadata.name))
  })

/** One CreditGrant brought to the ledger: the operator's posted, and every grant's status refreshed. */
const reconcileGrant = (parts: Parts, name: string) =>
  Effect.gen(function*() {
    const grant = yield* read(parts, parts.grants, name)
    if (grant === undefined) return
    parts.view.shown.set(name, parts.view.shown.get(name) ?? "")
    yield* grantIntent(parts, grant)
    yield* refreshGrants(parts)
  })

// ---------------------------------------------------------------------------------------------------------------------
// TopUps

const succeeded = (parts: Parts, topUp: ResourceObject, amount: bigint, at: number) => {
  const grantName = topUpGrantName(topUp)
  const message = `The payment of ${formatMicroUsd(amount)} USD settled; CreditGrant ${grantName} added the credits.`
  return conclude(parts, topUp, "Succeeded", message, at, () => ({
    creditGrant: grantName,
    completionTime: iso(at),
    conditions: withCondition([], "Paid", "True", "PaymentSettled", message, at) as unknown as Json
  }))
}

const failed = (parts: Parts, topUp: ResourceObject, reason: string, at: number) =>
  conclude(parts, topUp, "Failed", reason, at, () => ({
    failureReason: reason,
    completionTime: iso(at),
    conditions: withCondition([], "Paid", "False", "PaymentDeclined", reason, at) as unknown as Json
  }))

const refunded = (parts: Parts, topUp: ResourceObject, amount: bigint, at: number) => {
  const message = `${formatMicroUsd(amount)} USD went back to the payment method, and the credits were taken back.`
  return conclude(parts, topUp, "Refunded", message, at, (current) => ({
    conditions: withCondition(conditionsOf(current), "Refunded", "True", "Refunded", message, at) as unknown as Json
  }))
}

/** Grants a TopUp's credits under `topup/<uid>`; a key the ledger already has posts nothing. */
const grantTopUp = (parts: Parts, topUp: ResourceObject, amount: bigint, at: number) =>
  Effect.andThen(
    parts.ledger.update((current) => current.grant(topUpKey(topUp.metadata.uid), at, amount, topUpGrantName(topUp))),
    refreshGrants(parts)
  )

/** Charges a Pending TopUp (keyed by its uid, so a replay charges once), then grants its credits and ends it. */
const chargeTopUp = (parts: Parts, topUp: ResourceObject, amount: bigint) =>
  Effect.gen(function*() {
    const method = specOf(topUp)["paymentMethod"]
    const outcome = yield* parts.payments.charge({
      key: topUp.metadata.uid,
      amountMicro: amount,
      method: typeof method === "string" ? method : undefined
    })
    if (outcome._tag === "Declined") return yield* failed(parts, topUp, outcome.reason, outcome.at)
    yield* grantTopUp(parts, topUp, amount, outcome.at)
    return yield* succeeded(parts, topUp, amount, outcome.at)
  })

/** The rest of a refund once the ledger took the credits back: the processor refunds (keyed: once), then the status. */
const completeRefund = (parts: Parts, topUp: ResourceObject, amount: bigint, at: number) =>
  Effect.gen(function*() {
    yield* parts.payments.refund(topUp.metadata.uid)
    yield* refreshGrants(parts)
    return yield* refunded(parts, topUp, amount, at)
  })

/**
 * A Succeeded TopUp kept true to the ledger. A refund the ledger took under `refund/<uid>` is finished (the step that
 * began it failed or the server stopped). A grant the ledger lacks (its commit was lost after the status was written)
 * is made again under the same key, which the ledger applies once.
 */
const keepSettled = (parts: Parts, topUp: ResourceObject, amount: bigint) =>
  Effect.gen(function*() {
    const uid = topUp.metadata.uid
    const [refundPosted, grantPosted] = yield* parts.ledger.read((current) =>
      [current.has(refundKey(uid)), current.has(topUpKey(uid))] as const
    )
    const now = yield* Clock.currentTimeMillis
    if (refundPosted) return yield* completeRefund(parts, topUp, amount, now)
    if (!grantPosted) yield* grantTopUp(parts, topUp, amount, now)
    return topUp
  })

/** One TopUp brought to where the ledger and the processor say it is. */
const reconcileTopUp = (parts: Parts, name: string) =>
  Effect.gen(function*() {
    const topUp = yield* read(parts, parts.topUps, name)
    if (topUp === undefined) return undefined
    const phase = phaseOfTopUp(topUp)
    if (phase === "Failed" || phase === "Refunded") return topUp
    const amount = microOf(specOf(topUp)["amountUSD"])
    // A Succeeded TopUp stays so (conclude refuses the move): it was paid, whatever its spec says now.
    if (amount === undefined) {
      return yield* failed(parts, topUp, "spec.amountUSD is not a USD amount.", yield* Clock.currentTimeMillis)
    }
    if (phase === "Succeeded") {
      return yield* keepSettled(parts, topUp, amount)
    }
    return yield* chargeTopUp(parts, topUp, amount)
  })

/** The operator's refund of a Succeeded TopUp: the ledger's posting first, then the processor (see the header). */
const refundTopUp = (parts: Parts, name: string) =>
  Effect.gen(function*() {
    const topUp = yield* parts.resources.get(parts.topUps, undefined, name)
    const phase = phaseOfTopUp(topUp)
    if (phase === "Refunded") return topUp
    const amount = microOf(specOf(topUp)["amountUSD"])
    if (phase !== "Succeeded" || amount === undefined) {
      return yield* new ApiError({
        code: "Conflict",
        message: `topups.${parts.group} "${name}" is ${phase}: only a Succeeded TopUp can be refunded`,
        fix:
          "Refund a TopUp whose status.phase is Succeeded; a Pending one settles first, a Failed one charged nothing."
      })
    }
    // With no processor the money could never go back, so the credits are not taken back either.
    if (!parts.payments.configured) return yield* notConfigured()
    const at = yield* Clock.currentTimeMillis
    const grantName = statusOf(topUp)["creditGrant"]
    yield* parts.ledger.update((current) =>
      current.refund(
        refundKey(topUp.metadata.uid),
        at,
        amount,
        typeof grantName === "string" ? grantName : topUpGrantName(topUp)
      )
    )
    return yield* completeRefund(parts, topUp, amount, at)
  })

// ---------------------------------------------------------------------------------------------------------------------
// Create-time rules

/** The spec when the kind's schema admits it; else undefined, and the generic admission reports every issue. */
const admittedSpec = (decodes: (spec: unknown) => boolean, body: unknown): JsonObject | undefined => {
  const spec = specOf(body)
  return decodes(spec) ? spec : undefined
}

/** A reference to nothing on file: Invalid at the field, as other kinds report a missing referent. */
const notOnFile = (parts: Parts, name: string | undefined, field: string, message: string) =>
  invalid({ group: parts.group, kind: parts.topUps.info.plural, ...(name === undefined ? {} : { name }) }, [
    fieldInvalid(field, message, "FieldValueNotFound")
  ], parts.topUps.info.kind)

/** A TopUp's create-time rules, after its schema: payments taken, the limit, the payment method, promo codes. */
const admitTopUp = (parts: Parts, body: unknown) =>
  Effect.gen(function*() {
    // A deployment without a processor refuses every TopUp (docs/billing.md: PaymentsNotConfigured).
    if (!parts.payments.configured) return yield* notConfigured()
    const spec = admittedSpec(isTopUpSpec, body)
    if (spec === undefined) return body
    const name = nameOf(body)
    const amount = microOf(spec["amountUSD"])!
    if (amount > Limits.topUpAmountMicroMax) {
      return yield* new ApiError({
        code: "TopUpLimitReached",
        message: `spec.amountUSD ${spec["amountUSD"]} is above the limit of ${
          formatMicroUsd(Limits.topUpAmountMicroMax)
        } USD for one TopUp`,
        fix: `Top up at most ${
          formatMicroUsd(Limits.topUpAmountMicroMax)
        } USD at a time; for more, ask the operator for a CreditGrant.`
      })
    }
    const method = spec["paymentMethod"]
    if (typeof method === "string" && !(yield* parts.payments.hasMethod(method))) {
      return yield* notOnFile(
        parts,
        name,
        "spec.paymentMethod",
        `Not found: "${method}": no payment method with this id is on file; leave it unset to use the default one`
      )
    }
    if (method === undefined && parts.payments.defaultMethod === undefined) {
      return yield* new ApiError({
        code: "PaymentMethodRequired",
        message: "no payment method is on file, and spec.paymentMethod names none"
      })
    }
    if (typeof spec["promoCode"] === "string") {
      return yield* notOnFile(
        parts,
        name,
        "spec.promoCode",
        `Not found: "${
          spec["promoCode"]
        }": this deployment has no promo codes yet; promotional credits are granted by the operator`
      )
    }
    return body
  })

/** The operator's grant: source Admin (the default), no expiry yet, and a name the service does not use itself. */
const admitGrant = (parts: Parts, body: unknown) =>
  Effect.gen(function*() {
    if (!isObject(body as Json)) return body
    const object = body as JsonObject
    const completed = { ...object, spec: { source: "Admin", ...specOf(object) } }
    const spec = admittedSpec(isCreditGrantSpec, completed)
    if (spec === undefined) return completed
    const metadata = isObject(object["metadata"]) ? object["metadata"] : {}
    const subject = {
      group: parts.group,
      kind: parts.grants.info.plural,
      ...(typeof metadata["name"] === "string" ? { name: metadata["name"] } : {})
    }
    if (spec["expiresAt"] !== undefined) {
      return yield* new ApiError({
        code: "Unsupported",
        message:
          "spec.expiresAt cannot be set: grant expiry is not enforced yet, so an expiring grant would never expire",
        fix: "Leave spec.expiresAt out; the credits then never expire."
      })
    }
    if (spec["source"] !== "Admin") {
      return yield* invalid(subject, [
        fieldInvalid(
          "spec.source",
          `Unsupported value: ${
            JSON.stringify(spec["source"])
          }: the operator grants source "Admin"; Starter and TopUp grants are made by the service`,
          "FieldValueNotSupported"
        )
      ], parts.grants.info.kind)
    }
    for (const field of ["name", "generateName"] as const) {
      const value = metadata[field]
      if (typeof value === "string" && (value === starterGrantName || value.startsWith(reservedGrantPrefix))) {
        return yield* invalid(subject, [
          fieldInvalid(
            `metadata.${field}`,
            `Invalid value: "${value}": "${starterGrantName}" and names starting with "${reservedGrantPrefix}" are the service's own grants`
          )
        ], parts.grants.info.kind)
      }
    }
    return completed
  })

// ---------------------------------------------------------------------------------------------------------------------
// The service: steps run under one lock, failed ones retried, the store followed

function make() {
  return Effect.gen(function*() {
    const { group } = yield* ApiConfig
    const parts: Parts = {
      resources: yield* Resources,
      ledger: yield* LedgerService,
      payments: yield* Payments,
      outbox: yield* EventOutbox,
      group,
      topUps: refOfKind(group, "TopUp"),
      grants: refOfKind(group, "CreditGrant"),
      view: { lots: new CreditLots(), shown: new Map() }
    }
    const feed = yield* ChangeFeed
    const lock = Semaphore.makeUnsafe(1)
    const locked = <A, E>(effect: Effect.Effect<A, E>) => lock.withPermit(effect)

    // A step that failed (the store, the ledger or the processor was unavailable) is tried again at the next refresh.
    const retry = new Set<string>()
    const attempt = (kind: "topups" | "creditgrants", name: string, step: Effect.Effect<unknown, ApiError>) =>
      step.pipe(
        Effect.tap(() => Effect.sync(() => retry.delete(`${kind}/${name}`))),
        Effect.catch((error) =>
          Effect.andThen(
            Effect.sync(() => retry.add(`${kind}/${name}`)),
            Effect.logWarning(`credits: ${kind} ${name}: ${error.message}`)
          )
        )
      )
    const steps = {
      topups: (name: string) => reconcileTopUp(parts, name),
      // The name "" stands for the refresh of every CreditGrant.
      creditgrants: (name: string) => (name === "" ? refreshGrants(parts) : reconcileGrant(parts, name))
    }
    const run = (kind: "topups" | "creditgrants", name: string) => attempt(kind, name, steps[kind](name))

    // A refund cut short after the ledger's posting is finished by the next pass, not left for a restart.
    const refund = (name: string) =>
      locked(refundTopUp(parts, name).pipe(Effect.tapError(() => Effect.sync(() => retry.add(`topups/${name}`)))))

    /** After a real create: the step, then the object as it now stands (as created, if the store cannot say). */
    const settleWith = (kind: "topups" | "creditgrants") => (object: ResourceObject) =>
      Effect.andThen(
        locked(run(kind, object.metadata.name)),
        read(parts, kind === "topups" ? parts.topUps : parts.grants, object.metadata.name).pipe(
          Effect.map((fresh) => fresh ?? object),
          Effect.orElseSucceed(() => object)
        )
      )

    const hooks: Record<string, CreateHooks> = {
      topups: { admit: (body) => admitTopUp(parts, body), settle: settleWith("topups") },
      creditgrants: { admit: (body) => admitGrant(parts, body), settle: settleWith("creditgrants") }
    }

    const onChange = (change: Change) => {
      if (change.type === "DELETED") return Effect.void
      if (change.key.resource === parts.topUps.info.plural) return locked(run("topups", change.key.name))
      if (change.key.resource === parts.grants.info.plural) return locked(run("creditgrants", change.key.name))
      return Effect.void
    }

    /** Start-up pass: every TopUp and every CreditGrant, whatever happened while no server ran. */
    const resync = Effect.gen(function*() {
      for (const ref of [parts.grants, parts.topUps]) {
        const page = yield* parts.resources.list(ref, undefined, {})
        for (const object of page.items) {
          yield* onChange({
            type: "MODIFIED",
            key: { resource: ref.info.plural, namespace: "", name: object.metadata.name },
            object,
            resourceVersion: 0
          })
        }
      }
      yield* locked(run("creditgrants", ""))
    })

    const tick = locked(Effect.gen(function*() {
      for (const entry of [...retry]) {
        const kind = entry.slice(0, entry.indexOf("/")) === "topups" ? "topups" : "creditgrants"
        yield* run(kind, entry.slice(entry.indexOf("/") + 1))
      }
      yield* run("creditgrants", "")
    }))

    // The starter grant's object exists before the first request is served.
    yield* locked(run("creditgrants", ""))
    yield* followStore("credits", feed, resync, onChange)
    yield* Effect.forkScoped(
      Effect.forever(Effect.andThen(Effect.sleep(refreshInterval), surviving("credits", "refreshing")(tick)))
    )

    return CreditService.of({ createHooks: (plural) => hooks[plural], refund })
  })
}
