/**
 * Secret values (spec: Conventions 6; Secret). A Secret's `spec.data` is write-only: on every write the server takes
 * the values out of the object and keeps them as a new version in the store's record table, in the same commit; the
 * object keeps only its keys and versions (`status.versions`, `status.latestVersion`). So values never reach a read,
 * a list, a watch event, the change log, a log line or an error message.
 *
 * Two admission rules read the values: a workload's secret mounts without a version pin the latest one at admission
 * (`status.secretVersions`), and a literal env value equal to a current secret value of the project is refused
 * (SecretValueInEnv) without ever echoing the value.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { ApiError, type Cause, describe, fieldForbidden, invalid, type Subject } from "../core/meta/ApiError.ts"
import { equals, isArray, isObject, type Json, type JsonObject } from "../core/Json.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { timestamp } from "../core/meta/Strategy.ts"
import { Store, type WriteOp } from "../store/Store.ts"

/** The record table of secret values: one record per Secret uid and version. */
export const secretValuesTable = "secretvalues"

const recordId = (uid: string, version: number): string => `${uid}/${version}`

const storeUnavailable = () => new ApiError({ code: "Unavailable", message: "the secret store is unavailable", retryAfterSeconds: 1 })

interface SecretVersion {
  readonly version: number
  readonly keys: ReadonlyArray<string>
  readonly createdTime: string
}

const versionsOf = (secret: ResourceObject | undefined): ReadonlyArray<SecretVersion> => {
  const status = secret?.status
  const versions = isObject(status) ? status["versions"] : undefined
  return isArray(versions) ? (versions.filter(isObject) as unknown as ReadonlyArray<SecretVersion>) : []
}

const latestOf = (secret: ResourceObject | undefined): number => {
  const status = secret?.status
  const latest = isObject(status) ? status["latestVersion"] : undefined
  return typeof latest === "number" ? latest : 0
}

/** A Secret write's body split into the object without values and the values (`spec.data`), if any. */
export const splitData = (body: JsonObject): { readonly body: JsonObject; readonly data: JsonObject | undefined } => {
  const spec = body["spec"]
  if (!isObject(spec) || !isObject(spec["data"])) return { body, data: undefined }
  const { data, ...rest } = spec
  return { body: { ...body, spec: rest }, data: data as JsonObject }
}

/** Every literal env value of a spec, with its field path (env lists at any depth: sidecars, templates, …). */
export const literalEnv = (value: Json | undefined, path: string): ReadonlyArray<{ readonly field: string; readonly value: string }> => {
  if (isArray(value)) return value.flatMap((item, index) => literalEnv(item, `${path}[${index}]`))
  if (!isObject(value)) return []
  return Object.entries(value).flatMap(([key, child]) => {
    const field = `${path}.${key}`
    if (key === "env" && isArray(child)) {
      return child.flatMap((variable, index) =>
        isObject(variable) && typeof variable["value"] === "string" && variable["value"] !== "" ? [{ field: `${field}[${index}].value`, value: variable["value"] }] : [])
    }
    return literalEnv(child, field)
  })
}

/** The secret mounts of a spec: `secrets` lists, at the top of the spec. */
const mountsOf = (spec: Json | undefined): ReadonlyArray<{ readonly index: number; readonly name: string; readonly version: number | undefined }> => {
  const secrets = isObject(spec) ? spec["secrets"] : undefined
  if (!isArray(secrets)) return []
  return secrets.flatMap((mount, index) => {
    if (typeof mount === "string") return [{ index, name: mount, version: undefined }]
    if (!isObject(mount) || typeof mount["name"] !== "string") return []
    return [{ index, name: mount["name"], version: typeof mount["version"] === "number" ? mount["version"] : undefined }]
  })
}

