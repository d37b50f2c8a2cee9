/**
 * Acceptance: Secrets through the real kubectl (docs/secrets.md). Client-side apply keeps the applied manifest in the
 * last-applied annotation; the server drops the values from it, and kubectl's three-way merge still works: an
 * unchanged manifest makes no new version, a changed value or a removed key makes one, and the values still reach
 * admission (SecretValueInEnv refuses the current value, not the old one). No command shows a value: get -o yaml,
 * the table, a watch, view-last-applied, server-side apply. On PostgreSQL (DATABASE_URL), no table holds one either.
 */
import { PgClient } from "@effect/sql-pg"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import * as SqlStore from "../../src/store/SqlStore.ts"
import { eventually } from "../support/Eventually.ts"
import { createDatabase, databaseUrl } from "../support/Postgres.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"
import { api, jsonDocuments, kubectl, requireKubectl, show, startKubectl } from "./Clients.ts"

const project = "kube-secrets"
const secretPath = (name: string) => `/apis/nodus.dev/v1/namespaces/${project}/secrets/${name}`
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
const first = "first-value-3c9d2e"
const second = "second-value-71ab04"
const other = "other-value-55ee10"

let server: TestServer
let database: { readonly url: string; readonly drop: () => Promise<void> } | undefined

beforeAll(async () => {
  requireKubectl()
  database = databaseUrl === undefined ? undefined : await createDatabase(databaseUrl)
  server = await startTestServer({
    tls: true,
    ...(database === undefined ? {} : { store: Layer.fresh(SqlStore.layerPostgres(database.url)) })
  })
  const created = await api(server, "POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: project } }
  })
  assert.strictEqual(created.status, 201, created.text)
})
afterAll(async () => {
  await server?.stop()
  await database?.drop()
})

const secretYaml = (name: string, data: Record<string, string>) =>
  [
    "apiVersion: nodus.dev/v1",
    "kind: Secret",
    "metadata:",
    `  name: ${name}`,
    `  namespace: ${project}`,
    "spec:",
    "  data:",
    ...Object.entries(data).map(([key, value]) => `    ${key}: ${value}`),
    ""
  ].join("\n")

const manifest = (file: string, text: string): string => {
  const path = join(server.directory, file)
  writeFileSync(path, text)
  return path
}

const readSecret = async (name: string): Promise<any> => {
  const reply = await api(server, "GET", secretPath(name))
  assert.strictEqual(reply.status, 200, reply.text)
  return reply.body
}

/** A dry-run Job with `value` as a literal env value: refused (SecretValueInEnv) when it is a current secret value. */
const envRefused = async (value: string): Promise<boolean> => {
  const reply = await api(server, "POST", `/apis/nodus.dev/v1/namespaces/${project}/jobs?dryRun=All`, {
    body: {
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      metadata: { name: "probe" },
      spec: { image: "python:3.12", env: [{ name: "X", value }] }
    }
  })
  assert.include([201, 422], reply.status, reply.text)
  return reply.status === 422
}

const assertNoValue = (text: string, label: string) => {
  for (const value of [first, second, other]) assert.notInclude(text, value, label)
}

