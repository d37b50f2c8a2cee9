// Unit tests for the pure group-commit decision of src/store/Commit.ts, on hand-made BatchStates: commits decided in
// order, each seeing the ones before; failed commits write nothing and use no resourceVersion; the conditions
// (AlreadyExists, NotFound, Conflict, Terminating, RecordExists); `embed`; last write per key; ledger Posts (next seq,
// new key); `touched`; and a property holding `evaluate` to a one-commit-at-a-time model over random batches.

import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import type { Posting } from "../../src/core/billing/Ledger.ts"
import type { Json } from "../../src/core/Json.ts"
import type { ResourceObject } from "../../src/core/meta/ObjectMeta.ts"
import { selectable } from "../../src/core/meta/Selectable.ts"
import {
  type BatchState,
  evaluate,
  type Evaluation,
  type ObjectState,
  type PostingState,
  touched
} from "../../src/store/Commit.ts"
import {
  type CommitFailed,
  type Committed,
  type FailureReason,
  keyString,
  type ObjectKey,
  recordKey,
  type WriteOp
} from "../../src/store/Store.ts"

const base = 10

const keyOf = (name: string): ObjectKey => ({ resource: "jobs", namespace: "demo", name })
const idOf = (name: string): string => keyString(keyOf(name))

const makeObject = (
  name: string,
  options: { readonly deleting?: boolean; readonly image?: string } = {}
): ResourceObject => ({
  apiVersion: "nodus.dev/v1",
  kind: "Job",
  metadata: {
    name,
    namespace: "demo",
    uid: `uid-${name}`,
    resourceVersion: "",
    generation: 1,
    creationTimestamp: "2024-01-01T00:00:00Z",
    labels: { app: name },
    ...(options.deleting === true ? { deletionTimestamp: "2024-01-01T01:00:00Z", finalizers: ["example.com/f"] } : {})
  },
  spec: { image: options.image ?? "a" }
})

const create = (name: string): WriteOp => ({ _tag: "Create", key: keyOf(name), object: makeObject(name) })
const update = (name: string, expectedRv: string, options: { readonly deleting?: boolean } = {}): WriteOp => ({
  _tag: "Update",
  key: keyOf(name),
  object: makeObject(name, { ...options, image: "b" }),
  previous: makeObject(name),
  expectedRv
})
const remove = (name: string, expectedRv: string): WriteOp => ({
  _tag: "Delete",
  key: keyOf(name),
  object: makeObject(name),
  expectedRv
})
const requireOp = (name: string, notDeleting: boolean): WriteOp => ({ _tag: "Require", key: keyOf(name), notDeleting })
const putRecord = (
  id: string,
  value: Json,
  options: {
    readonly ifAbsent?: boolean
    readonly embed?: { readonly field: string; readonly op: number }
    readonly expiresAt?: number
  } = {}
): WriteOp => ({ _tag: "PutRecord", table: "idempotency", id, value, ...options })
const deleteRecord = (id: string): WriteOp => ({ _tag: "DeleteRecord", table: "idempotency", id })
const posting = (seq: number, key: string): Posting => ({
  seq,
  key,
  at: 0,
  kind: "Grant",
  from: "external",
  to: "available",
  amount: 1n
})
const post = (seq: number, key: string): WriteOp => ({ _tag: "Post", posting: posting(seq, key) })

const noPostings: PostingState = { lastSeq: 0, keys: new Set() }

const makeState = (
  objects: Record<string, ObjectState> = {},
  records: ReadonlyArray<string> = [],
  postings: PostingState = noPostings
): BatchState => ({
  objects: new Map(Object.entries(objects).map(([name, state]) => [idOf(name), state])),
  records: new Set(records.map((id) => recordKey("idempotency", id))),
  postings
})

const committed = (outcome: Result.Result<Committed, CommitFailed> | undefined): Committed => {
  if (outcome === undefined) assert.fail("no outcome")
  if (Result.isFailure(outcome)) {
    assert.fail(`expected the commit to hold, it failed ${outcome.failure.reason} at op ${outcome.failure.index}`)
  }
  return outcome.success
}

