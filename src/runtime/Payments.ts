/**
 * The payment-processor port (docs/billing.md, "Credits"): what TopUps charge through. A charge and a refund are keyed
 * (the TopUp's uid), so asking twice — a retried request, a replayed controller step, a restarted server — charges
 * or refunds once, as real processors' idempotency keys do.
 *
 * Two processors so far:
 * - `layerEmbedded`: for development and the simulator. It settles at once, keeps its charges in the store (so a
 *   restarted server answers the first result again) and knows a few test payment methods: `pm_test_visa` (the
 *   default; settles) and `pm_test_declined` (declined: the failure path).
 * - `layerNone`: a production server without a processor. TopUp creates are refused with PaymentsNotConfigured;
 *   credits then come only from the operator's CreditGrants.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { isObject, type Json } from "../core/Json.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import { Store } from "../store/Store.ts"

/** How a charge ended. Processors that settle later would add a Pending outcome. */
export type ChargeOutcome =
  | { readonly _tag: "Settled"; readonly at: number }
  | { readonly _tag: "Declined"; readonly at: number; readonly reason: string }

export interface ChargeRequest {
  /** The idempotency key: one charge per key, whatever the number of requests. */
  readonly key: string
  readonly amountMicro: bigint
  /** The payment method's id; undefined: the default one. */
  readonly method: string | undefined
}

export interface PaymentsShape {
  /** Whether this server takes payments at all. */
  readonly configured: boolean
  /** The payment method a TopUp without one uses; undefined: none on file (PaymentMethodRequired). */
  readonly defaultMethod: string | undefined
  /** Whether a payment method is on file. */
  readonly hasMethod: (method: string) => Effect.Effect<boolean, ApiError>
  /** Charges once per key; asking again answers the first outcome. */
  readonly charge: (request: ChargeRequest) => Effect.Effect<ChargeOutcome, ApiError>
  /** Refunds the settled charge made under `key`, once per key. */
  readonly refund: (key: string) => Effect.Effect<void, ApiError>
}

/** The embedded processor's default payment method: it settles. */
export const testMethodDefault = "pm_test_visa"

/** The embedded processor's payment method that is always declined (the failure path). */
export const testMethodDeclined = "pm_test_declined"

/** Why the embedded processor declines `pm_test_declined`, as a card network would word it. */
export const declinedReason = "The card was declined (test payment method pm_test_declined)."

/** The payment methods the embedded processor has on file. */
export const testMethods: ReadonlyArray<string> = [testMethodDefault, testMethodDeclined]

const chargesTable = "payments"

type ChargeRecord = {
  readonly state: "Settled" | "Declined" | "Refunded"
  readonly amountMicro: string
  readonly method: string
  readonly at: number
  readonly reason?: string
}

export const notConfigured = () =>
  new ApiError({
    code: "PaymentsNotConfigured",
    message: "this server has no payment processor configured, so it cannot take payments such as TopUps"
  })

const unavailable = (what: string) =>
  new ApiError({ code: "Unavailable", message: `the payment processor could not ${what}`, retryAfterSeconds: 1 })

export class Payments extends Context.Service<Payments, PaymentsShape>()("nodus/runtime/Payments") {
  static readonly layerEmbedded = Layer.effect(
    Payments,
    Effect.gen(function*() {
      const store = yield* Store
      const read = (key: string) =>
        Effect.map(
          store.getRecord(chargesTable, key, 0).pipe(Effect.mapError(() => unavailable("read its charges"))),
          (found) => Option.isSome(found) && isObject(found.value) ? found.value as unknown as ChargeRecord : undefined
        )
      const write = (key: string, record: ChargeRecord, ifAbsent: boolean) =>
        store.commit([{
          _tag: "PutRecord",
          table: chargesTable,
          id: key,
          value: record as unknown as Json,
          ...(ifAbsent ? { ifAbsent } : {})
        }])

      const outcomeOf = (record: ChargeRecord): ChargeOutcome =>
        record.state === "Declined"
          ? { _tag: "Declined", at: record.at, reason: record.reason ?? declinedReason }
          : { _tag: "Settled", at: record.at }

      const charge = (request: ChargeRequest) =>
        Effect.gen(function*() {
          const first = yield* read(request.key)
          if (first !== undefined) return outcomeOf(first)
          const method = request.method ?? testMethodDefault
          const at = yield* Clock.currentTimeMillis
          // A method that left the file after the TopUp was admitted is declined like a card that stopped working.
          const declined = method === testMethodDeclined
            ? declinedReason
            : testMethods.includes(method)
            ? undefined
            : `The payment method ${method} is not on file.`
          const record: ChargeRecord = declined === undefined
            ? { state: "Settled", amountMicro: String(request.amountMicro), method, at }
            : { state: "Declined", amountMicro: String(request.amountMicro), method, at, reason: declined }
          const written = yield* Effect.result(write(request.key, record, true))
          if (written._tag === "Success") return outcomeOf(record)
          // Another request charged under this key first: its outcome is the charge's.
          const raced = yield* read(request.key)
          return raced === undefined ? yield* unavailable("record the charge") : outcomeOf(raced)
        })

      const refund = (key: string) =>
        Effect.gen(function*() {
          const record = yield* read(key)
          if (record === undefined || record.state === "Declined") {
            return yield* new ApiError({
              code: "Conflict",
              message: `no settled charge was made under key ${key}, so there is nothing to refund`,
              fix:
                "Refund only a TopUp whose payment settled (status.phase Succeeded): a declined TopUp charged nothing, so nothing goes back."
            })
          }
          if (record.state === "Refunded") return
          yield* write(key, { ...record, state: "Refunded" }, false).pipe(
            Effect.mapError(() => unavailable("record the refund"))
          )
        })

      return Payments.of({
        configured: true,
        defaultMethod: testMethodDefault,
        hasMethod: (method) => Effect.succeed(testMethods.includes(method)),
        charge,
        refund
      })
    })
  )

  static readonly layerNone = Layer.succeed(
    Payments,
    Payments.of({
      configured: false,
      defaultMethod: undefined,
      hasMethod: () => Effect.succeed(false),
      // TopUps stored while a processor was configured end Failed: nothing can charge them now.
      charge: () =>
        Effect.map(
          Clock.currentTimeMillis,
          (at): ChargeOutcome => ({ _tag: "Declined", at, reason: notConfigured().message })
        ),
      refund: () => Effect.fail(notConfigured())
    })
  )
}

/** Which processor a server runs (docs/billing.md): the embedded one, or none on a production database. */
export type PaymentsMode = "embedded" | "none"

export const layerOf = (mode: PaymentsMode) => (mode === "embedded" ? Payments.layerEmbedded : Payments.layerNone)
