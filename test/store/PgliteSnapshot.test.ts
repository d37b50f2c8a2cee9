// The prebuilt PGlite data directory (src/store/PgliteSnapshot.ts): one is kept for the installed PGlite; its tar
// round-trips a directory tree; a new data directory restored from it opens as a database with the driver's settings
// and the store's schema (on this thread and on a worker), and the store migrates and commits on it; a directory that
// holds anything is left alone; an entry naming a path outside its directory is refused.

import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Pglite from "../../src/store/Pglite.ts"
import * as PgliteSnapshot from "../../src/store/PgliteSnapshot.ts"
import * as SqlStore from "../../src/store/SqlStore.ts"
import { Store } from "../../src/store/Store.ts"

const scratch = () => mkdtempSync(join(tmpdir(), "nodus-snapshot-test-"))

/** What the driver's connection answers on a database in `dataDir`. */
const ask = (dataDir: string, query: string) =>
  Effect.runPromise(Effect.scoped(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql.unsafe<Record<string, unknown>>(query)
    }).pipe(Effect.provide(Layer.fresh(Pglite.layer(dataDir))))
  ))

describe("PgliteSnapshot", () => {
  it("is kept for the installed PGlite (after an upgrade: npm run pglite:snapshot)", () => {
    const file = PgliteSnapshot.snapshotFile()
    assert.isTrue(existsSync(file), `${file} is missing: run npm run pglite:snapshot`)
    assert.include(file, `pglite-${PgliteSnapshot.pgliteVersion()}.tar.zst`)
  })

  it("packs and unpacks a tree: directories, contents and modes", async () => {
    const root = scratch()
    try {
      mkdirSync(join(root, "from", "base", "1"), { recursive: true, mode: 0o700 })
      writeFileSync(join(root, "from", "PG_VERSION"), "17\n", { mode: 0o600 })
      writeFileSync(join(root, "from", "base", "1", "112"), Buffer.alloc(8192 + 3, 7), { mode: 0o640 })
      writeFileSync(join(root, "from", "base", "empty"), "")
      mkdirSync(join(root, "to"))
      await PgliteSnapshot.unpack(PgliteSnapshot.pack(join(root, "from")), join(root, "to"))
      assert.strictEqual(readFileSync(join(root, "to", "PG_VERSION"), "utf8"), "17\n")
      assert.deepStrictEqual(readFileSync(join(root, "to", "base", "1", "112")), Buffer.alloc(8192 + 3, 7))
      assert.strictEqual(readFileSync(join(root, "to", "base", "empty")).length, 0)
      assert.strictEqual(statSync(join(root, "to", "base", "1", "112")).mode & 0o777, 0o640)
      assert.strictEqual(statSync(join(root, "to", "base", "1")).mode & 0o777, 0o700)
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })

  it("refuses an entry outside its directory", async () => {
    const root = scratch()
    try {
      mkdirSync(join(root, "from"))
      writeFileSync(join(root, "from", "a"), "x")
      const tar = PgliteSnapshot.pack(join(root, "from"))
      tar.write("../a\0", 0, "utf8")
      mkdirSync(join(root, "to"))
      let refused = false
      await PgliteSnapshot.unpack(tar, join(root, "to")).catch(() => (refused = true))
      assert.isTrue(refused)
      assert.isFalse(existsSync(join(root, "a")))
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })

  it("restores a new data directory that opens with the driver's settings, once", { timeout: 60_000 }, async () => {
    const root = scratch()
    try {
      const dataDir = join(root, "data", "pglite")
      assert.isTrue(await PgliteSnapshot.restore(dataDir))
      assert.isTrue(existsSync(join(dataDir, "PG_VERSION")))
      // Restored already: nothing is unpacked over a database.
      assert.isFalse(await PgliteSnapshot.restore(dataDir))
      const [settings] = await ask(
        dataDir,
        "SELECT current_setting('shared_buffers') AS buffers, (SELECT count(*) FROM pg_database)::int AS databases, to_regclass('nodus_objects') IS NOT NULL AS schema"
      )
      // The store's schema is in the snapshot: a fresh start runs no migration it was built with.
      assert.deepStrictEqual(settings, { buffers: Pglite.sharedBuffers, databases: 3, schema: true })
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })

  it("restores on a worker thread, and the store migrates and commits there", { timeout: 60_000 }, async () => {
    const root = scratch()
    try {
      const dataDir = join(root, "pglite")
      assert.isTrue(await PgliteSnapshot.restoreOffThread(dataDir))
      const read = await Effect.runPromise(Effect.scoped(
        Effect.gen(function*() {
          const store = yield* Store
          yield* store.commit([{ _tag: "PutRecord", table: "test", id: "a", value: { ok: true } }])
          return yield* store.getRecord("test", "a", 0)
        }).pipe(Effect.provide(Layer.fresh(SqlStore.layerPglite(dataDir))))
      ))
      assert.deepStrictEqual(read, Option.some({ ok: true }))
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })

  it("leaves a directory that holds anything alone", async () => {
    const root = scratch()
    try {
      writeFileSync(join(root, "keep"), "mine")
      assert.isFalse(await PgliteSnapshot.restore(root))
      assert.strictEqual(readFileSync(join(root, "keep"), "utf8"), "mine")
      assert.isFalse(existsSync(join(root, "PG_VERSION")))
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})