const failed = (outcome: Result.Result<Committed, CommitFailed> | undefined): readonly [number, FailureReason] => {
  if (outcome === undefined) assert.fail("no outcome")
  if (Result.isSuccess(outcome)) assert.fail("expected the commit to fail, it held")
  return [outcome.failure.index, outcome.failure.reason]
}

const rvsOf = (value: Committed): ReadonlyArray<string | undefined> =>
  value.objects.map((object) => object?.metadata.resourceVersion)

const writeOf = (evaluation: Evaluation, name: string) => evaluation.objects.get(idOf(name))

describe("Commit.evaluate", () => {
  it("decides commits in order, each seeing the ones before (create, then update, in two commits)", () => {
    const evaluation = evaluate([[create("a")], [update("a", "11")]], makeState(), base)
    assert.deepStrictEqual(rvsOf(committed(evaluation.outcomes[0])), ["11"])
    assert.deepStrictEqual(rvsOf(committed(evaluation.outcomes[1])), ["12"])
    assert.strictEqual(committed(evaluation.outcomes[1]).resourceVersion, 12)
    assert.strictEqual(evaluation.resourceVersion, 12)
    const write = writeOf(evaluation, "a")
    assert.strictEqual(write?._tag, "Upsert")
    assert.strictEqual(write?._tag === "Upsert" ? write.object.metadata.resourceVersion : undefined, "12")
    assert.deepStrictEqual(evaluation.changes.map((change) => [change.resourceVersion, change.type]), [[11, "ADDED"], [
      12,
      "MODIFIED"
    ]])
  })

  it("fails the second of two creates of one key with AlreadyExists", () => {
    const evaluation = evaluate([[create("a")], [create("a")]], makeState(), base)
    assert.deepStrictEqual(rvsOf(committed(evaluation.outcomes[0])), ["11"])
    assert.deepStrictEqual(failed(evaluation.outcomes[1]), [0, "AlreadyExists"])
    assert.strictEqual(evaluation.resourceVersion, 11)
  })

  it("a failed commit writes nothing and consumes no resourceVersion", () => {
    const evaluation = evaluate(
      [[create("a")], [create("b"), putRecord("k", 1), update("missing", "1")], [create("c")]],
      makeState(),
      base
    )
    assert.deepStrictEqual(rvsOf(committed(evaluation.outcomes[0])), ["11"])
    assert.deepStrictEqual(failed(evaluation.outcomes[1]), [2, "NotFound"])
    assert.deepStrictEqual(rvsOf(committed(evaluation.outcomes[2])), ["12"])
    assert.deepStrictEqual([...evaluation.objects.keys()].sort(), [idOf("a"), idOf("c")])
    assert.strictEqual(evaluation.records.size, 0)
    assert.deepStrictEqual(evaluation.changes.map((change) => [change.resourceVersion, change.key.name]), [[11, "a"], [
      12,
      "c"
    ]])
    assert.strictEqual(evaluation.resourceVersion, 12)
  })

  it("gives each object op of a commit the next resourceVersion, and other ops none", () => {
    const state = makeState({ c: { resourceVersion: 4, deleting: false }, d: { resourceVersion: 6, deleting: false } })
    const evaluation = evaluate(
      [[
        create("a"),
        create("b"),
        requireOp("c", true),
        putRecord("k", 1),
        update("c", "4"),
        deleteRecord("j"),
        remove("d", "6")
      ]],
      state,
      base
    )
    const value = committed(evaluation.outcomes[0])
    assert.deepStrictEqual(rvsOf(value), ["11", "12", undefined, undefined, "13", undefined, "14"])
    assert.strictEqual(value.resourceVersion, 14)
    assert.deepStrictEqual(evaluation.changes.map((change) => [change.resourceVersion, change.type, change.key.name]), [
      [11, "ADDED", "a"],
      [12, "ADDED", "b"],
      [13, "MODIFIED", "c"],
      [14, "DELETED", "d"]
    ])
  })

  it("an empty batch, or one of record ops only, keeps the resourceVersion", () => {
    assert.strictEqual(evaluate([], makeState(), base).resourceVersion, base)
    const evaluation = evaluate(
      [[putRecord("k", 1)], [requireOp("a", false)]],
      makeState({ a: { resourceVersion: 3, deleting: false } }),
      base
    )
    assert.strictEqual(committed(evaluation.outcomes[0]).resourceVersion, base)
    assert.strictEqual(committed(evaluation.outcomes[1]).resourceVersion, base)
    assert.strictEqual(evaluation.resourceVersion, base)
    assert.strictEqual(evaluation.changes.length, 0)
  })

  it("checks each op's condition", () => {
    const state = makeState(
      { live: { resourceVersion: 5, deleting: false }, deleting: { resourceVersion: 7, deleting: true } },
      ["existing"]
    )
    const table: Record<
      string,
      { readonly ops: ReadonlyArray<WriteOp>; readonly failure?: readonly [number, FailureReason] }
    > = {
      "create of a free key": { ops: [create("new")] },
      "create of a taken key": { ops: [create("live")], failure: [0, "AlreadyExists"] },
      "update at the stored version": { ops: [update("live", "5")] },
      "update at a stale version": { ops: [update("live", "4")], failure: [0, "Conflict"] },
      "update at a future version": { ops: [update("live", "6")], failure: [0, "Conflict"] },
      "update of a missing key": { ops: [update("new", "5")], failure: [0, "NotFound"] },
      "delete at the stored version": { ops: [remove("live", "5")] },
      "delete at a stale version": { ops: [remove("live", "1")], failure: [0, "Conflict"] },
      "delete of a missing key": { ops: [remove("new", "1")], failure: [0, "NotFound"] },
      "require of a live object": { ops: [requireOp("live", true)] },
      "require of a missing key": { ops: [requireOp("new", false)], failure: [0, "NotFound"] },
      "require notDeleting of a deleting object": { ops: [requireOp("deleting", true)], failure: [0, "Terminating"] },
      "require of a deleting object": { ops: [requireOp("deleting", false)] },
      "put of a new record, ifAbsent": { ops: [putRecord("fresh", 1, { ifAbsent: true })] },
      "put of an existing record, ifAbsent": {
        ops: [putRecord("existing", 1, { ifAbsent: true })],
        failure: [0, "RecordExists"]
      },
      "put of an existing record": { ops: [putRecord("existing", 1)] },
      "a record put earlier in the commit exists for ifAbsent": {
        ops: [putRecord("fresh", 1, { ifAbsent: true }), putRecord("fresh", 2, { ifAbsent: true })],
        failure: [1, "RecordExists"]
      },
      "a record deleted earlier in the commit is absent for ifAbsent": {
        ops: [deleteRecord("existing"), putRecord("existing", 2, { ifAbsent: true })]
      },
      "delete of a missing record": { ops: [deleteRecord("fresh")] },
      "the first failing op is named": {
        ops: [create("new"), requireOp("new", true), update("live", "1"), create("live")],
        failure: [2, "Conflict"]
      },
      "a commit's own earlier ops count": {
        ops: [create("new"), update("new", "anything"), remove("new", "anything"), create("new")]
      },
      "a delete frees the key within the commit": { ops: [remove("live", "5"), create("live")] },
      "a deleted key is gone within the commit": {
        ops: [remove("live", "5"), requireOp("live", false)],
        failure: [1, "NotFound"]
      },
      "an update that starts deletion counts for require": {
        ops: [update("live", "5", { deleting: true }), requireOp("live", true)],
        failure: [1, "Terminating"]
      }
    }
    for (const [label, row] of Object.entries(table)) {
      const evaluation = evaluate([row.ops], state, base)
      if (row.failure === undefined) {
        assert.isTrue(Result.isSuccess(evaluation.outcomes[0]!), label)
      } else {
        assert.deepStrictEqual(failed(evaluation.outcomes[0]), row.failure, label)
        assert.strictEqual(evaluation.objects.size + evaluation.records.size + evaluation.changes.length, 0, label)
        assert.strictEqual(evaluation.resourceVersion, base, label)
      }
    }
  })

  it("sees deletion started by an earlier commit of the batch", () => {
    const state = makeState({ a: { resourceVersion: 5, deleting: false } })
    const evaluation = evaluate(
      [[requireOp("a", true)], [update("a", "5", { deleting: true })], [requireOp("a", true)], [requireOp("a", false)]],
      state,
      base
    )
    committed(evaluation.outcomes[0])
    committed(evaluation.outcomes[1])
    assert.deepStrictEqual(failed(evaluation.outcomes[2]), [0, "Terminating"])
    committed(evaluation.outcomes[3])
    const write = writeOf(evaluation, "a")
    assert.isTrue(write?._tag === "Upsert" && write.deleting)
  })

  it("sees records put or deleted by an earlier commit of the batch", () => {
    const evaluation = evaluate(
      [[putRecord("k", 1, { ifAbsent: true })], [putRecord("k", 2, { ifAbsent: true })], [deleteRecord("k")], [
        putRecord("k", 3, { ifAbsent: true })
      ]],
      makeState(),
      base
    )
    committed(evaluation.outcomes[0])
    assert.deepStrictEqual(failed(evaluation.outcomes[1]), [0, "RecordExists"])
    committed(evaluation.outcomes[2])
    committed(evaluation.outcomes[3])
    assert.deepStrictEqual(evaluation.records.get(recordKey("idempotency", "k")), {
      _tag: "Put",
      table: "idempotency",
      id: "k",
      value: 3,
      expiresAt: undefined
    })
  })

  it("embed places the committed object of op N in the record value", () => {
    const state = makeState({ b: { resourceVersion: 3, deleting: false } })
    const evaluation = evaluate(
      [[
        create("a"),
        update("b", "3"),
        putRecord("first", { status: 201 }, { embed: { field: "object", op: 0 }, expiresAt: 99 }),
        putRecord("second", { status: 200 }, { embed: { field: "object", op: 1 } }),
        putRecord("scalar", "plain", { embed: { field: "object", op: 0 } }),
        putRecord("no-object", { status: 204 }, { embed: { field: "object", op: 2 } })
      ]],
      state,
      base
    )
    const value = committed(evaluation.outcomes[0])
    const recordValue = (id: string) => {
      const write = evaluation.records.get(recordKey("idempotency", id))
      return write?._tag === "Put" ? write.value : assert.fail(`no Put of ${id}`)
    }
    assert.deepStrictEqual(recordValue("first"), { status: 201, object: value.objects[0] as unknown as Json })
    assert.strictEqual(value.objects[0]?.metadata.resourceVersion, "11")
    assert.deepStrictEqual(recordValue("second"), { status: 200, object: value.objects[1] as unknown as Json })
    assert.strictEqual(value.objects[1]?.metadata.resourceVersion, "12")
    assert.strictEqual(recordValue("scalar"), "plain")
    assert.deepStrictEqual(recordValue("no-object"), { status: 204 })
    const first = evaluation.records.get(recordKey("idempotency", "first"))
    assert.strictEqual(first?._tag === "Put" ? first.expiresAt : undefined, 99)
  })

  it("keeps the last write per key", () => {
    const table: Record<
      string,
      {
        readonly batch: ReadonlyArray<ReadonlyArray<WriteOp>>
        readonly write: "Upsert" | "Delete"
        readonly rv?: string
      }
    > = {
      "create, update, delete": { batch: [[create("a")], [update("a", "11")], [remove("a", "12")]], write: "Delete" },
      "create, delete, create": {
        batch: [[create("a")], [remove("a", "11")], [create("a")]],
        write: "Upsert",
        rv: "13"
      },
      "two updates": { batch: [[create("a")], [update("a", "11")], [update("a", "12")]], write: "Upsert", rv: "13" },
      "update, then a failed update": {
        batch: [[create("a")], [update("a", "11")], [update("a", "11")]],
        write: "Upsert",
        rv: "12"
      }
    }
    for (const [label, row] of Object.entries(table)) {
      const evaluation = evaluate(row.batch, makeState(), base)
      assert.strictEqual(evaluation.objects.size, 1, label)
      const write = writeOf(evaluation, "a")
      assert.strictEqual(write?._tag, row.write, label)
      if (write?._tag === "Upsert") assert.strictEqual(write.object.metadata.resourceVersion, row.rv, label)
    }
  })

  it("records the change log: ADDED, MODIFIED with the previous selectable state, DELETED with the final state", () => {
    const state = makeState({ b: { resourceVersion: 3, deleting: false }, c: { resourceVersion: 4, deleting: false } })
    const updateB = update("b", "3")
    const evaluation = evaluate([[create("a"), updateB, remove("c", "4")]], state, base)
    const [added, modified, deleted] = evaluation.changes
    assert.deepStrictEqual([added?.type, modified?.type, deleted?.type], ["ADDED", "MODIFIED", "DELETED"])
    assert.deepStrictEqual(modified?.previous, selectable(updateB._tag === "Update" ? updateB.previous : assert.fail()))
    assert.isFalse(added !== undefined && Object.hasOwn(added, "previous"))
    assert.strictEqual(deleted?.object.metadata.resourceVersion, "13")
    assert.deepStrictEqual(deleted?.key, keyOf("c"))
    assert.deepStrictEqual(writeOf(evaluation, "c"), { _tag: "Delete", key: keyOf("c") })
  })

  it("checks each Post: its key must be new (RecordExists) and its seq the next one (Conflict)", () => {
    const state = makeState({}, [], { lastSeq: 7, keys: new Set(["g#0"]) })
    const table: Record<
      string,
      { readonly ops: ReadonlyArray<WriteOp>; readonly failure?: readonly [number, FailureReason] }
    > = {
      "the next seq, a new key": { ops: [post(8, "h#0")] },
      "consecutive seqs in one commit": { ops: [post(8, "h#0"), post(9, "h#1")] },
      "a key posted before": { ops: [post(8, "g#0")], failure: [0, "RecordExists"] },
      "a key posted before, at a taken seq: the key decides": { ops: [post(7, "g#0")], failure: [0, "RecordExists"] },
      "a key posted earlier in the commit": { ops: [post(8, "h#0"), post(9, "h#0")], failure: [1, "RecordExists"] },
      "a taken seq": { ops: [post(7, "h#0")], failure: [0, "Conflict"] },
      "a gap": { ops: [post(9, "h#0")], failure: [0, "Conflict"] },
      "a gap within the commit": { ops: [post(8, "h#0"), post(10, "h#1")], failure: [1, "Conflict"] },
      "a failing object op fails the Post with it": {
        ops: [post(8, "h#0"), update("missing", "1")],
        failure: [1, "NotFound"]
      }
    }
    for (const [label, row] of Object.entries(table)) {
      const evaluation = evaluate([row.ops], state, base)
      if (row.failure === undefined) {
        assert.deepStrictEqual(
          evaluation.postings,
          row.ops.map((op) => (op._tag === "Post" ? op.posting : assert.fail())),
          label
        )
      } else {
        assert.deepStrictEqual(failed(evaluation.outcomes[0]), row.failure, label)
        assert.strictEqual(evaluation.postings.length, 0, label)
      }
    }
  })

  it("Posts of a batch follow the earlier commits' postings; failed commits post nothing; no resourceVersion is used", () => {
    const evaluation = evaluate(
      [[post(1, "a#0"), post(2, "a#1")], [post(2, "b#0")], [post(3, "a#0")], [post(3, "c#0"), putRecord("k", 1)]],
      makeState(),
      base
    )
    assert.deepStrictEqual(rvsOf(committed(evaluation.outcomes[0])), [undefined, undefined])
    assert.deepStrictEqual(failed(evaluation.outcomes[1]), [0, "Conflict"])
    assert.deepStrictEqual(failed(evaluation.outcomes[2]), [0, "RecordExists"])
    assert.strictEqual(committed(evaluation.outcomes[3]).resourceVersion, base)
    assert.deepStrictEqual(evaluation.postings.map((p) => [p.seq, p.key]), [[1, "a#0"], [2, "a#1"], [3, "c#0"]])
    assert.strictEqual(evaluation.resourceVersion, base)
    assert.strictEqual(evaluation.changes.length, 0)
  })

  it("leaves its inputs alone", () => {
    const state = makeState({ a: { resourceVersion: 5, deleting: false } }, ["k"])
    const op = update("a", "5")
    evaluate([[op, deleteRecord("k"), create("b")]], state, base)
    assert.deepStrictEqual([...state.objects.keys()], [idOf("a")])
    assert.deepStrictEqual([...state.records], [recordKey("idempotency", "k")])
    assert.strictEqual(op._tag === "Update" ? op.object.metadata.resourceVersion : undefined, "")
  })
})

