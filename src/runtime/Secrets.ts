/**
 * Secret values (spec: Conventions 6; Secret). A Secret's `spec.data` is write-only: on every write the server takes
 * the values out of the object and keeps them as a new version in the store's record table, in the same commit; the
 * object keeps only its keys and versions (`status.versions`, `status.latestVersion`). So values never reach a read,
 * a list, a watch event, the change log, a log line or an error message.
 *
 * Nor may a value come back through the object's metadata: kubectl's client-side apply copies the whole manifest into
 * the last-applied annotation, so a Secret write keeps only the manifest's identity, metadata and type there
 * (`scrubLastApplied`), and a label or annotation holding a value the write carries is refused (`valuesInMetadata`).
 * The version records themselves are sealed with the server's key (SecretCipher.ts), so a dump of the store holds no
 * value either (docs/secrets.md).
 *
 * Two admission rules read the values: a workload's secret mounts without a version pin the latest one at admission
 * (`status.secretVersions`), and a literal env value equal to a current secret value of the project is refused
 * (SecretValueInEnv) without ever echoing the value. That refusal answers whether a string is a secret value, so it
 * names the entry, Secret and key only to a caller who may read Secrets, and a caller's guesses are bounded
 * (GuessBudget.ts).
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { grants, type Principal } from "../apiserver/Auth.ts"
import type { WorkloadProgram } from "../core/capacity/Capacity.ts"
import { equals, isArray, isObject, type Json, type JsonObject } from "../core/Json.ts"
import { ApiError, type Cause, describe, fieldForbidden, invalid, type Subject } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { adminScope } from "../core/meta/Scopes.ts"
import { timestamp } from "../core/meta/Strategy.ts"
import { byPluralName } from "../kinds/Kinds.ts"
import { Store, type WriteOp } from "../store/Store.ts"
import { guessesPerWindow, makeGuessBudget } from "./GuessBudget.ts"
import { isSealed, SecretCipher } from "./SecretCipher.ts"

/** The record table of secret values: one record per Secret uid and version. */
export const secretValuesTable = "secretvalues"

const recordId = (uid: string, version: number): string => `${uid}/${version}`

const storeUnavailable = () =>
  new ApiError({ code: "Unavailable", message: "the secret store is unavailable", retryAfterSeconds: 1 })

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

/** Secret values as a program receives them (never stored, logged or shown). */
export interface ResolvedProgram {
  readonly env: Readonly<Record<string, string>>
  readonly secretFiles: ReadonlyArray<{ readonly name: string; readonly contentBase64: string }>
  /** Every value given, so what the program says can be scrubbed of them. */
  readonly secretValues: ReadonlyArray<string>
}

/** A Secret's key becomes an env var of that name where it is one. */
const envName = /^[A-Za-z_][A-Za-z0-9_]*$/u

/** A Secret write's body split into the object without values and the values (`spec.data`), if any. */
export const splitData = (body: JsonObject): { readonly body: JsonObject; readonly data: JsonObject | undefined } => {
  const spec = body["spec"]
  if (!isObject(spec) || !isObject(spec["data"])) return { body, data: undefined }
  const { data, ...rest } = spec
  return { body: { ...body, spec: rest }, data: data as JsonObject }
}

/** Where kubectl's client-side apply keeps the manifest it applied (`kubectl apply`, `create --save-config`). */
export const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

const annotationsOf = (body: JsonObject): JsonObject => {
  const metadata = body["metadata"]
  return isObject(metadata) && isObject(metadata["annotations"]) ? metadata["annotations"] : {}
}

/**
 * What a Secret keeps of a manifest kubectl applied: identity, metadata and `spec.type`. The rest goes: `spec.data`,
 * and any field the schema does not know, which a write with fieldValidation Ignore or Warn drops from the object but
 * kubectl still copies into the annotation (a Kubernetes Secret's top-level `data` or `stringData`, say).
 */
const appliedWithoutValues = (applied: JsonObject): JsonObject => {
  const kept = Object.fromEntries(
    ["apiVersion", "kind", "metadata"].flatMap((
      field
    ) => (applied[field] === undefined ? [] : [[field, applied[field]!]]))
  )
  const spec = applied["spec"]
  if (!isObject(spec)) return kept
  return { ...kept, spec: spec["type"] === undefined ? {} : { type: spec["type"] } }
}

/**
 * A Secret write's body with the values taken out of kubectl's last-applied annotation (`appliedWithoutValues`).
 * kubectl reads the annotation only to find the fields a manifest stopped declaring; the stored Secret never has
 * `data`, so every apply sends the manifest's whole `data` again, and the annotation loses nothing kubectl needs
 * (docs/secrets.md). An annotation that is not a JSON object is left to `valuesInMetadata`.
 */
