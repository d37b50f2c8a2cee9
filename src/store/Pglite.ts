/**
 * An effect/sql `SqlClient` over embedded PGlite, in process. PGlite is a single PostgreSQL session, so the client
 * serialises access with one semaphore, the way effect/sql drives SQLite; its socket server is avoided because it
 * interleaves the extended-protocol messages of concurrent clients (see ../shared/guides/effect4.md §9). The same SQL
 * as the PostgreSQL driver runs on it, PostgreSQL dialect included.
 */
import { PGlite } from "@electric-sql/pglite"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Semaphore, Stream } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient, type SqlConnection, SqlError } from "effect/sql"

const toSqlError = (cause: unknown, operation: string): SqlError.SqlError => {
  const message = String((cause as Error | undefined)?.message ?? cause)
  return new SqlError.SqlError({
    reason: (cause as { code?: string } | undefined)?.code === "23505"
      ? new SqlError.UniqueViolation({ cause, operation, message, constraint: String((cause as { constraint?: string }).constraint ?? "") })
      : new SqlError.UnknownError({ cause, operation, message })
  })
}

const makeClient = (database: PGlite) => Effect.gen(function*() {
  const query = <Row>(text: string, params: ReadonlyArray<unknown>, rowMode: "object" | "array") =>
    Effect.tryPromise({
      try: () => database.query<Row>(text, params as Array<unknown>, { rowMode }).then((result) => result.rows),
      catch: (cause) => toSqlError(cause, "execute")
    })
  const run = (text: string, params: ReadonlyArray<unknown>, rowMode: "object") => query<Record<string, unknown>>(text, params, rowMode)
  const values = (text: string, params: ReadonlyArray<unknown>) => query<ReadonlyArray<unknown>>(text, params, "array")
  const transform = <A>(rows: ReadonlyArray<A>, transformRows?: (rows: ReadonlyArray<A>) => ReadonlyArray<A>) =>
    transformRows === undefined ? rows : transformRows(rows)
  const connection: SqlConnection.Connection = {
    execute: (text, params, transformRows) => Effect.map(run(text, params, "object"), (rows) => transform(rows as ReadonlyArray<any>, transformRows)),
    executeRaw: (text, params) => run(text, params, "object"),
    executeStream: (text, params, transformRows) =>
      Stream.fromIterableEffect(Effect.map(run(text, params, "object"), (rows) => transform(rows as ReadonlyArray<any>, transformRows))),
    executeValues: values,
    executeValuesUnprepared: values,
    executeUnprepared: (text, params, transformRows) =>
      Effect.map(
        params.length === 0
          ? Effect.tryPromise({ try: () => database.exec(text).then((results) => results.at(-1)?.rows ?? []), catch: (cause) => toSqlError(cause, "exec") })
          : run(text, params, "object"),
        (rows) => transform(rows as ReadonlyArray<any>, transformRows)
      )
  }
  const acquirers = SqlClient.makeSqliteAcquirers({
    connection: Effect.succeed(connection),
    semaphore: yield* Semaphore.make(1),
    isTransaction: () => database.isInTransaction()
  })
  return yield* SqlClient.make({
    driver: "pglite",
    compiler: PgClient.makeCompiler(),
    spanAttributes: [["db.system", "postgresql"]],
    acquirer: acquirers.acquirer,
    borrower: acquirers.borrower,
    transactionAcquirer: acquirers.transactionAcquirer
  })
})

/**
 * A SqlClient on a PGlite database in `dataDir` (created when missing), or in memory when `dataDir` is undefined.
 * The database closes when the layer is released.
 */
export const layer = (dataDir: string | undefined): Layer.Layer<SqlClient.SqlClient, SqlError.SqlError> =>
  Layer.effect(
    SqlClient.SqlClient,
    Effect.gen(function*() {
      const database = yield* Effect.acquireRelease(
        Effect.tryPromise({ try: () => PGlite.create(dataDir === undefined ? {} : { dataDir }), catch: (cause) => toSqlError(cause, "open") }),
        (opened) => Effect.promise(() => opened.close())
      )
      return yield* makeClient(database)
    })
  ).pipe(Layer.provide(Reactivity.layer))
