/**
 * How a batch of commits is decided, apart from where it is written. Every driver collects the commits waiting at one
 * moment, reads the current resourceVersions of the keys they touch (and the ledger's last seq and posted keys), and
 * asks `evaluate` which commits hold and what to write. Commits are decided in arrival order, each seeing the effects
 * of the ones before it, so a batch is equivalent to running its commits one after another — at the cost of one
 * transaction for all of them (group commit, as TigerBeetle batches its prepares).
 *
 * Pure: no I/O; the driver supplies the state and writes the result.
 */
import { Result } from "effect"
import type { Posting } from "../core/billing/Ledger.ts"
import type { Json } from "../core/Json.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { selectable } from "../core/meta/Selectable.ts"
import {
  type Change,
  CommitFailed,
  type Committed,
  keyString,
  type ObjectKey,
  recordKey,
  type WriteOp
} from "./Store.ts"

/** What the store holds now for one key the batch touches. */
export interface ObjectState {
  readonly resourceVersion: number
  readonly deleting: boolean
}

/** What the store holds of the ledger, as far as the batch's Post ops need to know. */
export interface PostingState {
  /** The seq of the last stored posting (0 when there is none). */
  readonly lastSeq: number
  /** The keys the batch posts that a stored posting has. */
  readonly keys: ReadonlySet<string>
}

export interface BatchState {
  /** Keys (keyString) the batch touches that hold an object. */
  readonly objects: ReadonlyMap<string, ObjectState>
  /** Records (recordKey) the batch touches that exist and have not expired. */
  readonly records: ReadonlySet<string>
  readonly postings: PostingState
}

export type ObjectWrite =
  | { readonly _tag: "Upsert"; readonly key: ObjectKey; readonly object: ResourceObject; readonly deleting: boolean }
  | { readonly _tag: "Delete"; readonly key: ObjectKey }

export type RecordWrite =
  | {
    readonly _tag: "Put"
    readonly table: string
    readonly id: string
    readonly value: Json
    readonly expiresAt: number | undefined
  }
  | { readonly _tag: "Delete"; readonly table: string; readonly id: string }

export interface Evaluation {
  /** Per commit, in order: what it committed, or the condition that failed. */
  readonly outcomes: ReadonlyArray<Result.Result<Committed, CommitFailed>>
  /** The last write per key; earlier writes of the same key in the batch are superseded. */
  readonly objects: ReadonlyMap<string, ObjectWrite>
  readonly records: ReadonlyMap<string, RecordWrite>
  /** Postings to append, in seq order. */
  readonly postings: ReadonlyArray<Posting>
  readonly changes: ReadonlyArray<Change>
  /** The store's resourceVersion after the batch. */
  readonly resourceVersion: number
}

/** All keys, records and posting keys a batch reads before deciding. */
export const touched = (batch: ReadonlyArray<ReadonlyArray<WriteOp>>) => {
  const objects = new Map<string, ObjectKey>()
  const records = new Map<string, { readonly table: string; readonly id: string }>()
  const postings = new Set<string>()
  for (const ops of batch) {
    for (const op of ops) {
      if (op._tag === "Post") postings.add(op.posting.key)
      else if (op._tag === "PutRecord" || op._tag === "DeleteRecord" || op._tag === "RequireRecord") {
        records.set(recordKey(op.table, op.id), { table: op.table, id: op.id })
      } else objects.set(keyString(op.key), op.key)
    }
  }
  return { objects, records, postings }
}

const isDeleting = (object: ResourceObject): boolean => object.metadata.deletionTimestamp !== undefined

