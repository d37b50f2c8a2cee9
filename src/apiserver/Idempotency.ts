/**
 * `Idempotency-Key` on creates (spec: Create semantics 4). A key is scoped to the principal that sent it and kept
 * for 24 hours. The first request claims the key with a short-lived in-progress record; its create then commits the
 * final record — the exact response, with the committed object embedded by the store — in the same transaction as
 * the object, so a crash can never leave an object without its record or a record without its object.
 *
 * - same key, same payload, finished: the original response again (header `Idempotent-Replayed: true`);
 * - same key, different payload: IdempotencyKeyReused;
 * - same key while the first request still runs: RequestInProgress (retry after a second);
 * - a failed create releases the key, so a corrected retry may use it (only successes are remembered).
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { createHash } from "node:crypto"
import type { Json, JsonObject } from "../core/Json.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import { Store, type WriteOp } from "../store/Store.ts"

export const idempotencyTable = "idempotency"

/** Keys are kept at least this long (spec: keys kept ≥ 24h). */
export const idempotencyKeyTtlMs = 24 * 60 * 60 * 1_000

/** An in-progress claim older than this is abandoned (its server died); a retry may take the key over. */
export const idempotencyClaimTtlMs = 60 * 1_000

export interface StoredResponse {
  readonly status: number
  readonly warnings: ReadonlyArray<string>
  readonly body: Json
}

type RecordValue =
  | { readonly state: "InProgress"; readonly fingerprint: string }
  | {
    readonly state: "Done"
    readonly fingerprint: string
    readonly status: number
    readonly warnings: ReadonlyArray<string>
    readonly body?: Json
  }

export type Claim =
  | { readonly _tag: "Replay"; readonly response: StoredResponse }
  | {
    readonly _tag: "Proceed"
    /** Ops to commit with the create (op 0 of that commit must be the create). */
    readonly finishOps: (status: number, warnings: ReadonlyArray<string>) => ReadonlyArray<WriteOp>
    /** Releases the key after a failed create. */
    readonly release: Effect.Effect<void>
  }

/** The payload a key is bound to: method, path and the canonical body. */
export const fingerprint = (parts: ReadonlyArray<string>): string =>
  createHash("sha256").update(parts.join("\n")).digest("hex")

const reused = () =>
  new ApiError({
    code: "IdempotencyKeyReused",
    message: "the Idempotency-Key was already used with a different request payload",
    fix: "Resend the original payload with this key, or use a new key for a new request."
  })

const inProgress = () =>
  new ApiError({
    code: "RequestInProgress",
    message: "a request with this Idempotency-Key is still in progress",
    retryAfterSeconds: 1
  })

export class Idempotency extends Context.Service<Idempotency, {
  readonly claim: (principal: string, key: string, fingerprint: string) => Effect.Effect<Claim, ApiError>
}>()("nodus/apiserver/Idempotency") {
  static readonly layer = Layer.effect(
    Idempotency,
    Effect.gen(function*() {
      const store = yield* Store
      const unavailable = () =>
        new ApiError({ code: "Unavailable", message: "the idempotency store is unavailable", retryAfterSeconds: 1 })

      const answer = (value: RecordValue, wanted: string): Effect.Effect<Claim, ApiError> | undefined => {
        if (value.fingerprint !== wanted) return Effect.fail(reused())
        if (value.state === "InProgress") return Effect.fail(inProgress())
        return Effect.succeed({
          _tag: "Replay",
          response: { status: value.status, warnings: value.warnings, body: value.body ?? null }
        })
      }

      const claim = (principal: string, key: string, wanted: string): Effect.Effect<Claim, ApiError> =>
        Effect.gen(function*() {
          const id = fingerprint([principal, key])
          const now = yield* Clock.currentTimeMillis
          const existing = yield* store.getRecord(idempotencyTable, id, now).pipe(Effect.mapError(unavailable))
          if (Option.isSome(existing)) return yield* answer(existing.value as unknown as RecordValue, wanted)!
          const claimed = yield* Effect.result(store.commit([{
            _tag: "PutRecord",
            table: idempotencyTable,
            id,
            value: { state: "InProgress", fingerprint: wanted },
            expiresAt: now + idempotencyClaimTtlMs,
            ifAbsent: true
          }]))
          if (claimed._tag === "Failure") {
            // Someone claimed it between our read and our write: answer as if we had read their claim.
            if (claimed.failure._tag === "StoreError") return yield* unavailable()
            const raced = yield* store.getRecord(idempotencyTable, id, now).pipe(Effect.mapError(unavailable))
            return yield* Option.isSome(raced)
              ? answer(raced.value as unknown as RecordValue, wanted)!
              : Effect.fail(inProgress())
          }
          return {
            _tag: "Proceed",
            finishOps: (status, warnings) => [{
              _tag: "PutRecord",
              table: idempotencyTable,
              id,
              value: {
                state: "Done",
                fingerprint: wanted,
                status,
                warnings
              } satisfies RecordValue as unknown as JsonObject,
              expiresAt: now + idempotencyKeyTtlMs,
              embed: { field: "body", op: 0 }
            }],
            release: Effect.ignore(store.commit([{ _tag: "DeleteRecord", table: idempotencyTable, id }]))
          } satisfies Claim
        })

      return Idempotency.of({ claim })
    })
  )
}
