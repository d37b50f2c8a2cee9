// Secret values at rest on a whole server (docs/secrets.md, "Encryption at rest"): the key comes from NODUS_SECRET_KEY
// or is generated once into <data dir>/secrets.key (mode 0600); on disk — every file of an embedded database, write-
// ahead log included — no value appears, while the object's name does; the values still reach admission after a
// restart with the same key; a restart with another key fails at once, saying why.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { idempotencyTable } from "../../src/apiserver/Idempotency.ts"
import { isSealed } from "../../src/runtime/SecretCipher.ts"
import { lastAppliedAnnotation, secretValuesTable } from "../../src/runtime/Secrets.ts"
import { ensureSecretKey, secretKeyFile } from "../../src/server/Bootstrap.ts"
import { resolve, type ServerConfig } from "../../src/server/Config.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import * as SqlStore from "../../src/store/SqlStore.ts"
import { Store } from "../../src/store/Store.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

const value = "at-rest-value-9d8c7b6a"
const name = "visible-name-4e5f"
const project = "at-rest"

const configWith = (dataDir: string, env: Record<string, string> = {}): ServerConfig => {
  const resolved = resolve({ NODUS_DATA_DIR: dataDir, ...env }, [])
  if (resolved._tag === "Err") throw new Error(resolved.message)
  return resolved.config
}

/** Every file under `directory`, read as bytes, and whether any holds `text`. */
const onDisk = (directory: string, text: string): boolean =>
  readdirSync(directory, { recursive: true, encoding: "utf8" }).some((entry) => {
    const path = join(directory, entry)
    return statSync(path).isFile() && readFileSync(path).includes(Buffer.from(text))
  })

/** Whether a dry-run Job with `literal` in env is refused as a secret value: the values reach admission. */
const refusedAsSecret = async (server: TestServer, literal: string): Promise<boolean> => {
  const reply = await request(server, "POST", `/apis/nodus.dev/v1/namespaces/${project}/jobs?dryRun=All`, {
    body: { metadata: { name: "probe" }, spec: { image: "python:3.12", env: [{ name: "X", value: literal }] } }
  })
  return reply.status === 422 && reply.body.reason === "SecretValueInEnv"
}

describe("the secret key", () => {
  it("is generated once into <data dir>/secrets.key, mode 0600, and read again", () => {
    const dataDir = mkdtempSync(join(tmpdir(), "nodus-key-"))
    const first = ensureSecretKey(configWith(dataDir))
    assert.strictEqual(first.length, 32)
    assert.strictEqual(statSync(secretKeyFile(dataDir)).mode & 0o777, 0o600)
    assert.deepStrictEqual(ensureSecretKey(configWith(dataDir)), first)
  })

  it("comes from NODUS_SECRET_KEY when set, and a malformed key file is refused with its path", () => {
    const dataDir = mkdtempSync(join(tmpdir(), "nodus-key-"))
    const hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
    assert.deepStrictEqual(
      Buffer.from(ensureSecretKey(configWith(dataDir, { NODUS_SECRET_KEY: hex }))).toString("hex"),
      hex
    )
    writeFileSync(secretKeyFile(dataDir), "too short\n")
    assert.throws(() => ensureSecretKey(configWith(dataDir)), /secrets\.key must be 32 random bytes/u)
  })
})

describe("secret values on disk", () => {
  it("are sealed in the record table, appear in no file of the database, and open only with their key", async () => {
    const directory = join(mkdtempSync(join(tmpdir(), "nodus-at-rest-")), "pglite")
    const start = (secretKey?: Uint8Array) =>
      startTestServer({
        store: Layer.fresh(SqlStore.layerPglite(directory)),
        ...(secretKey === undefined ? {} : { secretKey })
      })
    const first = await start()
    try {
      assert.strictEqual(
        (await request(first, "POST", "/api/v1/namespaces", { body: { metadata: { name: project } } })).status,
        201
      )
      const created = await request(first, "POST", `/apis/nodus.dev/v1/namespaces/${project}/secrets`, {
        body: { metadata: { name }, spec: { data: { password: value } } },
        headers: { "idempotency-key": "create-once" }
      })
      assert.strictEqual(created.status, 201, created.text)
      const stored = await first.withStore((store) =>
        store.getRecord(secretValuesTable, `${created.body.metadata.uid}/1`, 0)
      )
      assert.isTrue(Option.isSome(stored) && isSealed(stored.value), "the record is sealed")
      // The idempotency record keeps the exact create response: the object, which has no value.
      const replies = await first.withStore((store) => store.records(idempotencyTable, "", 100, 0))
      assert.include(JSON.stringify(replies), name)
      assert.notInclude(JSON.stringify(replies), value)
      assert.isTrue(await refusedAsSecret(first, value))
    } finally {
      await first.stop()
    }
    assert.isTrue(onDisk(directory, name), "the files hold the object (the search reads them)")
    assert.isFalse(onDisk(directory, value), "no file holds the value")

    const again = await start()
    try {
      assert.isTrue(await refusedAsSecret(again, value), "the values open after a restart")
    } finally {
      await again.stop()
    }
    const refused = await Effect.runPromise(Effect.flip(Effect.tryPromise(() => start(Buffer.alloc(32, 9)))))
    assert.match(
      String(refused.cause ?? refused),
      /sealed with key id [0-9a-f]{16}, and this server holds key id [0-9a-f]{16}/u
    )
  })
})

describe("Secrets an earlier server stored with values in kubectl's annotation", () => {
  it("are scrubbed when a server starts", async () => {
    const store = await Effect.runPromise(MemoryStore.make)
    const first = await startTestServer({ store: Layer.succeed(Store, store) })
    let uid: string
    try {
      assert.strictEqual(
        (await request(first, "POST", "/api/v1/namespaces", { body: { metadata: { name: project } } })).status,
        201
      )
      const created = await request(first, "POST", `/apis/nodus.dev/v1/namespaces/${project}/secrets`, {
        body: { metadata: { name }, spec: { data: { password: value } } }
      })
      assert.strictEqual(created.status, 201, created.text)
      uid = created.body.metadata.uid
    } finally {
      await first.stop()
    }
    // What a server before the scrub stored: the whole manifest, values included, in the annotation.
    const key = { resource: "secrets", namespace: project, name }
    const stored = Option.getOrThrow(await Effect.runPromise(store.get(key)))
    const leaked = {
      ...stored,
      metadata: {
        ...stored.metadata,
        annotations: {
          [lastAppliedAnnotation]: JSON.stringify({
            apiVersion: "nodus.dev/v1",
            kind: "Secret",
            metadata: { name },
            spec: { data: { password: value } }
          })
        }
      }
    }
    await Effect.runPromise(
      store.commit([{
        _tag: "Update",
        key,
        object: leaked,
        previous: stored,
        expectedRv: stored.metadata.resourceVersion
      }])
    )
    assert.include(JSON.stringify(Option.getOrThrow(await Effect.runPromise(store.get(key)))), value)

    const second = await startTestServer({ store: Layer.succeed(Store, store) })
    try {
      const read = await request(second, "GET", `/apis/nodus.dev/v1/namespaces/${project}/secrets/${name}`)
      assert.strictEqual(read.status, 200, read.text)
      assert.strictEqual(read.body.metadata.uid, uid!)
      assert.notInclude(read.text, value)
      assert.property(read.body.metadata.annotations, lastAppliedAnnotation)
    } finally {
      await second.stop()
    }
  })
})
