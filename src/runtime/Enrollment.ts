/**
 * Enrolling hosts (docs/live.md, "Enrolling a host"; docs/kinds/EnrollmentToken.md, Node.md).
 *
 * - An EnrollmentToken's create makes its token: `status.token` in the create response only (AdmissionPlugins'
 *   `shownOnce`), kept as its SHA-256 in a record beside the object, with `expirationTime`, `uses` and `nodes`.
 * - `enroll`: a host presents the token, its Node's name and the hash of a key it made. A token that is unknown,
 *   deleted, expired or used up is EnrollmentTokenInvalid. Otherwise, in one commit: the Node (in the token's project
 *   and Pool), the token's use counted (its resourceVersion checked, so two hosts never share its last use), and the
 *   agent's credential record (the hash of its key: the server never holds the key).
 * - `authenticate`: an agent's key → its Node, while the Node exists.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { createHash, randomBytes } from "node:crypto"
import type { AdmissionPlugin } from "../apiserver/AdmissionPlugins.ts"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { Resources } from "../apiserver/Resources.ts"
import { isObject, type Json, type JsonObject } from "../core/Json.ts"
import * as Limits from "../core/Limits.ts"
import { ApiError, fieldInvalid, invalid } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { timestamp } from "../core/meta/Strategy.ts"
import { durationMs, parseTime } from "../core/StatusText.ts"
import { refOfKind } from "../kinds/Kinds.ts"
import { Store, type WriteOp } from "../store/Store.ts"

/** Records: token hash → the token object; credential hash → the Node. */
const tokensTable = "enrollmenttokens"
const credentialsTable = "agentcredentials"

const tokenPrefix = "nde_"
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")

/** A DNS-1123 label: what a Node's name must be. */
const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/u

const tokenInvalid = (why: string) =>
  new ApiError({ code: "EnrollmentTokenInvalid", message: `the enrollment token is not valid: ${why}` })

/** The EnrollmentToken's plugin: its token, shown once, and its status at create. */
export const enrollmentTokenPlugin: AdmissionPlugin = {
  name: "enrollmentToken",
  prepareCreate: (request) =>
    Effect.succeed({
      input: request.object,
      finish: (made: ResourceObject) =>
        Effect.gen(function*() {
          const token = `${tokenPrefix}${randomBytes(32).toString("base64url")}`
          const spec = isObject(made.spec) ? made.spec : {}
          const created = parseTime(made.metadata.creationTimestamp) ?? (yield* Clock.currentTimeMillis)
          const expiresAfter = durationMs(
            typeof spec["expiresAfter"] === "string" ? spec["expiresAfter"] : undefined,
            durationMs(Limits.enrollmentTokenExpiresAfterDefault, 0)
          )
          const status: JsonObject = {
            phase: "Active",
            expirationTime: timestamp(created + expiresAfter),
            uses: 0,
            nodes: []
          }
          const record = { namespace: made.metadata.namespace ?? "", name: made.metadata.name, uid: made.metadata.uid }
          return {
            result: { ...made, status: { ...(isObject(made.status) ? made.status : {}), ...status } },
            ops: [{ _tag: "PutRecord", table: tokensTable, id: sha256(token), value: record }] satisfies ReadonlyArray<
              WriteOp
            >,
            shownOnce: { token }
          }
        })
    })
}

export interface Enrolled {
  readonly namespace: string
  readonly node: string
  readonly pool: string
}

export interface EnrollInput {
  readonly token: string
  readonly node: string
  readonly hostname: string
  readonly credentialHash: string
}