export const scrubLastApplied = (body: JsonObject): JsonObject => {
  const annotations = annotationsOf(body)
  const text = annotations[lastAppliedAnnotation]
  if (typeof text !== "string") return body
  let applied: Json
  try {
    applied = JSON.parse(text) as Json
  } catch {
    return body
  }
  if (!isObject(applied)) return body
  // kubectl ends the annotation with a newline; kept so that the text stays what kubectl would write.
  const scrubbed = `${JSON.stringify(appliedWithoutValues(applied))}${text.endsWith("\n") ? "\n" : ""}`
  const metadata = body["metadata"] as JsonObject
  return { ...body, metadata: { ...metadata, annotations: { ...annotations, [lastAppliedAnnotation]: scrubbed } } }
}

/** Whether `text`, or a string anywhere inside it when it is JSON (a manifest kept by a tool), is one of `values`. */
const holdsValue = (text: string, values: ReadonlySet<string>): boolean => {
  if (values.has(text)) return true
  let parsed: Json
  try {
    parsed = JSON.parse(text) as Json
  } catch {
    return false
  }
  const holds = (value: Json): boolean =>
    typeof value === "string"
      ? values.has(value)
      : isArray(value)
      ? value.some(holds)
      : isObject(value)
      ? Object.values(value).some(holds)
      : false
  return holds(parsed)
}

/**
 * Labels and annotations of a Secret write that hold one of the values it writes: anyone with secrets:read reads
 * them. Only the write's own values are compared (the caller knows them), so the answer teaches nothing; comparing
 * with stored values would tell a writer whether its guess is one.
 */
export const valuesInMetadata = (body: JsonObject, data: JsonObject): ReadonlyArray<Cause> => {
  const values = new Set(
    Object.values(data).filter((value): value is string => typeof value === "string" && value !== "")
  )
  const metadata = isObject(body["metadata"]) ? body["metadata"] : {}
  return (["labels", "annotations"] as const).flatMap((field) => {
    const entries = isObject(metadata[field]) ? Object.entries(metadata[field]) : []
    return entries.flatMap(([key, text]) =>
      typeof text === "string" && holdsValue(text, values)
        ? [
          fieldForbidden(
            `metadata.${field}[${key}]`,
            "Forbidden: holds a value of spec.data; secret values are write-only and never kept in metadata"
          )
        ]
        : []
    )
  })
}

/** Every literal env value of a spec, with its field path (env lists at any depth: sidecars, templates, …). */
export const literalEnv = (
  value: Json | undefined,
  path: string
): ReadonlyArray<{ readonly field: string; readonly value: string }> => {
  if (isArray(value)) return value.flatMap((item, index) => literalEnv(item, `${path}[${index}]`))
  if (!isObject(value)) return []
  return Object.entries(value).flatMap(([key, child]) => {
    const field = `${path}.${key}`
    if (key === "env" && isArray(child)) {
      return child.flatMap((variable, index) =>
        isObject(variable) && typeof variable["value"] === "string" && variable["value"] !== ""
          ? [{ field: `${field}[${index}].value`, value: variable["value"] }]
          : []
      )
    }
    return literalEnv(child, field)
  })
}

/** The secret mounts of a spec: `secrets` lists, at the top of the spec. */
const mountsOf = (
  spec: Json | undefined
): ReadonlyArray<{ readonly index: number; readonly name: string; readonly version: number | undefined }> => {
  const secrets = isObject(spec) ? spec["secrets"] : undefined
  if (!isArray(secrets)) return []
  return secrets.flatMap((mount, index) => {
    if (typeof mount === "string") return [{ index, name: mount, version: undefined }]
    if (!isObject(mount) || typeof mount["name"] !== "string") return []
    return [{
      index,
      name: mount["name"],
      version: typeof mount["version"] === "number" ? mount["version"] : undefined
    }]
  })
}

/**
 * Scope prefix of Secrets (docs/auth.md): `secrets:read` reads Secret objects, which hold names and keys, never values.
 */
const secretsScope = byPluralName("secrets")?.scopePrefix ?? "secrets"

/** Whether a refusal may name the Secret and key a literal matched: the caller may read Secrets (the server may). */
const mayReadSecrets = (principal: Principal | undefined): boolean =>
  principal === undefined || grants(principal.scopes, secretsScope, "read")

/** Whose literals count as guesses: every key but the admin's; the server's own writes are none. */
const guessing = (principal: Principal | undefined): principal is Principal =>
  principal !== undefined && !principal.scopes.has(adminScope)