describe("Commit.touched", () => {
  it("collects every key and record of the batch once", () => {
    const { objects, records, postings } = touched([
      [create("a"), update("b", "1"), putRecord("k", 1), post(1, "p#0")],
      [remove("a", "2"), requireOp("c", true), deleteRecord("k"), deleteRecord("j"), post(2, "p#0"), post(3, "q#0")]
    ])
    assert.deepStrictEqual([...postings].sort(), ["p#0", "q#0"])
    assert.deepStrictEqual([...objects.keys()].sort(), [idOf("a"), idOf("b"), idOf("c")])
    assert.deepStrictEqual(objects.get(idOf("c")), keyOf("c"))
    assert.deepStrictEqual([...records.keys()].sort(), [recordKey("idempotency", "j"), recordKey("idempotency", "k")])
    assert.deepStrictEqual(records.get(recordKey("idempotency", "j")), { table: "idempotency", id: "j" })
  })

  it("is empty for an empty batch", () => {
    const { objects, records, postings } = touched([[], []])
    assert.strictEqual(objects.size + records.size + postings.size, 0)
  })
})

// The model: a Map of key → resourceVersion (and whether deletion started), commits run one at a time.
type AbstractOp =
  | { readonly _tag: "Create"; readonly name: string }
  | { readonly _tag: "Update"; readonly name: string; readonly rv: "fresh" | number; readonly deleting: boolean }
  | { readonly _tag: "Delete"; readonly name: string; readonly rv: "fresh" | number }
  | { readonly _tag: "Require"; readonly name: string; readonly notDeleting: boolean }