export class Secrets extends Context.Service<Secrets, {
  /**
   * A Secret about to be written, its values (`data`) already taken out of it (`splitData`): a new version when they
   * changed, and the op that stores them (committed with the object). `current` is the stored Secret on updates.
   */
  readonly prepareWrite: (object: ResourceObject, data: JsonObject | undefined, current: ResourceObject | undefined) => Effect.Effect<{ readonly object: ResourceObject; readonly ops: ReadonlyArray<WriteOp> }, ApiError>
  /** Ops that delete every stored version of a Secret's values (committed with its removal). */
  readonly deleteOps: (secret: ResourceObject) => ReadonlyArray<WriteOp>
  /** Refuses literal env values equal to a current secret value of the project (SecretValueInEnv). */
  readonly checkEnv: (namespace: string, spec: Json | undefined, subject: Subject) => Effect.Effect<void, ApiError>
  /** The versions a workload's secret mounts pin at admission: mount name → version; a missing Secret is Invalid. */
  readonly pinVersions: (namespace: string, spec: Json | undefined, subject: Subject, kind: string) => Effect.Effect<Record<string, number>, ApiError>
}>()("nodus/server/Secrets") {
  static readonly layer = Layer.effect(Secrets, Effect.gen(function*() {
    const store = yield* Store

    const latestValues = (secret: ResourceObject) => Effect.gen(function*() {
      const latest = latestOf(secret)
      if (latest === 0) return undefined
      const record = yield* store.getRecord(secretValuesTable, recordId(secret.metadata.uid, latest), 0).pipe(Effect.mapError(storeUnavailable))
      return Option.isSome(record) && isObject(record.value) ? record.value : undefined
    })

    const prepareWrite = (object: ResourceObject, data: JsonObject | undefined, current: ResourceObject | undefined) => Effect.gen(function*() {
      const previousVersions = versionsOf(current)
      const latest = latestOf(current)
      const carried = { ...(isObject(object.status) ? object.status : {}), versions: previousVersions as unknown as Json, latestVersion: latest }
      const kept = { ...object, status: carried } as ResourceObject
      if (data === undefined) return { object: kept, ops: [] }
      // Writing the same values again is not a new version (kubectl apply resends them on every apply).
      const unchanged = current !== undefined && latest > 0 && equals((yield* latestValues(current)) ?? null, data)
      if (unchanged) return { object: kept, ops: [] }
      const version = latest + 1
      const now = yield* Clock.currentTimeMillis
      const entry: SecretVersion = { version, keys: Object.keys(data).sort(), createdTime: timestamp(now) }
      const status = { ...carried, versions: [...previousVersions, entry] as unknown as Json, latestVersion: version }
      // New values are a change of the spec, though the values themselves are not kept in it.
      const generation = current === undefined ? object.metadata.generation : Math.max(object.metadata.generation, current.metadata.generation + 1)
      return {
        object: { ...kept, metadata: { ...kept.metadata, generation }, status } as ResourceObject,
        ops: [{ _tag: "PutRecord", table: secretValuesTable, id: recordId(object.metadata.uid, version), value: data }] satisfies ReadonlyArray<WriteOp>
      }
    })

    const projectSecrets = (namespace: string) =>
      store.list({ resource: "secrets", namespace }).pipe(Effect.map((page) => page.items), Effect.mapError(storeUnavailable))

    const checkEnv = (namespace: string, spec: Json | undefined, subject: Subject) =>
      Effect.gen(function*() {
        const literals = literalEnv(spec, "spec")
        if (literals.length === 0) return
        const causes: Array<Cause> = []
        for (const secret of yield* projectSecrets(namespace)) {
          const values = (yield* latestValues(secret)) ?? {}
          for (const literal of literals) {
            const key = Object.keys(values).find((candidate) => values[candidate] === literal.value)
            // The message names the Secret and key, never the value.
            if (key !== undefined) causes.push(fieldForbidden(literal.field, `Forbidden: the value equals the current value of Secret "${secret.metadata.name}" key "${key}"; reference it with valueFrom.secretKeyRef`))
          }
        }
        if (causes.length > 0) {
          return yield* new ApiError({
            code: "SecretValueInEnv",
            message: `${describe(subject)} is invalid: ${causes.map((cause) => `${cause.field}: ${cause.message}`).join(", ")}`,
            causes,
            subject,
            fix: "Secrets are never carried as literal values: use env[].valueFrom.secretKeyRef {name, key} instead of value."
          })
        }
      })

    const pinVersions = (namespace: string, spec: Json | undefined, subject: Subject, kind: string) =>
      Effect.gen(function*() {
        const mounts = mountsOf(spec)
        if (mounts.length === 0) return {}
        const secrets = new Map((yield* projectSecrets(namespace)).map((secret) => [secret.metadata.name, secret]))
        const pinned: Record<string, number> = {}
        const causes: Array<Cause> = []
        for (const mount of mounts) {
          const secret = secrets.get(mount.name)
          const latest = latestOf(secret)
          const field = `spec.secrets[${mount.index}]`
          if (secret === undefined || latest === 0) causes.push({ field: `${field}.name`, reason: "FieldValueNotFound", message: `Not found: Secret "${mount.name}" has no version in this project` })
          else if (mount.version !== undefined && !versionsOf(secret).some((entry) => entry.version === mount.version)) causes.push({ field: `${field}.version`, reason: "FieldValueNotFound", message: `Not found: Secret "${mount.name}" has no version ${mount.version}` })
          else pinned[mount.name] = mount.version ?? latest
        }
        if (causes.length > 0) return yield* invalid(subject, causes, kind)
        return pinned
      })

    const deleteOps = (secret: ResourceObject): ReadonlyArray<WriteOp> =>
      versionsOf(secret).map((entry) => ({ _tag: "DeleteRecord", table: secretValuesTable, id: recordId(secret.metadata.uid, entry.version) }))

    return Secrets.of({ prepareWrite, deleteOps, checkEnv, pinVersions })
  }))
}