interface Match {
  readonly field: string
  readonly secret: string
  readonly key: string
}

/** SecretValueInEnv naming each entry with the Secret and key it equals (never the value). */
const namedRefusal = (subject: Subject, matches: ReadonlyArray<Match>) => {
  const causes = matches.map((match) =>
    fieldForbidden(
      match.field,
      `Forbidden: the value equals the current value of Secret "${match.secret}" key "${match.key}"; reference it with valueFrom.secretKeyRef`
    )
  )
  return new ApiError({
    code: "SecretValueInEnv",
    message: `${describe(subject)} is invalid: ${causes.map((cause) => `${cause.field}: ${cause.message}`).join(", ")}`,
    causes,
    subject,
    fix: "Secrets are never carried as literal values: use env[].valueFrom.secretKeyRef {name, key} instead of value."
  })
}

/**
 * SecretValueInEnv for a caller who may not read Secrets: one cause, whatever matched and however many, so the answer
 * is a single bit about the whole write (and each guess in it was charged to the caller's budget).
 */
const unnamedRefusal = (subject: Subject) => {
  const cause = fieldForbidden("spec", "Forbidden: a literal env value equals a current secret value of this project")
  return new ApiError({
    code: "SecretValueInEnv",
    message: `${describe(subject)} is invalid: ${cause.field}: ${cause.message}`,
    causes: [cause],
    subject,
    fix:
      "Secrets are never carried as literal values: use env[].valueFrom.secretKeyRef {name, key} instead of value. A key with secrets:read is told which entry matched."
  })
}

const tooManyGuesses = (principal: Principal, retryAfterSeconds: number) =>
  new ApiError({
    code: "TooManyRequests",
    message:
      `${principal.name} has had ${guessesPerWindow} distinct literal env values compared with secret values within the hour`,
    retryAfterSeconds,
    fix:
      "Wait `details.retryAfterSeconds`; pass values that vary per workload through a Secret or a Connection rather than literal env values (docs/secrets.md)."
  })