type ModelOutcome =
  | { readonly ok: true; readonly rvs: ReadonlyArray<number | undefined>; readonly resourceVersion: number }
  | { readonly ok: false; readonly index: number; readonly reason: FailureReason }

interface ModelEntry {
  readonly rv: number
  readonly deleting: boolean
}

const names = ["a", "b", "c"] as const
const name = fc.constantFrom(...names)
const rv = fc.oneof(fc.constant("fresh" as const), fc.integer({ min: 1, max: 16 }))
const abstractOp: fc.Arbitrary<AbstractOp> = fc.oneof(
  fc.record({ _tag: fc.constant("Create" as const), name }),
  fc.record({ _tag: fc.constant("Update" as const), name, rv, deleting: fc.boolean() }),
  fc.record({ _tag: fc.constant("Delete" as const), name, rv }),
  fc.record({ _tag: fc.constant("Require" as const), name, notDeleting: fc.boolean() })
)
const initialState = fc.record({
  a: fc.option(fc.record({ rv: fc.integer({ min: 1, max: base }), deleting: fc.boolean() }), { nil: undefined }),
  b: fc.option(fc.record({ rv: fc.integer({ min: 1, max: base }), deleting: fc.boolean() }), { nil: undefined }),
  c: fc.option(fc.record({ rv: fc.integer({ min: 1, max: base }), deleting: fc.boolean() }), { nil: undefined })
})

