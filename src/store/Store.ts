/**
 * The store port: what the API machinery needs from persistence, and nothing more. It is shaped like etcd as the
 * Kubernetes API server uses it: objects under keys, each write a compare-and-swap on the object's resourceVersion,
 * one monotonic resourceVersion counter per store, and an ordered change log that watches replay from. Beside the
 * objects sit a small record table (idempotency keys, API keys, server secrets) and the billing ledger's postings
 * (core/billing/Ledger.ts), so that every write of one request can be a single atomic commit.
 *
 * Drivers: MemoryStore (simulator and fast tests), SqlStore on PostgreSQL (@effect/sql-pg) and on embedded PGlite.
 * One contract suite (test/store/StoreContract.ts) holds all three to the same behaviour.
 */
import { Context, Data, type Effect, type Option } from "effect"
import type { Posting } from "../core/billing/Ledger.ts"
import type { Json } from "../core/Json.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"

/** Where an object lives. `namespace` is "" for cluster-scoped kinds. */
export interface ObjectKey {
  readonly resource: string
  readonly namespace: string
  readonly name: string
}

/** Conditional writes of one commit. Every condition is checked before anything is written; all or nothing. */
export type WriteOp =
  /** Fails AlreadyExists when the key holds an object. */
  | { readonly _tag: "Create"; readonly key: ObjectKey; readonly object: ResourceObject }
  /** Fails NotFound, or Conflict when the stored resourceVersion is not `expectedRv`. `previous` is what was read. */
  | {
    readonly _tag: "Update"
    readonly key: ObjectKey
    readonly object: ResourceObject
    readonly previous: ResourceObject
    readonly expectedRv: string
  }
  /** Removes the object; `object` is its final state, which the DELETED event carries. Same conditions as Update. */
  | { readonly _tag: "Delete"; readonly key: ObjectKey; readonly object: ResourceObject; readonly expectedRv: string }
  /** Writes nothing; fails NotFound unless the key holds an object, and Terminating when it is being deleted. */
  | { readonly _tag: "Require"; readonly key: ObjectKey; readonly notDeleting: boolean }
  /**
   * Puts a record. With `ifAbsent` it fails RecordExists when an unexpired record has the id. With `embed`, the
   * committed object of op `embed.op` (with its new resourceVersion) is placed at `value[embed.field]` — how an
   * idempotency record stores the exact response of the write it commits with.
   */
  | {
    readonly _tag: "PutRecord"
    readonly table: string
    readonly id: string
    readonly value: Json
    readonly expiresAt?: number
    readonly ifAbsent?: boolean
    readonly embed?: { readonly field: string; readonly op: number }
  }
  | { readonly _tag: "DeleteRecord"; readonly table: string; readonly id: string }
  /**
   * Writes nothing; fails NotFound unless an unexpired record has the id (`present`), or RecordExists when one has it
   * (`!present`). A fencing token: a commit made for a shard's owner requires its epoch's record (docs/scale-out.md).
   */
  | { readonly _tag: "RequireRecord"; readonly table: string; readonly id: string; readonly present: boolean }
  /**
   * Appends a ledger posting. Fails RecordExists when a posting with its key is stored (its operation was applied
   * already), and Conflict unless its seq is one more than the last stored posting's, or than the commit's previous
   * Post (another writer posted first: the caller's ledger is behind). Posts are not objects: no change, no
   * resourceVersion.
   */
  | { readonly _tag: "Post"; readonly posting: Posting }

export type FailureReason = "AlreadyExists" | "NotFound" | "Conflict" | "Terminating" | "RecordExists"

/** A condition of a commit did not hold; nothing was written. */
export class CommitFailed extends Data.TaggedError("CommitFailed")<{
  /** The index of the first op whose condition failed. */
  readonly index: number
  readonly reason: FailureReason
}> {}

