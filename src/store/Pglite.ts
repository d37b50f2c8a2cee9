/**
 * An effect/sql `SqlClient` over embedded PGlite, in process. PGlite is a single PostgreSQL session, so the client
 * serialises access with one semaphore, the way effect/sql drives SQLite; its socket server is avoided because it
 * interleaves the extended-protocol messages of concurrent clients (see ../shared/guides/effect4.md §9). The same SQL
 * as the PostgreSQL driver runs on it, PostgreSQL dialect included.
 */
import { PgClient } from "@effect/sql-pg"
import { PGlite, type PGliteOptions } from "@electric-sql/pglite"
import { Effect, Layer, Semaphore, Stream } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient, type SqlConnection, SqlError } from "effect/sql"
import * as PgliteSnapshot from "./PgliteSnapshot.ts"

const toSqlError = (cause: unknown, operation: string): SqlError.SqlError => {
  const message = String((cause as Error | undefined)?.message ?? cause)
  return new SqlError.SqlError({
    reason: (cause as { code?: string } | undefined)?.code === "23505"
      ? new SqlError.UniqueViolation({
        cause,
        operation,
        message,
        constraint: String((cause as { constraint?: string }).constraint ?? "")
      })
      : new SqlError.UnknownError({ cause, operation, message })
  })
}

const makeClient = (database: PGlite) =>
  Effect.gen(function*() {
    const query = <Row>(text: string, params: ReadonlyArray<unknown>, rowMode: "object" | "array") =>
      Effect.tryPromise({
        try: () => database.query<Row>(text, params as Array<unknown>, { rowMode }).then((result) => result.rows),
        catch: (cause) => toSqlError(cause, "execute")
      })
    const run = (text: string, params: ReadonlyArray<unknown>, rowMode: "object") =>
      query<Record<string, unknown>>(text, params, rowMode)
    const values = (text: string, params: ReadonlyArray<unknown>) =>
      query<ReadonlyArray<unknown>>(text, params, "array")
    const transform = <A>(rows: ReadonlyArray<A>, transformRows?: (rows: ReadonlyArray<A>) => ReadonlyArray<A>) =>
      transformRows === undefined ? rows : transformRows(rows)
    const connection: SqlConnection.Connection = {
      execute: (text, params, transformRows) =>
        Effect.map(run(text, params, "object"), (rows) => transform(rows as ReadonlyArray<any>, transformRows)),
      executeRaw: (text, params) => run(text, params, "object"),
      executeStream: (text, params, transformRows) =>
        Stream.fromIterableEffect(
          Effect.map(run(text, params, "object"), (rows) => transform(rows as ReadonlyArray<any>, transformRows))
        ),
      executeValues: values,
      executeValuesUnprepared: values,
      executeUnprepared: (text, params, transformRows) =>
        Effect.map(
          params.length === 0
            ? Effect.tryPromise({
              try: () => database.exec(text).then((results) => results.at(-1)?.rows ?? []),
              catch: (cause) => toSqlError(cause, "exec")
            })
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
 * PostgreSQL's buffer pool inside PGlite's WebAssembly memory. PostgreSQL's default, 128 MB, is touched whole at start
 * and stays resident (measured: 128 MB of the idle server's RSS); 16 MB holds the store of a developer's machine, and
 * pages beyond it are read again from the data directory's files, which the operating system caches.
 */
export const sharedBuffers = "16MB"

/**
 * How a database opens: in `dataDir` (unpacked from the prebuilt snapshot when new, PgliteSnapshot.ts) or in memory
 * (loaded from the snapshot); initdb runs only where no snapshot of the installed PGlite is kept.
 */
const openOptions = async (dataDir: string | undefined): Promise<PGliteOptions> => {
  const startParams = [...PGlite.defaultStartParams, "-c", `shared_buffers=${sharedBuffers}`]
  if (dataDir !== undefined) {
    await PgliteSnapshot.restore(dataDir)
    return { dataDir, startParams }
  }
  const snapshot = await PgliteSnapshot.read()
  return snapshot === undefined
    ? { startParams }
    : { startParams, loadDataDir: new Blob([snapshot as Uint8Array<ArrayBuffer>]) }
}

/**
 * A SqlClient on a PGlite database in `dataDir` (created when missing), or in memory when `dataDir` is undefined.
 * The database closes when the layer is released.
 */
export const layer = (dataDir: string | undefined): Layer.Layer<SqlClient.SqlClient, SqlError.SqlError> =>
  Layer.effect(
    SqlClient.SqlClient,
    Effect.gen(function*() {
      const database = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () => openOptions(dataDir).then((options) => PGlite.create(options)),
          catch: (cause) => toSqlError(cause, "open")
        }),
        (opened) => Effect.promise(() => opened.close())
      )
      return yield* makeClient(database)
    })
  ).pipe(Layer.provide(Reactivity.layer))
