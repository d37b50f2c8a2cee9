/**
 * The SQL store driver, one body of SQL for PostgreSQL (@effect/sql-pg) and embedded PGlite.
 *
 * Writes go through one writer fiber per process that decides whatever commits are waiting as one batch (group
 * commit), optimistically, in two statements:
 *
 * 1. read the state of every key, record and posting key the batch touches, with the store's commit sequence number
 *    and its last posting seq;
 * 2. decide the batch in memory (Commit.ts), then one statement that locks the `nodus_meta` row, checks that the
 *    commit sequence is still the one read, and only then writes everything and bumps the sequence and the
 *    resourceVersion counter. If another process committed in between, nothing is written and the batch is decided
 *    again from a fresh read.
 *
 * The row lock orders the batches of every process, so resourceVersions grow in commit order and a reader of the
 * change log never sees a later version before an earlier one; it is held for one statement only. Other processes
 * learn of commits through NOTIFY on `nodus_changes` (PostgreSQL only; PGlite is single-process).
 */
import { PgClient } from "@effect/sql-pg"
import { Deferred, Effect, Layer, Option, Queue, Redacted, Result } from "effect"
import { Migrator, SqlClient, type SqlError } from "effect/sql"
import { randomUUID } from "node:crypto"
import type { Posting, PostingKind, Segment } from "../core/billing/Ledger.ts"
import type { Json } from "../core/Json.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { ownerUids } from "../core/meta/Strategy.ts"
import { blobSchema, BlobStore, makeSql as makeSqlBlobs } from "./BlobStore.ts"
import { evaluate, type Evaluation, touched } from "./Commit.ts"
import * as Pglite from "./Pglite.ts"
import {
  type Change,
  type ChangeType,
  CommitFailed,
  type CommitListener,
  type Committed,
  keyString,
  type ListQuery,
  recordKey,
  Store,
  StoreError,
  type StoreShape,
  type WriteOp
} from "./Store.ts"

/** The most commits one transaction carries; more wait for the next batch. */
export const batchCommitsMax = 256

/** The NOTIFY channel that tells other processes a batch committed. */
export const notifyChannel = "nodus_changes"

const schema = [
  `CREATE TABLE nodus_meta (
     id integer PRIMARY KEY CHECK (id = 1),
     resource_version bigint NOT NULL,
     compacted_resource_version bigint NOT NULL)`,
  `INSERT INTO nodus_meta VALUES (1, 0, 0)`,
  // "C" collation: list order and continue cursors compare names by bytes, the same as the memory driver.
  `CREATE TABLE nodus_objects (
     resource text COLLATE "C" NOT NULL,
     namespace text COLLATE "C" NOT NULL,
     name text COLLATE "C" NOT NULL,
     uid text NOT NULL,
     resource_version bigint NOT NULL,
     deleting boolean NOT NULL,
     labels jsonb NOT NULL,
     owner_uids jsonb NOT NULL,
     body text NOT NULL,
     PRIMARY KEY (resource, namespace, name))`,
  `CREATE INDEX nodus_objects_uid ON nodus_objects (uid)`,
  `CREATE INDEX nodus_objects_owner_uids ON nodus_objects USING gin (owner_uids)`,
  `CREATE INDEX nodus_objects_labels ON nodus_objects USING gin (labels jsonb_path_ops)`,
  `CREATE TABLE nodus_changes (
     resource_version bigint PRIMARY KEY,
     type text NOT NULL,
     resource text NOT NULL,
     namespace text NOT NULL,
     name text NOT NULL,
     body text NOT NULL,
     previous text)`,
  `CREATE TABLE nodus_records (
     tbl text COLLATE "C" NOT NULL,
     id text COLLATE "C" NOT NULL,
     value text NOT NULL,
     expires_at bigint,
     PRIMARY KEY (tbl, id))`,
  `CREATE INDEX nodus_records_expires_at ON nodus_records (expires_at) WHERE expires_at IS NOT NULL`
]

