// Secret values at rest (src/runtime/SecretCipher.ts; docs/secrets.md, "Encryption at rest"): a value record is
// sealed with AES-256-GCM under the server's key and bound to its record id; it opens with that key alone; a store
// remembers the key its values are sealed with and refuses another; the plain records of an older server are sealed
// when a server starts.
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Option } from "effect"
import type { ResourceObject } from "../../src/core/meta/ObjectMeta.ts"
import { isSealed, keyIdOf, open, seal, SecretCipher } from "../../src/runtime/SecretCipher.ts"
import { Secrets, secretValuesTable } from "../../src/runtime/Secrets.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { Store } from "../../src/store/Store.ts"

const key = Buffer.alloc(32, 1)
const otherKey = Buffer.alloc(32, 2)
const data = { password: "s3cr3t-at-rest-0a1b", user: "app" }

describe("sealing a value record", () => {
  it("holds no plaintext and opens to the same values with the same key and id", () => {
    const sealed = seal(key, "uid-1/1", data)
    assert.isTrue(isSealed(sealed))
    assert.notInclude(JSON.stringify(sealed), "s3cr3t")
    assert.notInclude(JSON.stringify(sealed), "password")
    assert.deepStrictEqual(open(key, "uid-1/1", sealed), { _tag: "Opened", data })
    assert.notDeepEqual(seal(key, "uid-1/1", data), sealed, "a fresh nonce every time")
  })

  it("does not open with another key, under another record id, or altered", () => {
    const sealed = seal(key, "uid-1/1", data)
    assert.deepStrictEqual(open(otherKey, "uid-1/1", sealed), { _tag: "OtherKey", keyId: keyIdOf(key) })
    assert.deepStrictEqual(open(key, "uid-2/1", sealed), { _tag: "Corrupt" })
    const bytes = Buffer.from(String(sealed["data"]), "base64")
    bytes[0] = bytes[0]! ^ 1
    assert.deepStrictEqual(open(key, "uid-1/1", { ...sealed, data: bytes.toString("base64") }), { _tag: "Corrupt" })
  })

  it("reads a plain record an older server wrote as it is", () => {
    assert.deepStrictEqual(open(key, "uid-1/1", data), { _tag: "Opened", data })
  })
})

describe("the cipher over a store", () => {
  it.effect("records its key on first start and refuses to start with another", () =>
    Effect.gen(function*() {
      const store = yield* Store
      const over = (withKey: Uint8Array) =>
        Layer.build(SecretCipher.layer(withKey).pipe(Layer.provide(Layer.succeed(Store, store))))
      yield* over(key)
      yield* over(key)
      const refused = yield* Effect.exit(over(otherKey))
      assert.isTrue(Exit.isFailure(refused))
      const message = Exit.isFailure(refused) ? String(Cause.squash(refused.cause)) : ""
      assert.include(message, `sealed with key id ${keyIdOf(key)}`)
      assert.include(message, `this server holds key id ${keyIdOf(otherKey)}`)
      assert.include(message, "NODUS_SECRET_KEY")
    }).pipe(Effect.provide(Layer.fresh(MemoryStore.layer))))

  it.effect("fails a read clearly (EncryptionFailed, no value) when a record was sealed with another key", () =>
    Effect.gen(function*() {
      const cipher = yield* SecretCipher
      const failed = yield* Effect.flip(
        cipher.open("uid-1/1", seal(otherKey, "uid-1/1", data), `Secret "db" version 1`)
      )
      assert.strictEqual(failed.code, "EncryptionFailed")
      assert.include(failed.message, `Secret "db" version 1`)
      assert.include(failed.message, keyIdOf(otherKey))
      assert.notInclude(failed.message, "s3cr3t")
    }).pipe(Effect.provide(SecretCipher.layer(key).pipe(Layer.provide(Layer.fresh(MemoryStore.layer))))))

  it.effect("seals the plain records an older server left when the secrets service starts", () =>
    Effect.gen(function*() {
      const store = yield* Store
      yield* store.commit([{ _tag: "PutRecord", table: secretValuesTable, id: "uid-1/1", value: data }])
      yield* Layer.build(
        Secrets.layer.pipe(Layer.provide(SecretCipher.layer(key)), Layer.provide(Layer.succeed(Store, store)))
      )
      const stored = Option.getOrThrow(yield* store.getRecord(secretValuesTable, "uid-1/1", 0))
      assert.isTrue(isSealed(stored))
      assert.notInclude(JSON.stringify(stored), "s3cr3t")
      assert.deepStrictEqual(open(key, "uid-1/1", stored), { _tag: "Opened", data })
    }).pipe(Effect.provide(Layer.fresh(MemoryStore.layer))))

  it.effect("a Secret whose values do not open fails admission clearly, and recovers when its data is written again", () =>
    Effect.gen(function*() {
      const store = yield* Store
      const secrets = yield* Secrets
      const secret: ResourceObject = {
        apiVersion: "nodus.dev/v1",
        kind: "Secret",
        metadata: {
          name: "db",
          namespace: "p",
          uid: "uid-1",
          resourceVersion: "2",
          generation: 1,
          creationTimestamp: "2026-01-01T00:00:00Z"
        },
        spec: { type: "Opaque" },
        status: { latestVersion: 1, versions: [{ version: 1, keys: ["password", "user"] }] }
      }
      yield* store.commit([
        { _tag: "Create", key: { resource: "secrets", namespace: "p", name: "db" }, object: secret },
        { _tag: "PutRecord", table: secretValuesTable, id: "uid-1/1", value: seal(otherKey, "uid-1/1", data) }
      ])
      const env = { env: [{ name: "X", value: "anything" }] }
      const failed = yield* Effect.flip(secrets.checkEnv("p", env, { kind: "jobs", name: "j" }, undefined))
      assert.strictEqual(failed.code, "EncryptionFailed")
      assert.include(failed.message, `Secret "db" version 1`)
      // The same data written again cannot be compared with values that do not open: it is a new version.
      const rewritten = yield* secrets.prepareWrite(secret, data, secret)
      assert.strictEqual((rewritten.object.status as { latestVersion: number }).latestVersion, 2)
      assert.lengthOf(rewritten.ops, 1)
    }).pipe(
      Effect.provide(
        Secrets.layer.pipe(
          Layer.provideMerge(SecretCipher.layer(key)),
          Layer.provideMerge(Layer.fresh(MemoryStore.layer))
        )
      )
    ))
})
