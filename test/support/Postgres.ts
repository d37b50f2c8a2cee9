/**
 * Fresh PostgreSQL databases for tests. When DATABASE_URL is set (CI sets it when a server answers on 127.0.0.1:5432),
 * each suite gets its own database, created here and dropped afterwards, so suites never see each other's rows.
 */
import { PgClient } from "@effect/sql-pg"
import { afterAll, beforeAll } from "@effect/vitest"
import { Effect, Exit, Redacted, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"

/** The server tests may use, or undefined when none is configured. */
export const databaseUrl: string | undefined = process.env["DATABASE_URL"] === ""
  ? undefined
  : process.env["DATABASE_URL"]

const withAdmin = <A, E>(url: string, use: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) =>
  Effect.scoped(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* use(sql)
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })))
  )

/** Creates an empty database on the server of `url`; the scope drops it. Returns its URL. */
export const freshDatabase = (url: string) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const name = `nodus_test_${randomBytes(6).toString("hex")}`
      yield* withAdmin(url, (sql) => sql.unsafe(`CREATE DATABASE ${name}`))
      const target = new URL(url)
      target.pathname = `/${name}`
      return { name, url: target.toString() }
    }),
    ({ name }) => Effect.ignore(withAdmin(url, (sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)))
  ).pipe(Effect.map(({ url: databaseUrl }) => databaseUrl))

/** `freshDatabase` for plain async tests: the URL and a function that drops the database. */
export const createDatabase = async (
  url: string
): Promise<{ readonly url: string; readonly drop: () => Promise<void> }> => {
  const scope = Effect.runSync(Scope.make())
  const created = await Effect.runPromise(freshDatabase(url).pipe(Scope.provide(scope)))
  return { url: created, drop: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

/**
 * A database of its own for a suite (a describe): created before its tests, dropped after them. Read `url` in tests.
 */
export const suiteDatabase = () => {
  let database: { readonly url: string; readonly drop: () => Promise<void> } | undefined
  beforeAll(async () => {
    database = await createDatabase(databaseUrl!)
  })
  afterAll(async () => {
    await database?.drop()
  })
  return {
    get url() {
      if (database === undefined) throw new Error("the suite's database is made before its tests run")
      return database.url
    }
  }
}