/** The ledger's postings (core/billing/Ledger.ts), appended by Post ops; balances are sums over them. */
const postingsSchema = [
  `CREATE TABLE nodus_postings (
     seq bigint PRIMARY KEY,
     key text NOT NULL UNIQUE,
     at bigint NOT NULL,
     kind text NOT NULL,
     from_account text NOT NULL,
     to_account text NOT NULL,
     amount bigint NOT NULL CHECK (amount >= 0),
     owner text,
     hold text,
     segment text,
     expires_at bigint,
     source text)`,
  // What an object was held and charged, in ledger order.
  `CREATE INDEX nodus_postings_owner ON nodus_postings (owner, seq) WHERE owner IS NOT NULL`
]

const migrations = Migrator.fromRecord({
  "1_store": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const statement of schema) yield* sql.unsafe(statement)
  }),
  // Every batch bumps it, records-only batches included: the optimistic check of a batch compares it.
  "2_commit_sequence": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`ALTER TABLE nodus_meta ADD COLUMN commit_sequence bigint NOT NULL DEFAULT 0`)
  }),
  "3_postings": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const statement of postingsSchema) yield* sql.unsafe(statement)
  }),
  "4_blobs": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const statement of blobSchema) yield* sql.unsafe(statement)
  }),
  // A Job is 2.5-3 KB of JSON, over TOAST's 2 KB line: every write compresses it twice (object and change) and every
  // read of a list decompresses it. LZ4 does both about 2.5 times faster than the default pglz (measured here on a
  // stored Job: 7 against 20 µs to write, 3 against 7.5 µs to read), for about 7 % more bytes. New rows only; a build
  // without LZ4 (PGlite's) keeps pglz.
  "5_lz4_bodies": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`DO $$ BEGIN
      ALTER TABLE nodus_objects ALTER COLUMN body SET COMPRESSION lz4;
      ALTER TABLE nodus_changes ALTER COLUMN body SET COMPRESSION lz4, ALTER COLUMN previous SET COMPRESSION lz4;
      ALTER TABLE nodus_records ALTER COLUMN value SET COMPRESSION lz4;
    EXCEPTION WHEN feature_not_supported THEN NULL;
    END $$`)
  })
})

/** Runs the store's migrations; concurrent starts of several processes serialise on an advisory lock. */
export const migrate = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const run = Migrator.make({})({ loader: migrations, table: "nodus_migrations" })
  // 0x6e6f647573 is "nodus": the advisory lock key every nodus process agrees on.
  yield* sql.withTransaction(Effect.andThen(sql`SELECT pg_advisory_xact_lock(474315273587)`, run))
})

const failure = (message: string) => (cause: SqlError.SqlError) =>
  new StoreError({ message: `${message}: ${cause.message}`, cause })

const parseObject = (body: string): ResourceObject => JSON.parse(body) as ResourceObject

interface ChangeRow {
  readonly resource_version: string
  readonly type: string
  readonly resource: string
  readonly namespace: string
  readonly name: string
  readonly body: string
  readonly previous: string | null
}

const changeOf = (row: ChangeRow): Change => ({
  resourceVersion: Number(row.resource_version),
  type: row.type as ChangeType,
  key: { resource: row.resource, namespace: row.namespace, name: row.name },
  object: parseObject(row.body),
  ...(row.previous === null ? {} : { previous: parseObject(row.previous) })
})

/**
 * Ends the subquery that looks one key of a batch up (`LATERAL (… WHERE <the key> LIMIT 1)`), so that each key is an
 * index probe. Joined plainly instead, the planner takes a batch's keys for 100 rows (its guess for a set-returning
 * function) and, while a table is small enough (about 50,000 objects), hashes them and reads the whole table instead:
 * measured in bench:api, 2,202 batches read 7.3 million objects to find 14,000 keys. The plan is cached with the
 * prepared statement, so it stayed so as the table grew. LIMIT keeps the subquery from being merged into a join.
 */
const byIndex = "LIMIT 1"

/**
 * What a batch reads before it is decided: the store's counters ($1-$4: the batch's object keys, record keys, the time
 * records expire against, posting keys), then each key that exists. Exported for the test of its plan.
 */
