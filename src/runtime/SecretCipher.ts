/**
 * Secret values at rest (docs/secrets.md, "Encryption at rest"). The spec asks that secrets never be carried as
 * literal values (Conventions 6) and does not say how they are stored; users expect a database dump or backup not to
 * hold them. So every version record of a Secret's values (Secrets.ts, table `secretvalues`) is sealed with
 * AES-256-GCM under the server's secret key: NODUS_SECRET_KEY, or a key generated once into `<data dir>/secrets.key`
 * (src/server/Bootstrap.ts). The record id (Secret uid and version) is the additional authenticated data, so a sealed
 * record copied onto another Secret or version does not open.
 *
 * A sealed record names its key by id (an HMAC of a fixed label under the key: it tells keys apart and says nothing
 * of them). The store keeps the id of the key its values were sealed with, and a server started with another key
 * refuses to start rather than fail on every Secret (or, beside other servers, seal values they cannot open).
 */
import { Context, Data, Effect, Layer, Option } from "effect"
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto"
import { isObject, type Json, type JsonObject } from "../core/Json.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import { Store, type StoreError } from "../store/Store.ts"

/** Bytes of the secret key (AES-256). */
export const secretKeyBytes = 32

/** Bytes of a GCM nonce (NIST SP 800-38D: 96 bits), fresh for every record. */
const ivBytes = 12

/** The member that marks a sealed record. `$` is outside the secret-key grammar, so no plaintext map has it. */
const sealedMarker = "$sealed"
const sealedVersion = "aes-256-gcm/1"

/** Where the store keeps the id of the key its values are sealed with (the table of bootstrap records). */
export const keyRecordTable = "bootstrap"
export const keyRecordId = "secret-key"

/** The id of a key: short, stable, and useless to anyone without the key. */
export const keyIdOf = (key: Uint8Array): string =>
  createHmac("sha256", key).update("nodus/secret-key-id/1").digest("hex").slice(0, 16)

const aadOf = (id: string): Buffer => Buffer.from(`nodus/secret-values/1\n${id}`)

/** Whether a stored record is sealed (records written before encryption at rest are plain maps). */
export const isSealed = (value: Json): boolean => isObject(value) && value[sealedMarker] === sealedVersion

/** The record that stores `data` as record `id`, sealed with `key`. */
export const seal = (key: Uint8Array, id: string, data: JsonObject): JsonObject => {
  const iv = randomBytes(ivBytes)
  const cipher = createCipheriv("aes-256-gcm", key, iv).setAAD(aadOf(id))
  const sealed = Buffer.concat([cipher.update(JSON.stringify(data), "utf8"), cipher.final(), cipher.getAuthTag()])
  return {
    [sealedMarker]: sealedVersion,
    key: keyIdOf(key),
    iv: iv.toString("base64"),
    data: sealed.toString("base64")
  }
}

/** Why a record does not open: another key sealed it, or it was altered (or moved to another id). */
export type OpenFailure = { readonly _tag: "OtherKey"; readonly keyId: string } | { readonly _tag: "Corrupt" }

/** The values record `id` holds: sealed ones opened with `key`, plain ones (written before sealing) as they are. */
export const open = (
  key: Uint8Array,
  id: string,
  value: Json
): { readonly _tag: "Opened"; readonly data: JsonObject } | OpenFailure => {
  if (!isSealed(value)) return isObject(value) ? { _tag: "Opened", data: value } : { _tag: "Corrupt" }
  const record = value as JsonObject
  if (record["key"] !== keyIdOf(key)) return { _tag: "OtherKey", keyId: String(record["key"]) }
  try {
    const sealed = Buffer.from(String(record["data"]), "base64")
    const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(String(record["iv"]), "base64")).setAAD(aadOf(id))
    decipher.setAuthTag(sealed.subarray(sealed.length - 16))
    const text = Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - 16)), decipher.final()]).toString(
      "utf8"
    )
    const data = JSON.parse(text) as Json
    return isObject(data) ? { _tag: "Opened", data } : { _tag: "Corrupt" }
  } catch {
    return { _tag: "Corrupt" }
  }
}

/** The server was started with another key than the one the store's values are sealed with. */
export class SecretKeyMismatch extends Data.TaggedError("SecretKeyMismatch")<{ readonly message: string }> {}

const mismatch = (stored: string, held: string) =>
  new SecretKeyMismatch({
    message: `the secret values in the store are sealed with key id ${stored}, and this server holds key id ${held}: ` +
      `start it with the NODUS_SECRET_KEY (or <data dir>/secrets.key) they were written with (docs/secrets.md)`
  })

/** What a reader of values is told when a record does not open (500 EncryptionFailed; never a value). */
const openFailed = (label: string, failure: OpenFailure, held: string) =>
  new ApiError({
    code: "EncryptionFailed",
    message: failure._tag === "OtherKey"
      ? `the values of ${label} are sealed with key id ${failure.keyId}, and this server holds key id ${held}`
      : `the values of ${label} could not be decrypted: the record was altered or does not belong to this Secret version`,
    fix:
      "Start every server with the NODUS_SECRET_KEY the values were written with (docs/secrets.md); if the key is lost, write the Secret's data again."
  })

export class SecretCipher extends Context.Service<SecretCipher, {
  /** The record value that stores `data` as record `id`. */
  readonly seal: (id: string, data: JsonObject) => JsonObject
  /** The values of record `id`; `label` names the Secret version in the error when it does not open. */
  readonly open: (id: string, value: Json, label: string) => Effect.Effect<JsonObject, ApiError>
}>()("nodus/runtime/SecretCipher") {
  /**
   * The cipher over `key`. Building it checks the key against the one the store's values are sealed with, and
   * records this one on first start.
   */
  static readonly layer = (key: Uint8Array) =>
    Layer.effect(
      SecretCipher,
      Effect.gen(function*() {
        const store = yield* Store
        const held = keyIdOf(key)
        yield* checkKey(store, held)
        return SecretCipher.of({
          seal: (id, data) => seal(key, id, data),
          open: (id, value, label) => {
            const opened = open(key, id, value)
            return opened._tag === "Opened" ? Effect.succeed(opened.data) : Effect.fail(openFailed(label, opened, held))
          }
        })
      })
    )
}

/** Records this key's id when the store has none yet; fails when it has another's. */
const checkKey = (store: Store["Service"], held: string): Effect.Effect<void, SecretKeyMismatch | StoreError> =>
  Effect.gen(function*() {
    const stored = yield* store.getRecord(keyRecordTable, keyRecordId, 0)
    if (Option.isSome(stored)) {
      if (stored.value !== held) return yield* mismatch(String(stored.value), held)
      return
    }
    // Another server over the same store may record its key first (RecordExists): then ours must be the same.
    yield* store.commit([{ _tag: "PutRecord", table: keyRecordTable, id: keyRecordId, value: held, ifAbsent: true }])
      .pipe(
        Effect.catchTag("CommitFailed", () => checkKey(store, held))
      )
  })