export class Secrets extends Context.Service<Secrets, {
  /**
   * A Secret about to be written, its values (`data`) already taken out of it (`splitData`): a new version when they
   * changed, and the op that stores them sealed (committed with the object). `current` is the stored Secret on updates.
   */
  readonly prepareWrite: (
    object: ResourceObject,
    data: JsonObject | undefined,
    current: ResourceObject | undefined
  ) => Effect.Effect<{ readonly object: ResourceObject; readonly ops: ReadonlyArray<WriteOp> }, ApiError>
  /** Ops that delete every stored version of a Secret's values (committed with its removal). */
  readonly deleteOps: (secret: ResourceObject) => ReadonlyArray<WriteOp>
  /**
   * Refuses literal env values equal to a current secret value of the project (SecretValueInEnv), as `principal`
   * may be told (absent: the server's own write).
   */
  readonly checkEnv: (
    namespace: string,
    spec: Json | undefined,
    subject: Subject,
    principal: Principal | undefined
  ) => Effect.Effect<void, ApiError>
  /** The versions a workload's secret mounts pin at admission: mount name → version; a missing Secret is Invalid. */
  readonly pinVersions: (
    namespace: string,
    spec: Json | undefined,
    subject: Subject,
    kind: string
  ) => Effect.Effect<Record<string, number>, ApiError>
  /**
   * What a program receives when it starts (docs/secrets.md, "At run time"): each `secretKeyRef` as its env var (the
   * Secret's latest version), and each mounted Secret (at its pinned version) as env vars named by its keys and files
   * `/run/secrets/<secret>/<key>`. Fails with a message naming the Secret and key, never a value.
   */
  readonly resolveProgram: (namespace: string, workload: WorkloadProgram) => Effect.Effect<ResolvedProgram, ApiError>
}>()("nodus/runtime/Secrets") {
  static readonly layer = Layer.effect(
    Secrets,
    Effect.gen(function*() {
      const store = yield* Store
      const cipher = yield* SecretCipher
      const budget = makeGuessBudget()
      yield* sealPlainRecords(store, cipher)
      yield* scrubStoredSecrets(store)

      const latestValues = (secret: ResourceObject) =>
        Effect.gen(function*() {
          const latest = latestOf(secret)
          if (latest === 0) return undefined
          const id = recordId(secret.metadata.uid, latest)
          const record = yield* store.getRecord(secretValuesTable, id, 0).pipe(Effect.mapError(storeUnavailable))
          if (Option.isNone(record)) return undefined
          return yield* cipher.open(id, record.value, `Secret "${secret.metadata.name}" version ${latest}`)
        })

      const prepareWrite = (
        object: ResourceObject,
        data: JsonObject | undefined,
        current: ResourceObject | undefined
      ) =>
        Effect.gen(function*() {
          const previousVersions = versionsOf(current)
          const latest = latestOf(current)
          const carried = {
            ...(isObject(object.status) ? object.status : {}),
            versions: previousVersions as unknown as Json,
            latestVersion: latest
          }
          const kept = { ...object, status: carried } as ResourceObject
          if (data === undefined) return { object: kept, ops: [] }
          // Writing the same values again is not a new version (kubectl apply resends them on every apply). Values that
          // do not open (sealed under a lost key) are not the same: writing the data again is how a Secret recovers.
          const previous = current === undefined || latest === 0 ? undefined : yield* latestValues(current).pipe(
            Effect.catchIf((error) => error.code === "EncryptionFailed", () => Effect.succeed(undefined))
          )
          const unchanged = previous !== undefined && equals(previous, data)
          if (unchanged) return { object: kept, ops: [] }
          const version = latest + 1
          const now = yield* Clock.currentTimeMillis
          const entry: SecretVersion = { version, keys: Object.keys(data).sort(), createdTime: timestamp(now) }
          const status = {
            ...carried,
            versions: [...previousVersions, entry] as unknown as Json,
            latestVersion: version
          }
          // New values are a change of the spec, though the values themselves are not kept in it.
          const generation = current === undefined
            ? object.metadata.generation
            : Math.max(object.metadata.generation, current.metadata.generation + 1)
          const id = recordId(object.metadata.uid, version)
          return {
            object: { ...kept, metadata: { ...kept.metadata, generation }, status } as ResourceObject,
            ops: [{
              _tag: "PutRecord",
              table: secretValuesTable,
              id,
              value: cipher.seal(id, data)
            }] satisfies ReadonlyArray<WriteOp>
          }
        })

      const projectSecrets = (namespace: string) =>
        store.list({ resource: "secrets", namespace }).pipe(
          Effect.map((page) => page.items),
          Effect.mapError(storeUnavailable)
        )

      /** Each literal equal to a current value of a Secret of the project, with the Secret and key. */
      const matchesOf = (
        namespace: string,
        literals: ReadonlyArray<{ readonly field: string; readonly value: string }>
      ) =>
        Effect.gen(function*() {
          const matches: Array<Match> = []
          for (const secret of yield* projectSecrets(namespace)) {
            const values = (yield* latestValues(secret)) ?? {}
            for (const literal of literals) {
              const key = Object.keys(values).find((candidate) => values[candidate] === literal.value)
              if (key !== undefined) matches.push({ field: literal.field, secret: secret.metadata.name, key })
            }
          }
          return matches
        })

      /**
       * Charges a caller's literals to its budget before anything is compared, so the charge says nothing of secrets.
       */
      const chargeGuesses = (principal: Principal, values: ReadonlyArray<string>) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const retryAfter = budget.charge(principal.name, values, now)
          return retryAfter === undefined ? Effect.void : Effect.fail(tooManyGuesses(principal, retryAfter))
        })

      const checkEnv = (
        namespace: string,
        spec: Json | undefined,
        subject: Subject,
        principal: Principal | undefined
      ) =>
        Effect.gen(function*() {
          const literals = literalEnv(spec, "spec")
          if (literals.length === 0) return
          if (guessing(principal)) yield* chargeGuesses(principal, literals.map((literal) => literal.value))
          const matches = yield* matchesOf(namespace, literals)
          if (matches.length === 0) return
          return yield* (mayReadSecrets(principal) ? namedRefusal(subject, matches) : unnamedRefusal(subject))
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
            if (secret === undefined || latest === 0) {
              causes.push({
                field: `${field}.name`,
                reason: "FieldValueNotFound",
                message: `Not found: Secret "${mount.name}" has no version in this project`
              })
            } else if (
              mount.version !== undefined && !versionsOf(secret).some((entry) => entry.version === mount.version)
            ) {
              causes.push({
                field: `${field}.version`,
                reason: "FieldValueNotFound",
                message: `Not found: Secret "${mount.name}" has no version ${mount.version}`
              })
            } else pinned[mount.name] = mount.version ?? latest
          }
          if (causes.length > 0) return yield* invalid(subject, causes, kind)
          return pinned
        })

      const deleteOps = (secret: ResourceObject): ReadonlyArray<WriteOp> =>
        versionsOf(secret).map((entry) => ({
          _tag: "DeleteRecord",
          table: secretValuesTable,
          id: recordId(secret.metadata.uid, entry.version)
        }))

      const valuesAt = (namespace: string, name: string, version: number | undefined) =>
        Effect.gen(function*() {
          const secret = yield* store.get({ resource: "secrets", namespace, name }).pipe(
            Effect.mapError(storeUnavailable)
          )
          const wanted = version ?? latestOf(Option.getOrUndefined(secret))
          if (Option.isNone(secret) || wanted === 0) {
            return yield* Effect.fail(
              new ApiError({ code: "NotFound", message: `Secret "${name}" has no version in project ${namespace}` })
            )
          }
          const id = recordId(secret.value.metadata.uid, wanted)
          const record = yield* store.getRecord(secretValuesTable, id, 0).pipe(Effect.mapError(storeUnavailable))
          if (Option.isNone(record)) {
            return yield* Effect.fail(
              new ApiError({ code: "NotFound", message: `Secret "${name}" has no version ${wanted}` })
            )
          }
          return (yield* cipher.open(id, record.value, `Secret "${name}" version ${wanted}`)) as Readonly<
            Record<string, string>
          >
        })

      const resolveProgram = (namespace: string, workload: WorkloadProgram) =>
        Effect.gen(function*() {
          const env: Record<string, string> = {}
          const secretFiles: Array<{ name: string; contentBase64: string }> = []
          const secretValues = new Set<string>()
          for (const mount of workload.secrets) {
            const values = yield* valuesAt(namespace, mount.name, mount.version)
            for (const [key, value] of Object.entries(values)) {
              secretValues.add(value)
              if (envName.test(key)) env[key] = value
              secretFiles.push({
                name: `${mount.name}/${key}`,
                contentBase64: Buffer.from(value, "utf8").toString("base64")
              })
            }
          }
          for (const entry of workload.env) {
            if ("value" in entry) {
              env[entry.name] = entry.value
              continue
            }
            const values = yield* valuesAt(namespace, entry.secret, undefined)
            const value = values[entry.key]
            if (value === undefined) {
              return yield* Effect.fail(
                new ApiError({
                  code: "NotFound",
                  message: `Secret "${entry.secret}" has no key "${entry.key}" (env ${entry.name})`
                })
              )
            }
            env[entry.name] = value
            secretValues.add(value)
          }
          return { env, secretFiles, secretValues: [...secretValues] } satisfies ResolvedProgram
        })

      return Secrets.of({ prepareWrite, deleteOps, checkEnv, pinVersions, resolveProgram })
    })
  )
}