export const readStateStatement = `
      SELECT 'm' AS kind, resource_version::text AS a, commit_sequence::text AS b,
             (SELECT coalesce(max(seq), 0)::text FROM nodus_postings) AS c, NULL AS resource_version, NULL AS deleting
        FROM nodus_meta WHERE id = 1
      UNION ALL
      SELECT 'o', o.resource, o.namespace, o.name, o.resource_version::text, o.deleting
        FROM json_to_recordset($1::json) AS k(resource text, namespace text, name text),
             LATERAL (SELECT resource, namespace, name, resource_version, deleting FROM nodus_objects
                       WHERE resource = k.resource AND namespace = k.namespace AND name = k.name ${byIndex}) o
      UNION ALL
      SELECT 'r', r.tbl, r.id, '', NULL, NULL
        FROM json_to_recordset($2::json) AS k(tbl text, id text),
             LATERAL (SELECT tbl, id FROM nodus_records
                       WHERE tbl = k.tbl AND id = k.id AND (expires_at IS NULL OR expires_at > $3) ${byIndex}) r
      UNION ALL
      SELECT 'p', p.key, '', '', NULL, NULL
        FROM json_array_elements_text($4::json) AS k(key),
             LATERAL (SELECT key FROM nodus_postings WHERE key = k.key ${byIndex}) p`

/**
 * The one statement that writes a decided batch: objects, deletions, changes, records, postings, the counter and the
 * commit sequence, and with `notifyAs` the NOTIFY that wakes other processes (delivered at commit; its payload names
 * the process that sent it, `notifyAs:resourceVersion`, so that a process skips its own). It writes only when the
 * commit sequence under the lock is still $7, the one the batch was decided on; then it returns one row, else none.
 * When this statement waited for the lock, its snapshot predates the other commit, but the locked row is read as
 * committed, so the sequence check sees that commit and the statement writes nothing. PostgreSQL runs every
 * data-modifying WITH clause once, whether or not the main statement reads it.
 */
const writeStatement = (notifyAs: string | undefined) => `
WITH
  current AS (SELECT 1 FROM nodus_meta WHERE id = 1 AND commit_sequence = $7 FOR UPDATE),
  upserted AS (
    INSERT INTO nodus_objects (resource, namespace, name, uid, resource_version, deleting, labels, owner_uids, body)
    SELECT resource, namespace, name, uid, resource_version, deleting, labels, owner_uids, body
    FROM json_to_recordset($1::json) AS x(resource text, namespace text, name text, uid text, resource_version bigint,
                                          deleting boolean, labels jsonb, owner_uids jsonb, body text)
    WHERE EXISTS (SELECT 1 FROM current)
    ON CONFLICT (resource, namespace, name) DO UPDATE SET
      uid = EXCLUDED.uid, resource_version = EXCLUDED.resource_version, deleting = EXCLUDED.deleting,
      labels = EXCLUDED.labels, owner_uids = EXCLUDED.owner_uids, body = EXCLUDED.body
    RETURNING resource, namespace, name, body
  ),
  deleted AS (
    DELETE FROM nodus_objects
    WHERE ctid = ANY (ARRAY(
      SELECT o.ctid FROM json_to_recordset($2::json) AS k(resource text, namespace text, name text),
        LATERAL (SELECT ctid FROM nodus_objects WHERE resource = k.resource AND namespace = k.namespace AND name = k.name ${byIndex}) o))
      AND EXISTS (SELECT 1 FROM current)
  ),
  logged AS (
    INSERT INTO nodus_changes (resource_version, type, resource, namespace, name, body, previous)
    SELECT x.resource_version, x.type, x.resource, x.namespace, x.name, COALESCE(x.body, u.body), x.previous
    FROM json_to_recordset($3::json) AS x(resource_version bigint, type text, resource text, namespace text, name text,
                                          body text, previous text)
      LEFT JOIN upserted u ON u.resource = x.resource AND u.namespace = x.namespace AND u.name = x.name
    WHERE EXISTS (SELECT 1 FROM current)
  ),
  put AS (
    INSERT INTO nodus_records (tbl, id, value, expires_at)
    SELECT tbl, id, value, expires_at FROM json_to_recordset($4::json) AS x(tbl text, id text, value text, expires_at bigint)
    WHERE EXISTS (SELECT 1 FROM current)
    ON CONFLICT (tbl, id) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
  ),
  removed AS (
    DELETE FROM nodus_records
    WHERE ctid = ANY (ARRAY(
      SELECT r.ctid FROM json_to_recordset($5::json) AS k(tbl text, id text),
        LATERAL (SELECT ctid FROM nodus_records WHERE tbl = k.tbl AND id = k.id ${byIndex}) r))
      AND EXISTS (SELECT 1 FROM current)
  ),
  posted AS (
    INSERT INTO nodus_postings (seq, key, at, kind, from_account, to_account, amount, owner, hold, segment, expires_at, source)
    SELECT seq, key, at, kind, from_account, to_account, amount, owner, hold, segment, expires_at, source
    FROM json_to_recordset($8::json) AS x(seq bigint, key text, at bigint, kind text, from_account text, to_account text,
                                          amount bigint, owner text, hold text, segment text, expires_at bigint, source text)
    WHERE EXISTS (SELECT 1 FROM current)
  )
UPDATE nodus_meta SET resource_version = $6, commit_sequence = commit_sequence + 1
FROM current${
  notifyAs === undefined ? "" : `, (SELECT pg_notify('${notifyChannel}', '${notifyAs}:' || $6::text)) AS notified`
}
WHERE id = 1
RETURNING commit_sequence`