/** Persistence itself failed (connection lost, disk full). Never caused by what a client sent. */
export class StoreError extends Data.TaggedError("StoreError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** The resourceVersion asked for is older than the retained change log (HTTP 410 Expired for watches). */
export class Expired extends Data.TaggedError("Expired")<{
  readonly requested: number
  readonly oldest: number
}> {}

export interface Committed {
  /** Per op: the object as committed (with its resourceVersion) for Create and Update, the final state for Delete. */
  readonly objects: ReadonlyArray<ResourceObject | undefined>
  /** The store's resourceVersion after this commit. */
  readonly resourceVersion: number
}

export type ChangeType = "ADDED" | "MODIFIED" | "DELETED"

/** One entry of the change log. */
export interface Change {
  readonly resourceVersion: number
  readonly type: ChangeType
  readonly key: ObjectKey
  readonly object: ResourceObject
  /**
   * For MODIFIED: what selectors could see of the object before (Selectable.ts), to turn filtered watches into
   * ADDED/DELETED.
   */
  readonly previous?: ResourceObject
}

/** What a commit listener hears: this process's committed changes, or only that something was committed. */
export type CommitListener = (committed?: { readonly after: number; readonly changes: ReadonlyArray<Change> }) => void

export interface ListQuery {
  readonly resource: string
  /** Only this project; undefined = every project (or a cluster-scoped kind). */
  readonly namespace?: string
  /** Start after this (namespace, name), exclusive: the continue cursor. */
  readonly after?: { readonly namespace: string; readonly name: string }
  readonly limit?: number
  /** Label equality terms pushed down to the store (a store may ignore them: callers filter again). */
  readonly labelEquals?: ReadonlyArray<readonly [string, string]>
  /** Only this name (a `metadata.name=` field selector). */
  readonly name?: string
  /**
   * Counting what follows a full page costs a walk over it: count at most this many. `remaining` is then at most
   * `countUpTo + 1`, which means "more than countUpTo".
   */
  readonly countUpTo?: number
}

export interface ListPage {
  readonly items: ReadonlyArray<ResourceObject>
  /** The store's resourceVersion when this page was read. */
  readonly resourceVersion: number
  /** How many objects after the page match the pushed-down terms (capped by `countUpTo`; 0 unless the page is full). */
  readonly remaining: number
}

/** One listed object as the store keeps it: its key, and its JSON text unparsed (what a list answer carries as is). */
export interface ListedText {
  readonly namespace: string
  readonly name: string
  readonly text: string
}

/** A page of `listText`: as `ListPage`, the objects as their stored JSON text. */
export interface TextPage {
  readonly items: ReadonlyArray<ListedText>
  readonly resourceVersion: number
  readonly remaining: number
}

export interface ChangesPage {
  readonly changes: ReadonlyArray<Change>
  /** Changes at or below this resourceVersion are gone. */
  readonly compactedResourceVersion: number
}

/** One record as `records` reads it. */
export interface StoredRecordEntry {
  readonly id: string
  readonly value: Json
}

export interface StoreShape {
  readonly get: (key: ObjectKey) => Effect.Effect<Option.Option<ResourceObject>, StoreError>
  readonly list: (query: ListQuery) => Effect.Effect<ListPage, StoreError>
  /**
   * `list`, each object as the JSON text the store holds (`JSON.stringify` of it), not parsed: a list answer that
   * needs nothing of its items but their keys passes them through.
   */
  readonly listText: (query: ListQuery) => Effect.Effect<TextPage, StoreError>
  /** Objects whose ownerReferences name this uid (for the garbage collector). */
  readonly dependentsOf: (uid: string) => Effect.Effect<ReadonlyArray<ResourceObject>, StoreError>
  /** Whether any object carries this uid. */
  readonly uidExists: (uid: string) => Effect.Effect<boolean, StoreError>
  readonly commit: (ops: ReadonlyArray<WriteOp>) => Effect.Effect<Committed, CommitFailed | StoreError>
  readonly resourceVersion: Effect.Effect<number, StoreError>
  /** Changes after `after`, in order, at most `limit`. */
  readonly changes: (after: number, limit: number) => Effect.Effect<ChangesPage, StoreError>
  /** Drops changes at or below `upTo`; watches from there on answer Expired. */
  readonly compact: (upTo: number) => Effect.Effect<void, StoreError>
  readonly getRecord: (table: string, id: string, now: number) => Effect.Effect<Option.Option<Json>, StoreError>
  /**
   * The unexpired records of one table with ids above `after` (bytewise), in id order, at most `limit`: how a service
   * reloads what it keeps per id (Budgets' ledger owners) in a few queries rather than one per id.
   */
  readonly records: (
    table: string,
    after: string,
    limit: number,
    now: number
  ) => Effect.Effect<ReadonlyArray<StoredRecordEntry>, StoreError>
  readonly deleteExpiredRecords: (now: number) => Effect.Effect<number, StoreError>
  /** Ledger postings with seq above `after`, in seq order, at most `limit`: what `Ledger.replay` rebuilds from. */
  readonly postings: (after: number, limit: number) => Effect.Effect<ReadonlyArray<Posting>, StoreError>
  /**
   * Per account that any posting names: the amounts posted to it minus those posted from it, over every stored posting.
   */
  readonly balances: () => Effect.Effect<ReadonlyMap<string, bigint>, StoreError>
  /**
   * Signals commits, including those of other processes sharing the database (PostgreSQL LISTEN/NOTIFY). For this
   * process's own commits the listener gets the changes and the resourceVersion they follow, so the change feed can
   * publish them without reading them back (none for a commit of records alone, which it hears too: the webhook
   * dispatcher wakes on the outbox's records); for other processes' it gets nothing and reads the log. Each call
   * registers a listener; the returned effect unregisters it.
   */
  readonly onCommit: (listener: CommitListener) => Effect.Effect<Effect.Effect<void>>
}

export class Store extends Context.Service<Store, StoreShape>()("nodus/store/Store") {}

export const keyString = (key: ObjectKey): string => `${key.resource}/${key.namespace}/${key.name}`

export const recordKey = (table: string, id: string): string => `${table}/${id}`