/** Runs commits one at a time; resolves "fresh" to the stored version at the start of each commit. */
const runModel = (commits: ReadonlyArray<ReadonlyArray<AbstractOp>>, initial: ReadonlyMap<string, ModelEntry>) => {
  const store = new Map(initial)
  let resourceVersion = base
  const batch: Array<ReadonlyArray<WriteOp>> = []
  const outcomes: Array<ModelOutcome> = []
  const written = new Set<string>()
  for (const commit of commits) {
    const expected = (op: { readonly name: string; readonly rv: "fresh" | number }) =>
      op.rv === "fresh" ? String(store.get(op.name)?.rv ?? 0) : String(op.rv)
    const ops = commit.map((op): WriteOp => {
      switch (op._tag) {
        case "Create":
          return create(op.name)
        case "Update":
          return update(op.name, expected(op), { deleting: op.deleting })
        case "Delete":
          return remove(op.name, expected(op))
        case "Require":
          return requireOp(op.name, op.notDeleting)
      }
    })
    batch.push(ops)
    // Check every condition against the store plus this commit's own earlier ops.
    const local = new Map(store)
    const touchedHere = new Set<string>()
    let failure: ModelOutcome | undefined
    for (const [index, op] of ops.entries()) {
      if (op._tag === "PutRecord" || op._tag === "DeleteRecord" || op._tag === "RequireRecord" || op._tag === "Post") {
        continue
      }
      const key = op.key.name
      const entry = local.get(key)
      const fail = (reason: FailureReason) => ({ ok: false as const, index, reason })
      if (op._tag === "Create") {
        if (entry !== undefined) {
          failure = fail("AlreadyExists")
          break
        }
        local.set(key, { rv: -1, deleting: false })
        touchedHere.add(key)
      } else if (op._tag === "Require") {
        if (entry === undefined) {
          failure = fail("NotFound")
          break
        }
        if (op.notDeleting && entry.deleting) {
          failure = fail("Terminating")
          break
        }
      } else {
        if (entry === undefined) {
          failure = fail("NotFound")
          break
        }
        if (!touchedHere.has(key) && String(entry.rv) !== op.expectedRv) {
          failure = fail("Conflict")
          break
        }
        if (op._tag === "Delete") local.delete(key)
        else local.set(key, { rv: -1, deleting: op.object.metadata.deletionTimestamp !== undefined })
        touchedHere.add(key)
      }
    }
    if (failure !== undefined) {
      outcomes.push(failure)
      continue
    }
    const rvs = ops.map((op) => {
      if (op._tag !== "Create" && op._tag !== "Update" && op._tag !== "Delete") return undefined
      resourceVersion += 1
      written.add(op.key.name)
      if (op._tag === "Delete") store.delete(op.key.name)
      else store.set(op.key.name, { rv: resourceVersion, deleting: op.object.metadata.deletionTimestamp !== undefined })
      return resourceVersion
    })
    outcomes.push({ ok: true, rvs, resourceVersion })
  }
  return { batch, outcomes, store, written, resourceVersion }
}