interface PostingRow {
  readonly seq: string
  readonly key: string
  readonly at: string
  readonly kind: string
  readonly from_account: string
  readonly to_account: string
  readonly amount: string
  readonly owner: string | null
  readonly hold: string | null
  readonly segment: string | null
  readonly expires_at: string | null
  readonly source: string | null
}

/**
 * The columns every posting query selects; bigints as text, since amounts may exceed what a JS number holds. Order by
 * `nodus_postings.seq`: a bare `seq` names the text column here, which sorts "10" before "9".
 */
const postingColumns = `seq::text AS seq, key, at::text AS at, kind, from_account, to_account, amount::text AS amount,
  owner, hold, segment, expires_at::text AS expires_at, source`

const postingOf = (row: PostingRow): Posting => ({
  seq: Number(row.seq),
  key: row.key,
  at: Number(row.at),
  kind: row.kind as PostingKind,
  from: row.from_account,
  to: row.to_account,
  amount: BigInt(row.amount),
  ...(row.owner === null ? {} : { owner: row.owner }),
  ...(row.hold === null ? {} : { hold: row.hold }),
  ...(row.segment === null ? {} : { segment: row.segment as Segment }),
  ...(row.expires_at === null ? {} : { expiresAt: Number(row.expires_at) }),
  ...(row.source === null ? {} : { source: row.source })
})

/** A posting as a row of `writeStatement`'s $8; the amount as a string, which JSON carries without losing digits. */
const postingRow = (posting: Posting): Json => ({
  seq: posting.seq,
  key: posting.key,
  at: posting.at,
  kind: posting.kind,
  from_account: posting.from,
  to_account: posting.to,
  amount: posting.amount.toString(),
  owner: posting.owner ?? null,
  hold: posting.hold ?? null,
  segment: posting.segment ?? null,
  expires_at: posting.expiresAt ?? null,
  source: posting.source ?? null
})

/** The parameters of `writeStatement` for a batch decided at commit sequence `sequence`. */
const writeParameters = (evaluation: Evaluation, sequence: number): ReadonlyArray<string | number> => {
  const upserts: Array<Json> = []
  const deletes: Array<Json> = []
  // An object written is usually also its change's: such a change carries no body and takes its row's (upserted), so
  // its text (a Job is about 3 KB of JSON) is escaped into one parameter, and PostgreSQL parses it once.
  const written = new Set<ResourceObject>()
  for (const write of evaluation.objects.values()) {
    if (write._tag === "Delete") {
      deletes.push({ ...write.key })
      continue
    }
    written.add(write.object)
    upserts.push({
      ...write.key,
      uid: write.object.metadata.uid,
      resource_version: Number(write.object.metadata.resourceVersion),
      deleting: write.deleting,
      labels: write.object.metadata.labels ?? {},
      owner_uids: [...ownerUids(write.object)],
      body: JSON.stringify(write.object)
    })
  }
  const changes = evaluation.changes.map((change) => ({
    resource_version: change.resourceVersion,
    type: change.type,
    ...change.key,
    body: written.has(change.object) ? null : JSON.stringify(change.object),
    previous: change.previous === undefined ? null : JSON.stringify(change.previous)
  }))
  const puts: Array<Json> = []
  const removes: Array<Json> = []
  for (const write of evaluation.records.values()) {
    if (write._tag === "Put") {
      puts.push({
        tbl: write.table,
        id: write.id,
        value: JSON.stringify(write.value),
        expires_at: write.expiresAt ?? null
      })
    } else removes.push({ tbl: write.table, id: write.id })
  }
  return [
    JSON.stringify(upserts),
    JSON.stringify(deletes),
    JSON.stringify(changes),
    JSON.stringify(puts),
    JSON.stringify(removes),
    evaluation.resourceVersion,
    sequence,
    JSON.stringify(evaluation.postings.map(postingRow))
  ]
}

