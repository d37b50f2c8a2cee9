/**
 * The in-memory store driver: the simulator's store and the fast tests'. It keeps the same contract as the SQL
 * drivers (test/store/StoreContract.ts) and decides commits with the same evaluator (Commit.ts); a commit is one
 * synchronous step, so it is atomic without locks.
 */
import { Effect, Layer, Option, Result } from "effect"
import type { Posting } from "../core/billing/Ledger.ts"
import type { Json } from "../core/Json.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { ownerUids } from "../core/meta/Strategy.ts"
import * as BlobStore from "./BlobStore.ts"
import { evaluate, touched } from "./Commit.ts"
import {
  type Change,
  type ChangesPage,
  type CommitListener,
  type Committed,
  keyString,
  type ListPage,
  type ListQuery,
  type ObjectKey,
  recordKey,
  Store,
  StoreError,
  type StoreShape,
  type WriteOp
} from "./Store.ts"

interface StoredRecord {
  readonly table: string
  readonly id: string
  readonly value: Json
  readonly expiresAt: number | undefined
}

// Names are ASCII (DNS-1123), so code-unit order is the order PostgreSQL's "C" collation gives.
const compareText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

const compareCursor = (namespace: string, name: string, object: ResourceObject): number => {
  const byNamespace = compareText(object.metadata.namespace ?? "", namespace)
  return byNamespace !== 0 ? byNamespace : compareText(object.metadata.name, name)
}

const compareKeys = (a: ResourceObject, b: ResourceObject): number =>
  compareCursor(b.metadata.namespace ?? "", b.metadata.name, a)

const matchesLabels = (object: ResourceObject, terms: ReadonlyArray<readonly [string, string]>): boolean =>
  terms.every(([key, value]) => object.metadata.labels?.[key] === value)

const bigintMax = 2n ** 63n - 1n

/**
 * A posting the SQL drivers' `amount` column would reject (CHECK amount >= 0, PostgreSQL bigint range), failing the
 * commit with a StoreError; this driver rejects the same ones so that no caller relies on storing them.
 */
const unstorable = (postings: ReadonlyArray<Posting>): StoreError | undefined => {
  const bad = postings.find((posting) => posting.amount < 0n || posting.amount > bigintMax)
  return bad === undefined
    ? undefined
    : new StoreError({ message: `posting ${bad.key}: amount ${bad.amount} cannot be stored` })
}

