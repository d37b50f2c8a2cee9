/**
 * A ServiceAccount's HTTP parts (spec: ServiceAccount; docs/auth.md): `POST …/serviceaccounts/{name}/tokens` issues a
 * key for the account, shown once, and every write of a ServiceAccount is checked against the caller's scopes (a key
 * grants no scope its maker lacks).
 */
import { Clock, Effect } from "effect"
import type { HttpServerRequest } from "effect/http"
import {
  Auth,
  expirationOf,
  forbidden,
  type Principal,
  scopeProblems,
  tokenExpirationSeconds
} from "../../../apiserver/Auth.ts"
import { Resources } from "../../../apiserver/Resources.ts"
import { isObject, type Json, type JsonObject } from "../../../core/Json.ts"
import { ApiError, fieldInvalid } from "../../../core/meta/ApiError.ts"
import type { ResourceRef } from "../../../core/meta/Kinds.ts"
import { timestamp } from "../../../core/meta/Strategy.ts"
import { parseJson, readText } from "../../../http/Body.ts"
import type { KindRegistration } from "../../../http/KindApi.ts"
import { json } from "../../../http/Respond.ts"

type Request = HttpServerRequest.HttpServerRequest

const make = (auth: Auth["Service"], resources: Resources["Service"]) => {
  /** POST …/serviceaccounts/{name}/tokens: a new key for the account, shown once. */
  const issueToken = (
    request: Request,
    principal: Principal,
    ref: ResourceRef,
    namespace: string | undefined,
    name: string
  ) =>
    Effect.gen(function*() {
      const body = yield* Effect.flatMap(readText(request), parseJson)
      const spec = isObject((body ?? null) as Json) && isObject((body as JsonObject)["spec"])
        ? (body as JsonObject)["spec"] as JsonObject
        : {}
      const seconds = spec["expirationSeconds"]
      if (
        seconds !== undefined &&
        (typeof seconds !== "number" || !Number.isInteger(seconds) || seconds < tokenExpirationSeconds.min ||
          seconds > tokenExpirationSeconds.max)
      ) {
        const rule =
          `must be an integer from ${tokenExpirationSeconds.min} to ${tokenExpirationSeconds.max} (omit it for a key that does not expire)`
        return yield* new ApiError({
          code: "Invalid",
          message: `spec.expirationSeconds ${rule}`,
          causes: [fieldInvalid("spec.expirationSeconds", rule)]
        })
      }
      const account = yield* resources.get(ref, namespace, name)
      // A key acts with its account's scopes: minting one is granting them, so the caller must hold them all.
      const ungranted = scopeProblems(principal, account as unknown as JsonObject)
      if (ungranted.length > 0) {
        return yield* forbidden(
          principal,
          `cannot issue a key for serviceaccount "${name}": it holds scopes the caller does not (${
            ungranted.map((cause) => cause.field).join(", ")
          })`
        )
      }
      const now = yield* Clock.currentTimeMillis
      const expiresAt = typeof seconds === "number" ? now + seconds * 1_000 : undefined
      const issued = yield* auth.issueKey(account, expiresAt)
      yield* resources.commit(ref, namespace, name, [{
        _tag: "Require",
        key: { resource: "serviceaccounts", namespace: namespace ?? "", name },
        notDeleting: true
      }, ...issued.ops])
      return json(201, {
        apiVersion: ref.apiVersion,
        kind: "TokenRequest",
        metadata: { name, namespace: namespace ?? "", creationTimestamp: timestamp(now) },
        spec: typeof seconds === "number" ? { expirationSeconds: seconds } : {},
        status: {
          token: issued.key,
          ...(expiresAt === undefined ? {} : { expirationTimestamp: expirationOf(expiresAt)! })
        }
      })
    })

  return { issueToken }
}

export const serviceAccountRegistration: KindRegistration<Auth | Resources> = {
  kind: "ServiceAccount",
  make: Effect.gen(function*() {
    const auth = yield* Auth
    const { issueToken } = make(auth, yield* Resources)
    return {
      subresources: [{
        names: ["tokens"],
        access: (method) => (method === "POST" ? "write" : undefined),
        handle: (call) => issueToken(call.request, call.principal, call.ref, call.namespace, call.name)
      }],
      writeOptions: (principal: Principal) => ({
        authorizeObject: (object: JsonObject) => auth.checkServiceAccount(principal, object)
      })
    }
  })
}