interface Pending {
  readonly ops: ReadonlyArray<WriteOp>
  readonly done: Deferred.Deferred<Committed, CommitFailed | StoreError>
}

export interface SqlStoreOptions {
  /** Receives other processes' commit notifications (PostgreSQL LISTEN); absent on PGlite. */
  readonly listen?: (onNotify: (payload: string) => void) => Effect.Effect<void, SqlError.SqlError>
  /** Sends this process's commit notification inside the batch transaction. */
  readonly notify: boolean
}

/** A store over the current SqlClient. Runs migrations, then starts the writer fiber for the layer's lifetime. */
export const make = (options: SqlStoreOptions) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* migrate.pipe(
      Effect.mapError((cause) => new StoreError({ message: `migrations failed: ${String(cause)}`, cause }))
    )
    const listeners = new Set<CommitListener>()
    const notifyListeners: CommitListener = (committed) => {
      for (const listener of listeners) listener(committed)
    }
    const queue = yield* Queue.unbounded<Pending>()
    /** Names this process in its NOTIFY payloads (letters and digits only: it is spliced into the statement). */
    const origin = randomUUID().replaceAll("-", "")

    /**
     * The state of every key, record and posting key a batch touches, with the resourceVersion, commit sequence and
     * last posting seq it is read at (the last seq from the primary key's end: one index probe).
     */
    const readState = (batch: ReadonlyArray<ReadonlyArray<WriteOp>>, now: number) =>
      Effect.gen(function*() {
        const keys = touched(batch)
        type Row = {
          kind: string
          a: string
          b: string
          c: string
          resource_version: string | null
          deleting: boolean | null
        }
        const rows = yield* sql.unsafe<Row>(readStateStatement, [
          JSON.stringify([...keys.objects.values()]),
          JSON.stringify([...keys.records.values()].map(({ table, id }) => ({ tbl: table, id }))),
          now,
          JSON.stringify([...keys.postings])
        ])
        const meta = rows.find((row) => row.kind === "m")
        const objects = new Map<string, { resourceVersion: number; deleting: boolean }>()
        const records = new Set<string>()
        const postedKeys = new Set<string>()
        for (const row of rows) {
          if (row.kind === "o") {
            objects.set(keyString({ resource: row.a, namespace: row.b, name: row.c }), {
              resourceVersion: Number(row.resource_version),
              deleting: row.deleting === true
            })
          } else if (row.kind === "r") records.add(recordKey(row.a, row.b))
          else if (row.kind === "p") postedKeys.add(row.a)
        }
        const postings = { lastSeq: Number(meta?.c ?? 0), keys: postedKeys }
        return { base: Number(meta?.a ?? 0), sequence: Number(meta?.b ?? 0), state: { objects, records, postings } }
      })

    /** How often a batch is decided again because other processes kept committing first. */
    const batchAttemptsMax = 50

    /** Decides a batch and writes it, again from a fresh read while another process committed in between. */
    const runBatch = (
      batch: ReadonlyArray<Pending>,
      now: number,
      attempt = 1
    ): Effect.Effect<{ readonly evaluation: Evaluation; readonly base: number }, SqlError.SqlError | StoreError> =>
      Effect.gen(function*() {
        const opsList = batch.map((pending) => pending.ops)
        const { base, sequence, state } = yield* readState(opsList, now)
        const evaluation = evaluate(opsList, state, base)
        if (
          evaluation.changes.length === 0 && evaluation.records.size === 0 && evaluation.postings.length === 0
        ) return { evaluation, base }
        const written = yield* sql.unsafe(
          writeStatement(options.notify && evaluation.changes.length > 0 ? origin : undefined),
          writeParameters(evaluation, sequence) as Array<string | number>
        )
        if (written.length > 0) return { evaluation, base }
        if (attempt >= batchAttemptsMax) {
          return yield* new StoreError({ message: `the store stayed contended for ${batchAttemptsMax} attempts` })
        }
        return yield* runBatch(batch, now, attempt + 1)
      })

    const settle = (batch: ReadonlyArray<Pending>, evaluation: Evaluation) =>
      Effect.forEach(batch, (pending, index) => {
        const outcome = evaluation.outcomes[index]!
        return Result.isSuccess(outcome)
          ? Deferred.succeed(pending.done, outcome.success)
          : Deferred.fail(pending.done, outcome.failure)
      }, { discard: true })

    // A failing write statement writes nothing; then each commit runs alone so that a bad one fails only itself.
    const commitBatch = (batch: ReadonlyArray<Pending>): Effect.Effect<void> =>
      Effect.gen(function*() {
        const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        const result = yield* Effect.result(runBatch(batch, now))
        if (Result.isSuccess(result)) {
          const { evaluation, base } = result.success
          yield* settle(batch, evaluation)
          notifyListeners({ after: base, changes: evaluation.changes })
          return
        }
        if (batch.length > 1) {
          return yield* Effect.forEach(batch, (pending) => commitBatch([pending]), { discard: true })
        }
        const error = result.failure
        yield* Deferred.fail(batch[0]!.done, error._tag === "StoreError" ? error : failure("commit failed")(error))
      })

    yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.takeBetween(queue, 1, batchCommitsMax), commitBatch)))
    // This process's own commits reach its listeners with their changes (commitBatch): their notifications are skipped.
    const ownNotification = `${origin}:`
    if (options.listen !== undefined) {
      yield* Effect.forkScoped(Effect.forever(Effect.ignore(options.listen((payload) => {
        if (!payload.startsWith(ownNotification)) notifyListeners()
      }))))
    }

    const get: StoreShape["get"] = (key) =>
      sql.unsafe<{ body: string }>(
        `SELECT body FROM nodus_objects WHERE resource = $1 AND namespace = $2 AND name = $3`,
        [key.resource, key.namespace, key.name]
      ).pipe(
        Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => parseObject(row.body))),
        Effect.mapError(failure("get failed"))
      )

    /**
     * The WHERE clause of a list and its count, with only the terms the query has: exact predicates let PostgreSQL walk
     * the primary key (resource, namespace, name) from the cursor, and count from the index without reading bodies.
     */
    const listFilter = (query: ListQuery, after: ListQuery["after"]) => {
      const terms: Array<string> = ["resource = $1"]
      const parameters: Array<string> = [query.resource]
      const parameter = (value: string) => `$${parameters.push(value)}`
      if (query.namespace !== undefined) terms.push(`namespace = ${parameter(query.namespace)}`)
      if (query.name !== undefined) terms.push(`name = ${parameter(query.name)}`)
      if (after !== undefined) {
        terms.push(`(namespace, name) > (${parameter(after.namespace)}, ${parameter(after.name)})`)
      }
      if ((query.labelEquals ?? []).length > 0) {
        terms.push(`labels @> ${parameter(JSON.stringify(Object.fromEntries(query.labelEquals!)))}::jsonb`)
      }
      return { where: terms.join(" AND "), parameters }
    }

    // The page and the store's resourceVersion come from one statement (one snapshot); the count of what follows is
    // only needed for a full page.
    const listText: StoreShape["listText"] = (query: ListQuery) =>
      Effect.gen(function*() {
        const page = listFilter(query, query.after)
        const limit = query.limit === undefined ? "" : ` LIMIT ${Math.max(0, Math.floor(query.limit))}`
        const rows = yield* sql.unsafe<
          { resource_version: string; body: string | null; namespace: string; name: string }
        >(
          `SELECT m.resource_version::text AS resource_version, o.body, o.namespace, o.name
         FROM nodus_meta m
         LEFT JOIN LATERAL (
           SELECT body, namespace, name FROM nodus_objects WHERE ${page.where} ORDER BY namespace, name${limit}) o ON true
        WHERE m.id = 1
        ORDER BY o.namespace, o.name`,
          page.parameters
        )
        const items = rows.flatMap((
          row
        ) => (row.body === null ? [] : [{ namespace: row.namespace, name: row.name, text: row.body }]))
        const last = items.at(-1)
        const full = query.limit !== undefined && last !== undefined && items.length === query.limit
        let remaining = 0
        if (full) {
          const rest = listFilter(query, { namespace: last.namespace, name: last.name })
          const cap = query.countUpTo === undefined ? "" : ` LIMIT ${Math.max(0, Math.floor(query.countUpTo)) + 1}`
          const counted = yield* sql.unsafe<{ remaining: string }>(
            `SELECT count(*)::text AS remaining FROM (SELECT 1 FROM nodus_objects WHERE ${rest.where}${cap}) AS rest`,
            rest.parameters
          )
          remaining = Number(counted[0]?.remaining ?? 0)
        }
        return { items, resourceVersion: Number(rows[0]?.resource_version ?? 0), remaining }
      }).pipe(Effect.mapError(failure("list failed")))

    const list: StoreShape["list"] = (query: ListQuery) =>
      Effect.map(listText(query), (page) => ({ ...page, items: page.items.map((item) => parseObject(item.text)) }))

    // Summed by the database over every posting: each moves its amount out of one account and into another. The sums
    // are numeric, read as text so that no digit passes through a JS number.
    const balances: StoreShape["balances"] = () =>
      sql.unsafe<{ account: string; balance: string }>(
        `SELECT account, sum(amount)::text AS balance
         FROM (SELECT to_account AS account, amount FROM nodus_postings
               UNION ALL
               SELECT from_account, -amount FROM nodus_postings) AS moves
        GROUP BY account`
      ).pipe(
        Effect.map((rows) => new Map(rows.map((row) => [row.account, BigInt(row.balance)] as const))),
        Effect.mapError(failure("balances query failed"))
      )

    return Store.of({
      get,
      list,
      listText,
      dependentsOf: (uid) =>
        sql.unsafe<{ body: string }>(`SELECT body FROM nodus_objects WHERE owner_uids @> $1::jsonb`, [
          JSON.stringify([uid])
        ]).pipe(
          Effect.map((rows) => rows.map((row) => parseObject(row.body))),
          Effect.mapError(failure("dependents query failed"))
        ),
      uidExists: (uid) =>
        sql.unsafe<{ found: number }>(`SELECT 1 AS found FROM nodus_objects WHERE uid = $1 LIMIT 1`, [uid]).pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.mapError(failure("uid query failed"))
        ),
      commit: (ops) =>
        Effect.flatMap(
          Deferred.make<Committed, CommitFailed | StoreError>(),
          (done) => Effect.andThen(Queue.offer(queue, { ops, done }), Deferred.await(done))
        ),
      resourceVersion: sql.unsafe<{ resource_version: string }>(
        `SELECT resource_version::text AS resource_version FROM nodus_meta WHERE id = 1`
      ).pipe(
        Effect.map((rows) => Number(rows[0]?.resource_version ?? 0)),
        Effect.mapError(failure("resourceVersion query failed"))
      ),
      changes: (after, limit) =>
        Effect.all([
          sql.unsafe<ChangeRow>(
            `SELECT resource_version::text AS resource_version, type, resource, namespace, name, body, previous
             FROM nodus_changes WHERE resource_version > $1 ORDER BY nodus_changes.resource_version LIMIT $2`,
            [after, limit]
          ),
          sql.unsafe<{ compacted: string }>(
            `SELECT compacted_resource_version::text AS compacted FROM nodus_meta WHERE id = 1`
          )
        ]).pipe(
          Effect.map(([rows, meta]) => ({
            changes: rows.map(changeOf),
            compactedResourceVersion: Number(meta[0]?.compacted ?? 0)
          })),
          Effect.mapError(failure("changes query failed"))
        ),
      compact: (upTo) =>
        sql.withTransaction(Effect.andThen(
          sql.unsafe(`DELETE FROM nodus_changes WHERE resource_version <= $1`, [upTo]),
          sql.unsafe(
            `UPDATE nodus_meta SET compacted_resource_version = greatest(compacted_resource_version, least($1::bigint, resource_version)) WHERE id = 1`,
            [upTo]
          )
        )).pipe(Effect.asVoid, Effect.mapError(failure("compaction failed"))),
      getRecord: (table, id, now) =>
        sql.unsafe<{ value: string }>(
          `SELECT value FROM nodus_records WHERE tbl = $1 AND id = $2 AND (expires_at IS NULL OR expires_at > $3)`,
          [table, id, now]
        ).pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => JSON.parse(row.value) as Json)),
          Effect.mapError(failure("record query failed"))
        ),
      records: (table, after, limit, now) =>
        sql.unsafe<{ id: string; value: string }>(
          `SELECT id, value FROM nodus_records WHERE tbl = $1 AND id > $2 AND (expires_at IS NULL OR expires_at > $3) ORDER BY id LIMIT $4`,
          [table, after, now, Math.max(0, limit)]
        ).pipe(
          Effect.map((rows) => rows.map((row) => ({ id: row.id, value: JSON.parse(row.value) as Json }))),
          Effect.mapError(failure("records query failed"))
        ),
      deleteExpiredRecords: (now) =>
        sql.unsafe<{ id: string }>(
          `DELETE FROM nodus_records WHERE expires_at IS NOT NULL AND expires_at <= $1 RETURNING id`,
          [now]
        ).pipe(
          Effect.map((rows) => rows.length),
          Effect.mapError(failure("record expiry failed"))
        ),
      postings: (after, limit) =>
        sql.unsafe<PostingRow>(
          `SELECT ${postingColumns} FROM nodus_postings WHERE seq > $1 ORDER BY nodus_postings.seq LIMIT $2`,
          [after, Math.max(0, limit)]
        ).pipe(
          Effect.map((rows) => rows.map(postingOf)),
          Effect.mapError(failure("postings query failed"))
        ),
      balances,
      onCommit: (listener) =>
        Effect.sync(() => {
          listeners.add(listener)
          return Effect.sync(() => void listeners.delete(listener))
        })
    })
  })

