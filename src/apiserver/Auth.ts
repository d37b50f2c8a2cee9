/**
 * Authentication and scopes (spec: Authentication). Every call carries `Authorization: Bearer <key>`. Keys are random
 * secrets stored only as SHA-256 hashes (a fast hash is enough: the secrets have 256 bits of entropy, so there is
 * nothing to brute-force). Two kinds of principal hold keys:
 *
 * - the bootstrap admin, whose key is NODUS_BOOTSTRAP_TOKEN (or generated once), with every scope in every project;
 * - ServiceAccounts (a project kind), whose keys are issued by POST …/serviceaccounts/{name}/tokens, shown once, and
 *   act with the account's current `spec.scopes` inside its own project only. Deleting the account revokes its keys.
 *
 * The scope vocabulary is documented in docs/auth.md.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { createHash } from "node:crypto"
import { isArray, isObject, type Json, type JsonObject } from "../core/Json.ts"
import { ApiError, type Cause, fieldInvalid, invalid } from "../core/meta/ApiError.ts"
import { type KindInfo, namespaceKind } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { adminScope, isKnownScope } from "../core/meta/Scopes.ts"
import { timestamp } from "../core/meta/Strategy.ts"
import { byPluralName } from "../kinds/Kinds.ts"
import { Store, type WriteOp } from "../store/Store.ts"
import { Ids } from "./Ids.ts"

export interface Principal {
  /** "admin" or "system:serviceaccount:<project>:<name>", as audit lines and errors name it. */
  readonly name: string
  readonly kind: "Admin" | "ServiceAccount"
  /** The one project a ServiceAccount acts in. */
  readonly namespace?: string
  readonly scopes: ReadonlySet<string>
}

/** What an operation does to a kind, for the scope it needs. */
export type Access = "read" | "write" | "status"

/** The record table holding key hashes. */
export const keysTable = "apikeys"

/** Keys look like `nds_<43 characters>` so that secret scanners can recognise them. */
export const keyPrefix = "nds_"

/** How long an authenticated key is trusted before the store is asked again (revocation takes effect within it). */
export const authenticationCacheMs = 2_000

/**
 * The one org-level kind a project-bound key may write (with its scope): TopUps, which only ever add credits to the
 * account and take nothing from any project (they support create alone).
 */
const projectKeysMayWrite: ReadonlySet<string> = new Set(["topups"])

/** How long an issued key may live: ten minutes to ten years; a request without expirationSeconds gets no expiry. */
export const tokenExpirationSeconds = { min: 600, max: 10 * 365 * 24 * 60 * 60 } as const

/** Bound on cached keys, so that a flood of random keys cannot grow memory without limit. */
export const authenticationCacheEntriesMax = 10_000

/** Write implies read; `*:<access>` covers every kind; admin covers everything. */
export const grants = (scopes: ReadonlySet<string>, prefix: string, access: Access): boolean => {
  if (scopes.has(adminScope)) return true
  if (access === "status") return false
  const wanted = access === "read" ? ["read", "write"] : ["write"]
  return wanted.some((level) => scopes.has(`${prefix}:${level}`) || scopes.has(`*:${level}`))
}

export const hashKey = (key: string): string => createHash("sha256").update(key).digest("hex")

const unauthorized = (message: string) =>
  new ApiError({
    code: "Unauthorized",
    message,
    fix: "Send `Authorization: Bearer <key>` with a valid, unexpired key; `nodus kubeconfig` prints the admin's."
  })

export const forbidden = (principal: Principal, message: string) =>
  new ApiError({ code: "Forbidden", message: `${principal.name} ${message}` })

interface KeyRecord {
  readonly kind: "Admin" | "ServiceAccount"
  readonly namespace?: string
  readonly name?: string
  readonly uid?: string
}

const scopesOf = (serviceAccount: ResourceObject): ReadonlySet<string> => {
  const spec = serviceAccount.spec
  const scopes = isObject(spec) ? spec["scopes"] : undefined
  return new Set(isArray(scopes) ? scopes.filter((scope): scope is string => typeof scope === "string") : [])
}

/** Whether holding `held` includes everything `scope` permits (nobody grants what they do not have). */
export const covers = (held: ReadonlySet<string>, scope: string): boolean => {
  if (held.has(adminScope)) return true
  if (scope === adminScope) return false
  const [prefix, access] = scope.split(":") as [string, "read" | "write"]
  if (prefix !== "*") return grants(held, prefix, access)
  return held.has(`*:${access}`) || (access === "read" && held.has("*:write"))
}

