/**
 * Price consent through the dry-run ETag (spec: Create semantics 1-2; property "Estimate price protection";
 * docs/billing.md, "Price consent"). A dry run of a create answers an ETag that quotes what the caller saw: the hash of
 * the object (so it binds exactly that payload), and the estimate's rate and pricebook version. The quote is
 * authenticated with an HMAC under a server key, so a caller cannot raise the rate it binds. A later create that sends
 * the ETag in If-Match is admitted even after `estimate.validUntil`, unless the rate it would be placed at now is
 * above the bound (the quoted rate plus 10 %, core/billing/PriceBound.ts): then it is refused with
 * PriceConsentRequired.
 *
 * The key is 32 random bytes, generated once and kept in the store's record table, like the admin key's bootstrap
 * record, so every server process over the same store (and every restart) accepts the ETags of the others.
 */
import { Context, Effect, Layer, Option } from "effect"
import { createHash, createHmac, timingSafeEqual } from "node:crypto"
import { Ids } from "../apiserver/Ids.ts"
import { priceBoundOf } from "../core/billing/PriceBound.ts"
import { canonical, type Json } from "../core/Json.ts"
import { ApiError, type Subject } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { formatMicroUsd } from "../core/Money.ts"
import { Store } from "../store/Store.ts"

/** What a dry run's ETag quotes. */
export interface Quote {
  /** The hash of the object's payload (`payloadOf`). */
  readonly payload: string
  /** The estimate's `rateUSDPerHour` in micro-USD; absent when the estimate named no rate (nothing to bind). */
  readonly rateMicro?: bigint
  /** The estimate's `pricebookVersion`, for the message of a refusal. */
  readonly pricebookVersion?: string
}

/** Where the key lives: the record table of bootstrap secrets (Auth.ts keeps the admin key's record there). */
export const keyTable = "bootstrap"
export const keyId = "price-consent"

/** Bytes of the HMAC key. */
const keyBytes = 32

/** Every dry-run ETag starts with this (clients and tests recognise it); the version tells token formats apart. */
export const tokenPrefix = "dryrun.1."

/** Binds a MAC to this use, so a MAC computed with the same key for anything else never verifies here. */
const macDomain = "nodus/price-consent/1\n"

/**
 * The payload a dry run binds: a hash of the admitted object without its server-owned parts (uid, times, managed
 * fields, resourceVersion, status with the estimate), so a create that sends the ETag must send the same object.
 */
export const payloadOf = (object: ResourceObject): string => {
  const { uid: _uid, creationTimestamp: _created, managedFields: _managed, resourceVersion: _rv, name, ...rest } =
    object.metadata
  // A name generated from generateName differs on every create; a name the caller chose is part of the payload.
  const metadata = rest.generateName === undefined ? { ...rest, name } : rest
  const { status: _status, ...payloadObject } = object
  return createHash("sha256").update(canonical({ ...payloadObject, metadata } as unknown as Json)).digest("base64url")
}

/** The MAC of the claims, as base64url text: text is compared, so no second spelling of the same bytes verifies. */
const macOf = (key: string, claims: string): string =>
  createHmac("sha256", key).update(macDomain).update(claims).digest("base64url")

/** The ETag quoting `quote`, signed with `key`: a quoted opaque string of base64url parts (RFC 9110 §8.8.3). */
export const encodeQuote = (key: string, quote: Quote): string => {
  const claims = Buffer.from(
    JSON.stringify([quote.payload, quote.rateMicro?.toString() ?? null, quote.pricebookVersion ?? null])
  ).toString("base64url")
  return `"${tokenPrefix}${claims}.${macOf(key, claims)}"`
}

/** The quote an ETag carries, or undefined when it is not one `key` signed (malformed, tampered, another key). */
export const decodeQuote = (key: string, etag: string): Quote | undefined => {
  const match = /^"dryrun\.1\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)"$/u.exec(etag.trim())
  if (match === null) return undefined
  const [, claims, mac] = match as unknown as [string, string, string]
  const expected = Buffer.from(macOf(key, claims))
  const given = Buffer.from(mac)
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined
  try {
    const parsed = JSON.parse(Buffer.from(claims, "base64url").toString("utf8")) as unknown
    if (!Array.isArray(parsed) || parsed.length !== 3) return undefined
    const [payload, rate, pricebookVersion] = parsed as [unknown, unknown, unknown]
    if (typeof payload !== "string" || (rate !== null && (typeof rate !== "string" || !/^[0-9]+$/u.test(rate)))) {
      return undefined
    }
    return {
      payload,
      ...(typeof rate === "string" ? { rateMicro: BigInt(rate) } : {}),
      ...(typeof pricebookVersion === "string" ? { pricebookVersion } : {})
    }
  } catch {
    return undefined
  }
}