describe("Commit.evaluate against a one-at-a-time model", () => {
  it("agrees on every outcome and on the final state", () => {
    const seen = { held: 0, failed: 0 }
    fc.assert(
      fc.property(
        initialState,
        fc.array(fc.array(abstractOp, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 6 }),
        (initial, commits) => {
          const initialEntries = new Map(
            names.flatMap((key) => (initial[key] === undefined ? [] : [[key, initial[key]!] as const]))
          )
          const model = runModel(commits, initialEntries)
          const state: BatchState = {
            objects: new Map(
              [...initialEntries].map((
                [key, entry]
              ) => [idOf(key), { resourceVersion: entry.rv, deleting: entry.deleting }])
            ),
            records: new Set(),
            postings: noPostings
          }
          const evaluation = evaluate(model.batch, state, base)

          assert.strictEqual(evaluation.outcomes.length, commits.length)
          for (const [index, outcome] of evaluation.outcomes.entries()) {
            const expected = model.outcomes[index]!
            if (expected.ok) {
              const value = committed(outcome)
              assert.deepStrictEqual(
                value.objects.map((
                  object
                ) => (object === undefined ? undefined : Number(object.metadata.resourceVersion))),
                expected.rvs
              )
              assert.strictEqual(value.resourceVersion, expected.resourceVersion)
              seen.held += 1
            } else {
              assert.deepStrictEqual(failed(outcome), [expected.index, expected.reason])
              seen.failed += 1
            }
          }
          assert.strictEqual(evaluation.resourceVersion, model.resourceVersion)
          assert.deepStrictEqual(
            evaluation.changes.map((change) => change.resourceVersion),
            Array.from({ length: model.resourceVersion - base }, (_, i) => base + 1 + i)
          )

          for (const key of names) {
            const write = writeOf(evaluation, key)
            const final = model.store.get(key)
            if (!model.written.has(key)) {
              assert.isUndefined(write, key)
              assert.deepStrictEqual(final, initialEntries.get(key), key)
            } else if (final === undefined) {
              assert.deepStrictEqual(write, { _tag: "Delete", key: keyOf(key) }, key)
            } else {
              assert.strictEqual(write?._tag, "Upsert", key)
              if (write?._tag === "Upsert") {
                assert.strictEqual(write.object.metadata.resourceVersion, String(final.rv), key)
                assert.strictEqual(write.deleting, final.deleting, key)
              }
            }
          }
        }
      ),
      { numRuns: 300 }
    )
    // Both kinds of outcome were exercised, so the agreement is not vacuous.
    assert.isAbove(seen.held, 0)
    assert.isAbove(seen.failed, 0)
  })
})