/**
 * The blobs (store/BlobStore.ts) in the same database — their bytes in `filesDir` when given (the embedded default);
 * the store's layer runs the migrations first.
 */
const blobs = (filesDir?: string) => Layer.effect(BlobStore, makeSqlBlobs(filesDir))

/** The store on a PostgreSQL server; commits of other processes on the same database arrive by LISTEN/NOTIFY. */
export const layerPostgres = (url: string): Layer.Layer<Store | BlobStore, StoreError | SqlError.SqlError> =>
  Layer.effect(
    Store,
    Effect.gen(function*() {
      const pg = yield* PgClient.PgClient
      const listen = (onNotify: (payload: string) => void) =>
        Effect.scoped(Effect.gen(function*() {
          const notifications = yield* pg.listen(notifyChannel)
          yield* Effect.forever(
            Effect.tap(Queue.take(notifications), (notification) => Effect.sync(() => onNotify(notification.payload)))
          )
        }))
      return yield* make({ listen: (onNotify) => Effect.asVoid(listen(onNotify)), notify: true })
    })
  ).pipe(
    Layer.merge(blobs()),
    Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 16 }))
  )

/**
 * The store on embedded PGlite in `dataDir` (in memory when undefined), blob bytes in `blobsDir` when given (in the
 * database otherwise).
 */
export const layerPglite = (
  dataDir: string | undefined,
  blobsDir?: string
): Layer.Layer<Store | BlobStore, StoreError | SqlError.SqlError> =>
  Layer.effect(Store, make({ notify: false })).pipe(
    Layer.merge(blobs(blobsDir)),
    Layer.provide(Pglite.layer(dataDir))
  )