/** A fresh, empty in-memory store. */
export const make: Effect.Effect<StoreShape> = Effect.sync(() => {
  const objects = new Map<string, ResourceObject>()
  const byResource = new Map<string, Map<string, ResourceObject>>()
  const uids = new Set<string>()
  const records = new Map<string, StoredRecord>()
  const changes: Array<Change> = []
  // Seqs start at 1 and every Post takes the next one, so the posting with seq n is at index n - 1.
  const postings: Array<Posting> = []
  const postedKeys = new Set<string>()
  const balances = new Map<string, bigint>()
  const listeners = new Set<CommitListener>()
  let resourceVersion = 0
  let compacted = 0

  const resourceMap = (resource: string) => {
    let map = byResource.get(resource)
    if (map === undefined) byResource.set(resource, map = new Map())
    return map
  }

  const liveRecord = (id: string, now: number): StoredRecord | undefined => {
    const record = records.get(id)
    return record !== undefined && (record.expiresAt === undefined || record.expiresAt > now) ? record : undefined
  }

  const put = (key: ObjectKey, object: ResourceObject) => {
    const previous = objects.get(keyString(key))
    if (previous !== undefined) uids.delete(previous.metadata.uid)
    objects.set(keyString(key), object)
    resourceMap(key.resource).set(`${key.namespace}/${key.name}`, object)
    uids.add(object.metadata.uid)
  }

  const drop = (key: ObjectKey) => {
    const previous = objects.get(keyString(key))
    if (previous !== undefined) uids.delete(previous.metadata.uid)
    objects.delete(keyString(key))
    resourceMap(key.resource).delete(`${key.namespace}/${key.name}`)
  }

  const append = (posting: Posting) => {
    postings.push(posting)
    postedKeys.add(posting.key)
    balances.set(posting.from, (balances.get(posting.from) ?? 0n) - posting.amount)
    balances.set(posting.to, (balances.get(posting.to) ?? 0n) + posting.amount)
  }

  const commitNow = (ops: ReadonlyArray<WriteOp>, now: number) => {
    const keys = touched([ops])
    const state = {
      objects: new Map([...keys.objects].flatMap(([id]) => {
        const object = objects.get(id)
        return object === undefined
          ? []
          : [
            [id, {
              resourceVersion: Number(object.metadata.resourceVersion),
              deleting: object.metadata.deletionTimestamp !== undefined
            }] as const
          ]
      })),
      records: new Set([...keys.records.keys()].filter((id) => liveRecord(id, now) !== undefined)),
      postings: {
        lastSeq: postings.at(-1)?.seq ?? 0,
        keys: new Set([...keys.postings].filter((key) => postedKeys.has(key)))
      }
    }
    const evaluation = evaluate([ops], state, resourceVersion)
    const outcome = evaluation.outcomes[0]!
    if (outcome._tag === "Failure") return { outcome, after: resourceVersion, changes: [] }
    const rejected = unstorable(evaluation.postings)
    if (rejected !== undefined) return { outcome: Result.fail(rejected), after: resourceVersion, changes: [] }
    for (const write of evaluation.objects.values()) {
      if (write._tag === "Upsert") put(write.key, write.object)
      else drop(write.key)
    }
    for (const write of evaluation.records.values()) {
      if (write._tag === "Put") {
        records.set(recordKey(write.table, write.id), {
          table: write.table,
          id: write.id,
          value: write.value,
          expiresAt: write.expiresAt
        })
      } else records.delete(recordKey(write.table, write.id))
    }
    for (const posting of evaluation.postings) append(posting)
    const after = resourceVersion
    changes.push(...evaluation.changes)
    resourceVersion = evaluation.resourceVersion
    return { outcome, after, changes: evaluation.changes }
  }

  const recordsOf = (table: string, after: string, limit: number, now: number) => {
    const found: Array<StoredRecord> = []
    for (const record of records.values()) {
      if (
        record.table === table && compareText(record.id, after) > 0 &&
        (record.expiresAt === undefined || record.expiresAt > now)
      ) found.push(record)
    }
    return found.sort((a, b) => compareText(a.id, b.id)).slice(0, Math.max(0, limit)).map(({ id, value }) => ({
      id,
      value
    }))
  }

  const list = (query: ListQuery): ListPage => {
    const all = [...resourceMap(query.resource).values()]
      .filter((object) => query.namespace === undefined || (object.metadata.namespace ?? "") === query.namespace)
      .filter((object) => query.name === undefined || object.metadata.name === query.name)
      .filter((object) => matchesLabels(object, query.labelEquals ?? []))
      .filter((object) =>
        query.after === undefined || compareCursor(query.after.namespace, query.after.name, object) > 0
      )
      .sort(compareKeys)
    const items = query.limit === undefined ? all : all.slice(0, query.limit)
    const rest = all.length - items.length
    return {
      items,
      resourceVersion,
      remaining: query.countUpTo === undefined ? rest : Math.min(rest, query.countUpTo + 1)
    }
  }

  const changesAfter = (after: number, limit: number): ChangesPage => {
    // Changes are in resourceVersion order; find the first one after `after` by binary search.
    let low = 0
    let high = changes.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if (changes[middle]!.resourceVersion <= after) low = middle + 1
      else high = middle
    }
    return { changes: changes.slice(low, low + limit), compactedResourceVersion: compacted }
  }

  return Store.of({
    get: (key) => Effect.sync(() => Option.fromNullishOr(objects.get(keyString(key)))),
    list: (query) => Effect.sync(() => list(query)),
    listText: (query) =>
      Effect.sync(() => {
        const page = list(query)
        return {
          ...page,
          items: page.items.map((object) => ({
            namespace: object.metadata.namespace ?? "",
            name: object.metadata.name,
            text: JSON.stringify(object)
          }))
        }
      }),
    dependentsOf: (uid) => Effect.sync(() => [...objects.values()].filter((object) => ownerUids(object).includes(uid))),
    uidExists: (uid) => Effect.sync(() => uids.has(uid)),
    commit: (ops) =>
      Effect.flatMap(Effect.clockWith((clock) => clock.currentTimeMillis), (now) =>
        Effect.suspend(() => {
          const { outcome, after, changes: committed } = commitNow(ops, now)
          if (outcome._tag === "Failure") return Effect.fail(outcome.failure)
          for (const listener of listeners) listener({ after, changes: committed })
          return Effect.succeed<Committed>(outcome.success)
        })),
    resourceVersion: Effect.sync(() => resourceVersion),
    changes: (after, limit) => Effect.sync(() => changesAfter(after, limit)),
    compact: (upTo) =>
      Effect.sync(() => {
        const keep = changes.findIndex((change) => change.resourceVersion > upTo)
        changes.splice(0, keep === -1 ? changes.length : keep)
        compacted = Math.max(compacted, Math.min(upTo, resourceVersion))
      }),
    getRecord: (table, id, now) =>
      Effect.sync(() => Option.fromNullishOr(liveRecord(recordKey(table, id), now)?.value)),
    records: (table, after, limit, now) => Effect.sync(() => recordsOf(table, after, limit, now)),
    postings: (after, limit) =>
      Effect.sync(() => postings.slice(Math.max(0, after), Math.max(0, after) + Math.max(0, limit))),
    balances: () => Effect.sync(() => new Map(balances)),
    deleteExpiredRecords: (now) =>
      Effect.sync(() => {
        let removed = 0
        for (const [id, record] of records) {
          if (record.expiresAt !== undefined && record.expiresAt <= now) {
            records.delete(id)
            removed += 1
          }
        }
        return removed
      }),
    onCommit: (listener) =>
      Effect.sync(() => {
        listeners.add(listener)
        return Effect.sync(() => void listeners.delete(listener))
      })
  })
})

/** The store and its blobs (store/BlobStore.ts), in memory. */
export const layer: Layer.Layer<Store | BlobStore.BlobStore> = Layer.merge(
  Layer.effect(Store, make),
  BlobStore.layerMemory
)