/** The first op of one commit whose condition fails against `state`, if any. */
const check = (
  ops: ReadonlyArray<WriteOp>,
  objects: ReadonlyMap<string, ObjectState>,
  records: ReadonlySet<string>,
  postings: PostingState
): CommitFailed | undefined => {
  // Conditions see the commit's own earlier ops, so "create A, then update A" in one commit is coherent.
  const local = new Map(objects)
  const localRecords = new Set(records)
  const postedKeys = new Set(postings.keys)
  let lastSeq = postings.lastSeq
  for (const [index, op] of ops.entries()) {
    const failure = (reason: CommitFailed["reason"]) => new CommitFailed({ index, reason })
    if (op._tag === "Post") {
      // The key first: an operation applied before stays applied, whatever seq its retry carries.
      if (postedKeys.has(op.posting.key)) return failure("RecordExists")
      if (op.posting.seq !== lastSeq + 1) return failure("Conflict")
      postedKeys.add(op.posting.key)
      lastSeq = op.posting.seq
      continue
    }
    if (op._tag === "PutRecord") {
      if (op.ifAbsent === true && localRecords.has(recordKey(op.table, op.id))) return failure("RecordExists")
      localRecords.add(recordKey(op.table, op.id))
      continue
    }
    if (op._tag === "DeleteRecord") {
      localRecords.delete(recordKey(op.table, op.id))
      continue
    }
    if (op._tag === "RequireRecord") {
      const exists = localRecords.has(recordKey(op.table, op.id))
      if (op.present && !exists) return failure("NotFound")
      if (!op.present && exists) return failure("RecordExists")
      continue
    }
    const key = keyString(op.key)
    const current = local.get(key)
    switch (op._tag) {
      case "Create":
        if (current !== undefined) return failure("AlreadyExists")
        local.set(key, { resourceVersion: 0, deleting: false })
        break
      case "Require":
        if (current === undefined) return failure("NotFound")
        if (op.notDeleting && current.deleting) return failure("Terminating")
        break
      case "Update":
      case "Delete":
        if (current === undefined) return failure("NotFound")
        if (current.resourceVersion !== 0 && String(current.resourceVersion) !== op.expectedRv) {
          return failure("Conflict")
        }
        if (op._tag === "Delete") local.delete(key)
        else local.set(key, { resourceVersion: 0, deleting: isDeleting(op.object) })
        break
    }
  }
  return undefined
}

const stamp = (object: ResourceObject, resourceVersion: number): ResourceObject => ({
  ...object,
  metadata: { ...object.metadata, resourceVersion: String(resourceVersion) }
})

const embedded = (value: Json, field: string, object: ResourceObject | undefined): Json => {
  if (object === undefined || value === null || typeof value !== "object" || Array.isArray(value)) return value
  return { ...value, [field]: object as unknown as Json }
}

/**
 * Decides a batch. Each successful commit's object ops get consecutive resourceVersions after `baseResourceVersion`;
 * failed commits consume none.
 */
export const evaluate = (
  batch: ReadonlyArray<ReadonlyArray<WriteOp>>,
  state: BatchState,
  baseResourceVersion: number
): Evaluation => {
  const objects = new Map(state.objects)
  const records = new Set(state.records)
  const postedKeys = new Set(state.postings.keys)
  const objectWrites = new Map<string, ObjectWrite>()
  const recordWrites = new Map<string, RecordWrite>()
  const postings: Array<Posting> = []
  const changes: Array<Change> = []
  let resourceVersion = baseResourceVersion

  const outcomes = batch.map((ops): Result.Result<Committed, CommitFailed> => {
    const lastSeq = postings.at(-1)?.seq ?? state.postings.lastSeq
    const failure = check(ops, objects, records, { lastSeq, keys: postedKeys })
    if (failure !== undefined) return Result.fail(failure)
    const committed: Array<ResourceObject | undefined> = ops.map((op) => {
      if (op._tag !== "Create" && op._tag !== "Update" && op._tag !== "Delete") return undefined
      resourceVersion += 1
      const key = keyString(op.key)
      const object = stamp(op.object, resourceVersion)
      if (op._tag === "Delete") {
        objects.delete(key)
        objectWrites.set(key, { _tag: "Delete", key: op.key })
        changes.push({ resourceVersion, type: "DELETED", key: op.key, object })
      } else {
        objects.set(key, { resourceVersion, deleting: isDeleting(object) })
        objectWrites.set(key, { _tag: "Upsert", key: op.key, object, deleting: isDeleting(object) })
        changes.push(
          op._tag === "Create"
            ? { resourceVersion, type: "ADDED", key: op.key, object }
            : { resourceVersion, type: "MODIFIED", key: op.key, object, previous: selectable(op.previous) }
        )
      }
      return object
    })
    for (const op of ops) {
      if (op._tag === "PutRecord") {
        const id = recordKey(op.table, op.id)
        const value = op.embed === undefined ? op.value : embedded(op.value, op.embed.field, committed[op.embed.op])
        records.add(id)
        recordWrites.set(id, { _tag: "Put", table: op.table, id: op.id, value, expiresAt: op.expiresAt })
      } else if (op._tag === "DeleteRecord") {
        const id = recordKey(op.table, op.id)
        records.delete(id)
        recordWrites.set(id, { _tag: "Delete", table: op.table, id: op.id })
      } else if (op._tag === "Post") {
        postedKeys.add(op.posting.key)
        postings.push(op.posting)
      }
    }
    return Result.succeed({ objects: committed, resourceVersion })
  })
  return { outcomes, objects: objectWrites, records: recordWrites, postings, changes, resourceVersion }
}