/** Seals the value records a server before encryption at rest stored in plain text, when a server starts. */
const sealPlainRecords = (store: Store["Service"], cipher: SecretCipher["Service"]) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    let after = ""
    for (;;) {
      const page = yield* store.records(secretValuesTable, after, 500, now)
      if (page.length === 0) return
      const ops = page.filter((entry) => !isSealed(entry.value) && isObject(entry.value))
        .map((entry): WriteOp => ({
          _tag: "PutRecord",
          table: secretValuesTable,
          id: entry.id,
          value: cipher.seal(entry.id, entry.value as JsonObject)
        }))
      if (ops.length > 0) yield* store.commit(ops)
      after = page.at(-1)!.id
    }
  })

/**
 * Scrubs the last-applied annotation of Secrets a server before `scrubLastApplied` stored with their values, when a
 * server starts: from then on no read, list or watch shows them. (Change-log entries written before keep the old
 * annotation until the log's retention drops them; docs/secrets.md.)
 */
const scrubStoredSecrets = (store: Store["Service"]) =>
  Effect.gen(function*() {
    let after: { readonly namespace: string; readonly name: string } | undefined
    for (;;) {
      const page = yield* store.list({ resource: "secrets", limit: 500, ...(after === undefined ? {} : { after }) })
      if (page.items.length === 0) return
      const ops = page.items.flatMap((secret): ReadonlyArray<WriteOp> => {
        const scrubbed = scrubLastApplied(secret as unknown as JsonObject) as unknown as ResourceObject
        if (equals(scrubbed as unknown as Json, secret as unknown as Json)) return []
        const key = { resource: "secrets", namespace: secret.metadata.namespace ?? "", name: secret.metadata.name }
        return [{
          _tag: "Update",
          key,
          object: scrubbed,
          previous: secret,
          expectedRv: secret.metadata.resourceVersion
        }]
      })
      // One commit each: a Secret written meanwhile was scrubbed by its own write, and its conflict here loses nothing.
      yield* Effect.forEach(ops, (op) => Effect.ignore(store.commit([op])), { discard: true })
      const last = page.items.at(-1)!
      after = { namespace: last.metadata.namespace ?? "", name: last.metadata.name }
    }
  })
