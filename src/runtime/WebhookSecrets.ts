/**
 * A WebhookEndpoint's signing secrets (spec: WebhookEndpoint, Webhook sub-resources; docs/webhooks.md). The secret is
 * made at create and shown once, in the create response (AdmissionPlugins' `shownOnce`); a rotation shows the new one
 * once in its response. It is never part of the object, so no read, list, watch or log can show it: it lives in a
 * record beside the object (table `webhooksecrets`, by the endpoint's uid), sealed under the server's secret key as
 * Secret values are (SecretCipher.ts), and goes with the endpoint's removal.
 *
 * During a rotation the record holds the new secret and the previous one with the time it stops signing; every
 * delivery until then carries a signature for each.
 */
import { Clock, Effect, Option } from "effect"
import type { AdmissionPlugin } from "../apiserver/AdmissionPlugins.ts"
import { isObject, type JsonObject } from "../core/Json.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { pingType } from "../core/WebhookDelivery.ts"
import type { Store, WriteOp } from "../store/Store.ts"
import { deliveredObjectOf, deliveryOf, type EventOutbox } from "./EventOutbox.ts"
import type { SecretCipher } from "./SecretCipher.ts"
import { newSecret } from "./WebhookSigning.ts"

export const secretsTable = "webhooksecrets"

/** The live secrets of an endpoint: the current one, and during a rotation the previous one until `until`. */
export interface EndpointSecrets {
  readonly current: string
  readonly previous?: { readonly secret: string; readonly until: number } | undefined
}

/** The secrets that sign at `now`, newest first. */
export const signingSecrets = (secrets: EndpointSecrets, now: number): ReadonlyArray<string> =>
  secrets.previous !== undefined && secrets.previous.until > now
    ? [secrets.current, secrets.previous.secret]
    : [secrets.current]

const recordId = (uid: string) => `webhooksecrets/${uid}`

/** The op that stores an endpoint's secrets, sealed. */
export const putSecrets = (cipher: SecretCipher["Service"], uid: string, secrets: EndpointSecrets): WriteOp => ({
  _tag: "PutRecord",
  table: secretsTable,
  id: uid,
  value: cipher.seal(recordId(uid), secrets as unknown as JsonObject)
})

/** An endpoint's secrets, opened; undefined when it has none (it was deleted). */
export const readSecrets = (store: Store["Service"], cipher: SecretCipher["Service"], uid: string) =>
  Effect.gen(function*() {
    const record = yield* Effect.mapError(
      store.getRecord(secretsTable, uid, 0),
      (error) => new ApiError({ code: "InternalError", message: error.message })
    )
    if (Option.isNone(record)) return undefined
    const opened = yield* cipher.open(recordId(uid), record.value, `the signing secret of WebhookEndpoint ${uid}`)
    const current = opened["current"]
    const previous = opened["previous"]
    if (typeof current !== "string") return undefined
    return {
      current,
      previous: isObject(previous) && typeof previous["secret"] === "string" && typeof previous["until"] === "number"
        ? { secret: previous["secret"], until: previous["until"] }
        : undefined
    } satisfies EndpointSecrets
  })

/**
 * The WebhookEndpoint's plugin: at create, its signing secret (shown once, stored sealed) and its ping (an outbox
 * record in the same commit: the endpoint exists exactly when its ping is due); at removal, its secrets go.
 */
export const webhookEndpointPlugin = (
  cipher: SecretCipher["Service"],
  outbox: EventOutbox["Service"]
): AdmissionPlugin => ({
  name: "webhookSecret",
  prepareCreate: (request) =>
    Effect.succeed({
      input: request.object,
      finish: (made: ResourceObject) =>
        Effect.gen(function*() {
          const secret = newSecret()
          const at = yield* Clock.currentTimeMillis
          const ping = deliveryOf(pingType, at, {
            reason: "Ping",
            message: `WebhookEndpoint ${made.metadata.name} was created; this is its first delivery.`
          }, deliveredObjectOf(made))
          return {
            result: made,
            ops: [putSecrets(cipher, made.metadata.uid, { current: secret }), outbox.record(ping)],
            shownOnce: { signingSecret: secret }
          }
        })
    }),
  removeOps: (current) => [{ _tag: "DeleteRecord", table: secretsTable, id: current.metadata.uid }]
})