export class Enrollment extends Context.Service<Enrollment, {
  readonly enroll: (input: EnrollInput) => Effect.Effect<Enrolled, ApiError>
  /** The Node an agent's key belongs to (EnrollmentTokenInvalid-free: a bad key is Unauthorized). */
  readonly authenticate: (
    credential: string
  ) => Effect.Effect<{ readonly namespace: string; readonly node: string }, ApiError>
}>()("nodus/runtime/Enrollment") {
  static readonly layer = Layer.effect(
    Enrollment,
    Effect.gen(function*() {
      const store = yield* Store
      const resources = yield* Resources
      const { group } = yield* ApiConfig
      const tokenRef = refOfKind(group, "EnrollmentToken")
      const nodeRef = refOfKind(group, "Node")
      const unavailable = () =>
        new ApiError({ code: "Unavailable", message: "the store is unavailable", retryAfterSeconds: 1 })

      const tokenOf = (token: string) =>
        Effect.gen(function*() {
          if (!token.startsWith(tokenPrefix)) return yield* tokenInvalid("it is not an enrollment token")
          const now = yield* Clock.currentTimeMillis
          const record = yield* store.getRecord(tokensTable, sha256(token), now).pipe(Effect.mapError(unavailable))
          if (Option.isNone(record) || !isObject(record.value)) return yield* tokenInvalid("no EnrollmentToken has it")
          const { namespace, name, uid } = record.value as { namespace: string; name: string; uid: string }
          const object = yield* store.get({ resource: tokenRef.info.plural, namespace, name }).pipe(
            Effect.mapError(unavailable)
          )
          if (
            Option.isNone(object) || object.value.metadata.uid !== uid ||
            object.value.metadata.deletionTimestamp !== undefined
          ) return yield* tokenInvalid("its EnrollmentToken was deleted")
          const status = isObject(object.value.status) ? object.value.status : {}
          const spec = isObject(object.value.spec) ? object.value.spec : {}
          const expiration = parseTime(
            typeof status["expirationTime"] === "string" ? status["expirationTime"] : undefined
          )
          if (expiration !== undefined && expiration <= now) {
            return yield* tokenInvalid(`it expired at ${status["expirationTime"]}`)
          }
          const uses = typeof status["uses"] === "number" ? status["uses"] : 0
          const maxUses = typeof spec["maxUses"] === "number" ? spec["maxUses"] : Limits.enrollmentTokenMaxUsesDefault
          if (uses >= maxUses) return yield* tokenInvalid(`it has enrolled ${uses} of its ${maxUses} hosts`)
          return { object: object.value, namespace, pool: String(spec["pool"] ?? ""), uses, maxUses, status }
        })

      const enroll = (input: EnrollInput) =>
        Effect.gen(function*() {
          const subject = { kind: "Node", name: input.node }
          if (!dnsLabel.test(input.node)) {
            return yield* invalid(subject, [
              fieldInvalid(
                "node",
                `Invalid value: "${input.node}": a Node's name must be a DNS label (lowercase letters, digits and '-')`
              )
            ], "Node")
          }
          if (!/^[0-9a-f]{64}$/u.test(input.credentialHash)) {
            return yield* invalid(subject, [
              fieldInvalid("credentialHash", "Invalid value: must be the SHA-256 of the agent's key, in hex")
            ], "Node")
          }
          const token = yield* tokenOf(input.token)
          const uses = token.uses + 1
          const nodes = [
            ...(Array.isArray(token.status["nodes"]) ? token.status["nodes"] as ReadonlyArray<Json> : []),
            input.node
          ]
          const used = {
            ...token.object,
            status: { ...token.status, uses, nodes, phase: uses >= token.maxUses ? "Exhausted" : "Active" }
          } as ResourceObject
          const body = {
            apiVersion: nodeRef.apiVersion,
            kind: "Node",
            metadata: { name: input.node, namespace: token.namespace },
            spec: { pool: token.pool, hostname: input.hostname }
          }
          const created = yield* resources.create(nodeRef, token.namespace, body, {
            dryRun: false,
            fieldValidation: "Strict",
            fieldManager: "nodus-enrollment",
            commitWith: () => [
              {
                _tag: "Update",
                key: { resource: tokenRef.info.plural, namespace: token.namespace, name: token.object.metadata.name },
                object: used,
                previous: token.object,
                expectedRv: token.object.metadata.resourceVersion
              }
            ]
          })
          // The credential names the Node by uid: a Node deleted and enrolled again under its name is another Node.
          const credential = { namespace: token.namespace, node: input.node, uid: created.object.metadata.uid }
          yield* store.commit([{
            _tag: "PutRecord",
            table: credentialsTable,
            id: input.credentialHash,
            value: credential
          }]).pipe(Effect.mapError(unavailable))
          return { namespace: token.namespace, node: input.node, pool: token.pool }
        })

      const authenticate = (credential: string) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const refused = new ApiError({
            code: "Unauthorized",
            message: "the agent's key is not known: enroll the host again with a new EnrollmentToken"
          })
          const record = yield* store.getRecord(credentialsTable, sha256(credential), now).pipe(
            Effect.mapError(unavailable)
          )
          if (Option.isNone(record) || !isObject(record.value)) return yield* refused
          const { namespace, node, uid } = record.value as { namespace: string; node: string; uid: string }
          const object = yield* store.get({ resource: nodeRef.info.plural, namespace, name: node }).pipe(
            Effect.mapError(unavailable)
          )
          // A deleted Node's agent is refused from then on.
          if (
            Option.isNone(object) || object.value.metadata.uid !== uid ||
            object.value.metadata.deletionTimestamp !== undefined
          ) return yield* refused
          return { namespace, node }
        })

      return Enrollment.of({ enroll, authenticate })
    })
  )
}