describe("kubectl apply of a Secret", () => {
  it("keeps values out of every read while apply creates, skips, updates and removes keys", async () => {
    // A watch that has printed the seed is watching: it sees every write below.
    const seeded = await kubectl(server, ["apply", "-f", manifest("seed.yaml", secretYaml("seed", { k: "v" }))])
    assert.strictEqual(seeded.code, 0, show(seeded))
    const watch = startKubectl(server, [
      "get",
      "secrets.nodus.dev",
      "-n",
      project,
      "-w",
      "--output-watch-events",
      "-o",
      "json"
    ])
    await eventually("the watch's initial list", () => jsonDocuments(watch.stdout()).length === 1, {
      timeoutMs: 15_000
    })
    const file = manifest("secret.yaml", secretYaml("db", { password: first, user: "app" }))
    const created = await kubectl(server, ["apply", "-f", file])
    assert.strictEqual(created.code, 0, show(created))
    assert.strictEqual(created.stdout.trim(), "secret.nodus.dev/db created")
    const stored = await readSecret("db")
    assert.strictEqual(stored.status.latestVersion, 1)
    assert.deepStrictEqual(
      JSON.parse(stored.metadata.annotations[lastApplied]).spec,
      {},
      "the annotation keeps no data"
    )
    assert.isTrue(await envRefused(first))

    // The same manifest again: kubectl sends the values (the live object has none), which are not new.
    const again = await kubectl(server, ["apply", "-f", file])
    assert.strictEqual(again.code, 0, show(again))
    // kubectl says configured (the live object never equals a manifest with data), yet nothing changed.
    assert.strictEqual(again.stdout.trim(), "secret.nodus.dev/db configured")
    assert.strictEqual((await readSecret("db")).metadata.resourceVersion, stored.metadata.resourceVersion)

    manifest("secret.yaml", secretYaml("db", { password: second, user: "app" }))
    const changed = await kubectl(server, ["apply", "-f", file])
    assert.strictEqual(changed.code, 0, show(changed))
    assert.strictEqual(changed.stdout.trim(), "secret.nodus.dev/db configured")
    assert.strictEqual((await readSecret("db")).status.latestVersion, 2)
    assert.isTrue(await envRefused(second), "the new value reaches admission")
    assert.isFalse(await envRefused(first), "the old value is no current value")

    manifest("secret.yaml", secretYaml("db", { password: second }))
    const removed = await kubectl(server, ["apply", "-f", file])
    assert.strictEqual(removed.code, 0, show(removed))
    const latest = await readSecret("db")
    assert.strictEqual(latest.status.latestVersion, 3)
    assert.deepStrictEqual(latest.status.versions.at(-1).keys, ["password"])

    const reads = [
      await kubectl(server, ["get", "secrets.nodus.dev", "db", "-n", project, "-o", "yaml"]),
      await kubectl(server, ["get", "secrets.nodus.dev", "-n", project, "-o", "json"]),
      await kubectl(server, ["get", "secrets.nodus.dev", "-n", project, "-o", "wide"]),
      await kubectl(server, ["apply", "view-last-applied", "secrets.nodus.dev/db", "-n", project, "-o", "json"]),
      await kubectl(server, ["describe", "secrets.nodus.dev", "db", "-n", project])
    ]
    for (const read of reads) {
      assert.strictEqual(read.code, 0, show(read))
      assertNoValue(read.stdout, show(read))
    }
    await eventually(
      "the watch's events of db",
      () => jsonDocuments(watch.stdout()).filter((event) => event.object.metadata.name === "db").length === 3,
      { timeoutMs: 15_000 }
    )
    const watched = await watch.stop()
    assertNoValue(watched.stdout, "kubectl get -w")
  })

  it("server-side apply stores no value in the object or its managed fields", async () => {
    const file = manifest("ssa.yaml", secretYaml("ssa", { token: other }))
    const applied = await kubectl(server, ["apply", "--server-side", "-f", file])
    assert.strictEqual(applied.code, 0, show(applied))
    const shown = await kubectl(server, [
      "get",
      "secrets.nodus.dev",
      "ssa",
      "-n",
      project,
      "-o",
      "yaml",
      "--show-managed-fields"
    ])
    assert.strictEqual(shown.code, 0, show(shown))
    assertNoValue(shown.stdout, show(shown))
    assert.isTrue(await envRefused(other))
  })

  it.skipIf(databaseUrl === undefined)(
    "no table of the database holds a value: objects, changes, records, postings",
    async () => {
      const dump = await Effect.runPromise(
        Effect.scoped(Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const tables = yield* sql<
            { table_name: string }
          >`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`
          const rows = []
          for (const { table_name } of tables) {
            rows.push(...(yield* sql.unsafe<{ row: string }>(`SELECT t::text AS row FROM "${table_name}" t`)))
          }
          return rows.map((row) => row.row).join("\n")
        })).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(database!.url), maxConnections: 1 })))
      )
      assert.include(dump, "secretvalues", "the dump reads the record table")
      assertNoValue(dump, "database dump")
    }
  )
})