/** Problems with a ServiceAccount's scopes: unknown names, and scopes the writer does not hold itself. */
export const scopeProblems = (writer: Principal, object: JsonObject): ReadonlyArray<Cause> => {
  const spec = object["spec"]
  const scopes = isObject(spec) ? spec["scopes"] : undefined
  if (scopes === undefined) return []
  if (!isArray(scopes)) return [fieldInvalid("spec.scopes", "Invalid value: must be a list of scope names")]
  return scopes.flatMap((scope, index): ReadonlyArray<Cause> => {
    const field = `spec.scopes[${index}]`
    if (typeof scope !== "string" || !isKnownScope(scope)) {
      return [
        fieldInvalid(
          field,
          `Unsupported value: ${JSON.stringify(scope)}: see docs/auth.md for the scope list`,
          "FieldValueNotSupported"
        )
      ]
    }
    return covers(writer.scopes, scope)
      ? []
      : [fieldInvalid(field, `Forbidden: ${writer.name} cannot grant a scope it does not hold`, "FieldValueForbidden")]
  })
}

export class Auth extends Context.Service<Auth, {
  readonly authenticate: (authorization: string | undefined) => Effect.Effect<Principal, ApiError>
  /** May `principal` do `access` to `info` in `namespace` (undefined: cluster-scoped or all projects)? */
  readonly authorize: (
    principal: Principal,
    info: KindInfo,
    access: Access,
    namespace: string | undefined
  ) => Effect.Effect<void, ApiError>
  /** The project a principal is confined to, if any (all-projects lists are narrowed to it). */
  readonly confinedTo: (principal: Principal) => string | undefined
  /** Admission hook for ServiceAccount writes: scopes must be known and held by the writer. */
  readonly checkServiceAccount: (principal: Principal, object: JsonObject) => ApiError | undefined
  /** A new key for a ServiceAccount: the secret (shown once) and the ops that store its hash. */
  readonly issueKey: (
    serviceAccount: ResourceObject,
    expiresAt: number | undefined
  ) => Effect.Effect<{ readonly key: string; readonly ops: ReadonlyArray<WriteOp> }>
  /** Ops that make `key` the admin key, replacing an earlier bootstrap key. */
  readonly bootstrapOps: (key: string) => Effect.Effect<ReadonlyArray<WriteOp>, ApiError>
}>()("nodus/apiserver/Auth") {
  static readonly layer = Layer.effect(
    Auth,
    Effect.gen(function*() {
      const store = yield* Store
      const ids = yield* Ids
      const cache = new Map<string, { readonly principal: Principal; readonly until: number }>()

      const lookup = (hash: string, now: number) =>
        Effect.gen(function*() {
          const found = yield* store.getRecord(keysTable, hash, now).pipe(
            Effect.orElseSucceed(() => Option.none<Json>())
          )
          if (Option.isNone(found)) return undefined
          const record = found.value as unknown as KeyRecord
          if (record.kind === "Admin") {
            return { name: "admin", kind: "Admin", scopes: new Set([adminScope]) } satisfies Principal
          }
          const account = yield* store.get({
            resource: "serviceaccounts",
            namespace: record.namespace ?? "",
            name: record.name ?? ""
          }).pipe(Effect.orElseSucceed(() => Option.none<ResourceObject>()))
          if (Option.isNone(account) || account.value.metadata.uid !== record.uid) return undefined
          return {
            name: `system:serviceaccount:${record.namespace}:${record.name}`,
            kind: "ServiceAccount",
            namespace: record.namespace ?? "",
            scopes: scopesOf(account.value)
          } satisfies Principal
        })

      const authenticate = (authorization: string | undefined) =>
        Effect.gen(function*() {
          if (authorization === undefined || authorization === "") {
            return yield* unauthorized("Unauthorized: no credentials were sent")
          }
          const match = /^Bearer\s+(\S+)\s*$/iu.exec(authorization)
          if (match === null) {
            return yield* unauthorized("Unauthorized: the Authorization header must be `Bearer <key>`")
          }
          const key = match[1]!
          const now = yield* Clock.currentTimeMillis
          // Keyed by the key itself (already in this process's memory with the request) to spare a hash per request.
          const cached = cache.get(key)
          if (cached !== undefined && cached.until > now) return cached.principal
          const principal = yield* lookup(hashKey(key), now)
          if (principal === undefined) {
            cache.delete(key)
            return yield* unauthorized("Unauthorized: the key is unknown, expired or revoked")
          }
          if (cache.size >= authenticationCacheEntriesMax) cache.clear()
          cache.set(key, { principal, until: now + authenticationCacheMs })
          return principal
        })

      const authorize = (principal: Principal, info: KindInfo, access: Access, namespace: string | undefined) => {
        if (
          principal.namespace !== undefined && info.scope === "Namespaced" && namespace !== undefined &&
          namespace !== principal.namespace
        ) {
          return Effect.fail(
            forbidden(
              principal,
              `cannot access project "${namespace}": the key is confined to project "${principal.namespace}"`
            )
          )
        }
        if (
          principal.namespace !== undefined && info === namespaceKind &&
          (access !== "read" || (namespace !== undefined && namespace !== principal.namespace))
        ) {
          return Effect.fail(
            forbidden(
              principal,
              access === "read" ? `cannot read project "${namespace}"` : "cannot create or delete projects"
            )
          )
        }
        // Cluster-scoped objects are the organisation's: a Budget caps every project it selects, a WebhookEndpoint
        // receives org-level events whatever projects it names. A key bound to one project may read them with the
        // scope, never write them, except to pay credits in (docs/auth.md).
        if (
          principal.namespace !== undefined && info.scope === "Cluster" && info !== namespaceKind &&
          access !== "read" && !projectKeysMayWrite.has(info.plural)
        ) {
          return Effect.fail(
            forbidden(
              principal,
              `cannot ${
                access === "status" ? "write the status of" : "write"
              } ${info.plural}: they are org-level objects, and the key is bound to project "${principal.namespace}"`
            )
          )
        }
        // A confined key may always read its own project: kubectl asks for it to word NotFound errors.
        if (info === namespaceKind && access === "read" && principal.namespace !== undefined) return Effect.void
        return grants(principal.scopes, info.scopePrefix, access)
          ? Effect.void
          : Effect.fail(
            forbidden(
              principal,
              `cannot ${access === "status" ? "write the status of" : access} ${info.plural}: the key needs scope "${
                access === "status" ? adminScope : `${info.scopePrefix}:${access}`
              }"`
            )
          )
      }

      const issueKey = (serviceAccount: ResourceObject, expiresAt: number | undefined) =>
        Effect.sync(() => {
          const key = `${keyPrefix}${ids.secret(32)}`
          const record: KeyRecord = {
            kind: "ServiceAccount",
            namespace: serviceAccount.metadata.namespace ?? "",
            name: serviceAccount.metadata.name,
            uid: serviceAccount.metadata.uid
          }
          const ops: ReadonlyArray<WriteOp> = [{
            _tag: "PutRecord",
            table: keysTable,
            id: hashKey(key),
            value: record as unknown as Json,
            ...(expiresAt === undefined ? {} : { expiresAt })
          }]
          return { key, ops }
        })

      const bootstrapOps = (key: string) =>
        Effect.gen(function*() {
          const hash = hashKey(key)
          const previous = yield* store.getRecord("bootstrap", "admin", 0).pipe(
            Effect.orElseSucceed(() => Option.none<Json>())
          )
          const stale = Option.isSome(previous) && previous.value !== hash
            ? [{ _tag: "DeleteRecord", table: keysTable, id: String(previous.value) } as const]
            : []
          return [
            ...stale,
            { _tag: "PutRecord", table: keysTable, id: hash, value: { kind: "Admin" } },
            { _tag: "PutRecord", table: "bootstrap", id: "admin", value: hash }
          ] satisfies ReadonlyArray<WriteOp>
        })

      return Auth.of({
        authenticate,
        authorize,
        confinedTo: (principal) => principal.namespace,
        checkServiceAccount: (principal, object) => {
          const problems = scopeProblems(principal, object)
          const metadata = isObject(object["metadata"]) ? object["metadata"] : {}
          return problems.length === 0
            ? undefined
            : invalid(
              {
                group: "",
                kind: "serviceaccounts",
                ...(typeof metadata["name"] === "string" ? { name: metadata["name"] } : {})
              },
              problems,
              "ServiceAccount"
            )
        },
        issueKey,
        bootstrapOps
      })
    })
  )
}

/** The kind a plural names, for scope checks of subresources. */
export const kindForScope = (
  plural: string
): KindInfo | undefined => (plural === "namespaces" ? namespaceKind : byPluralName(plural))

/** `expirationTimestamp` of an issued key. */
export const expirationOf = (
  expiresAt: number | undefined
): string | undefined => (expiresAt === undefined ? undefined : timestamp(expiresAt))