/**
 * The bound a quote grants, and the refusal when the rate a create would be placed at now (`nowMicro`, from the
 * create's own estimate) is above it. No quoted rate: nothing is bound. No rate now (the estimate failed, or nothing
 * matches now): the create is admitted with its bound, which keeps every later placement under it.
 */
export const consentOf = (
  quote: Quote,
  nowMicro: bigint | undefined,
  subject: Subject
): { readonly bound: bigint | undefined; readonly refusal: ApiError | undefined } => {
  if (quote.rateMicro === undefined) return { bound: undefined, refusal: undefined }
  const bound = priceBoundOf(quote.rateMicro)
  if (nowMicro === undefined || nowMicro <= bound) return { bound, refusal: undefined }
  const quoted = `${formatMicroUsd(quote.rateMicro)} USD/h${
    quote.pricebookVersion === undefined ? "" : ` (pricebook ${quote.pricebookVersion})`
  }`
  return {
    bound,
    refusal: new ApiError({
      code: "PriceConsentRequired",
      message: `${[subject.kind, subject.group].filter((part) => part !== undefined && part !== "").join(".")} "${
        subject.name ?? ""
      }" would be placed at ${formatMicroUsd(nowMicro)} USD/h now, above the ${
        formatMicroUsd(bound)
      } USD/h its If-Match consents to (the dry run's estimate ${quoted} plus 10 %, rounded down to the micro-USD)`,
      subject,
      fix:
        "Repeat the dry run (dryRun=All) with the same body, review the new status.estimate, and send its ETag in If-Match; or wait for cheaper capacity and send the same ETag again."
    })
  }
}

const mismatch = (ifMatch: string) =>
  new ApiError({
    code: "PreconditionFailed",
    message: `If-Match ${ifMatch} is not the ETag of a dry run of this object`,
    fix:
      "Send the ETag a dry run (dryRun=All) of exactly this body answered, unchanged, or leave If-Match out to accept current prices."
  })

export class PriceConsent extends Context.Service<PriceConsent, {
  /** The ETag of a dry run of `object` whose estimate quoted `rateMicro` under `pricebookVersion`. */
  readonly quote: (
    object: ResourceObject,
    rate: { readonly rateMicro?: bigint; readonly pricebookVersion?: string }
  ) => string
  /** The quote of `ifMatch` when it is a dry run's ETag for exactly `object`; PreconditionFailed otherwise. */
  readonly verify: (ifMatch: string, object: ResourceObject) => Effect.Effect<Quote, ApiError>
}>()("nodus/runtime/PriceConsent") {
  static readonly layer = Layer.effect(
    PriceConsent,
    Effect.gen(function*() {
      const key = yield* ensureKey
      return PriceConsent.of({
        quote: (object, rate) => encodeQuote(key, { payload: payloadOf(object), ...rate }),
        verify: (ifMatch, object) => {
          const quote = decodeQuote(key, ifMatch)
          return quote !== undefined && quote.payload === payloadOf(object)
            ? Effect.succeed(quote)
            : Effect.fail(mismatch(ifMatch))
        }
      })
    })
  )
}

/** The stored key, generated on first start; servers sharing a store race to write it, and all use the one that won. */
const ensureKey = Effect.gen(function*() {
  const store = yield* Store
  const ids = yield* Ids
  const read = Effect.map(
    store.getRecord(keyTable, keyId, 0),
    Option.filter((value): value is string => typeof value === "string")
  )
  const found = yield* read
  if (Option.isSome(found)) return found.value
  yield* store.commit([{ _tag: "PutRecord", table: keyTable, id: keyId, value: ids.secret(keyBytes), ifAbsent: true }])
    .pipe(
      Effect.catchTag("CommitFailed", () => Effect.void)
    )
  const stored = yield* read
  return Option.isSome(stored)
    ? stored.value
    : yield* Effect.die(new Error("the price-consent key could not be stored"))
}).pipe(Effect.orDie)
