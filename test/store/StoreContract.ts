/**
 * The contract every store driver keeps (memory, PGlite, PostgreSQL). `suite(name, layer)` runs it against one driver;
 * each driver's test file calls it, so no driver can drift from the others.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Option } from "effect"
import type { Posting } from "../../src/core/billing/Ledger.ts"
import type { ResourceObject } from "../../src/core/meta/ObjectMeta.ts"
import { type ObjectKey, Store, type StoreShape, type WriteOp } from "../../src/store/Store.ts"

let uidCounter = 0

/** A minimal stored object for tests. */
export const makeObject = (
  key: ObjectKey,
  extra: {
    labels?: Record<string, string>
    owners?: ReadonlyArray<string>
    deleting?: boolean
    spec?: Record<string, string>
  } = {}
): ResourceObject => ({
  apiVersion: "nodus.dev/v1",
  kind: "Job",
  metadata: {
    name: key.name,
    ...(key.namespace === "" ? {} : { namespace: key.namespace }),
    uid: `uid-${++uidCounter}`,
    resourceVersion: "",
    generation: 1,
    creationTimestamp: "2026-01-01T00:00:00Z",
    ...(extra.labels === undefined ? {} : { labels: extra.labels }),
    ...(extra.deleting === true ? { deletionTimestamp: "2026-01-01T00:00:01Z", finalizers: ["x.dev/hold"] } : {}),
    ...(extra.owners === undefined
      ? {}
      : {
        ownerReferences: extra.owners.map((uid) => ({ apiVersion: "nodus.dev/v1", kind: "Job", name: "owner", uid }))
      })
  },
  spec: extra.spec ?? { image: "busybox" }
})

const key = (name: string, namespace = "demo", resource = "jobs"): ObjectKey => ({ resource, namespace, name })

const create = (object: ResourceObject, at = key(object.metadata.name, object.metadata.namespace ?? "")): WriteOp => ({
  _tag: "Create",
  key: at,
  object
})

const failureReason = <A, E>(exit: Exit.Exit<A, E>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
  return (failure as { error?: { _tag?: string; reason?: string } } | undefined)?.error?.reason
}

const failureTag = <A, E>(exit: Exit.Exit<A, E>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
  return (failure as { error?: { _tag?: string } } | undefined)?.error?._tag
}

/** A Grant of 1 micro-USD unless `fields` say otherwise. */
const posting = (seq: number, key: string, fields: Partial<Omit<Posting, "seq" | "key">> = {}): Posting => ({
  seq,
  key,
  at: 1_767_225_600_000,
  kind: "Grant",
  from: "external",
  to: "available",
  amount: 1n,
  ...fields
})

const post = (value: Posting): WriteOp => ({ _tag: "Post", posting: value })

/** The last stored posting's seq. The tests of a suite share one store, so each posts after what earlier ones left. */
const lastSeq = (store: StoreShape) =>
  Effect.gen(function*() {
    let seq = 0
    for (;;) {
      const last = (yield* store.postings(seq, 1_000)).at(-1)
      if (last === undefined) return seq
      seq = last.seq
    }
  })

const sumOf = (balances: ReadonlyMap<string, bigint>): bigint => [...balances.values()].reduce((a, b) => a + b, 0n)

export const suite = (name: string, storeLayer: Layer.Layer<Store, unknown>) =>
  layer(storeLayer, { timeout: 60_000 })(name, (it) => {
    it.effect("create assigns a resourceVersion; a second create of the key is AlreadyExists", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const before = yield* store.resourceVersion
        const committed = yield* store.commit([create(makeObject(key("c1")))])
        const rv = Number(committed.objects[0]!.metadata.resourceVersion)
        assert.isTrue(rv > before)
        assert.strictEqual(committed.resourceVersion, rv)
        const read = yield* store.get(key("c1"))
        assert.isTrue(Option.isSome(read))
        assert.strictEqual(Option.getOrThrow(read).metadata.resourceVersion, String(rv))
        const again = yield* Effect.exit(store.commit([create(makeObject(key("c1")))]))
        assert.strictEqual(failureReason(again), "AlreadyExists")
      }))

    it.effect("update is a compare-and-swap on resourceVersion", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const [created] = (yield* store.commit([create(makeObject(key("u1")))])).objects
        const current = created!
        const next = { ...current, spec: { image: "two" } }
        const updated = yield* store.commit([{
          _tag: "Update",
          key: key("u1"),
          object: next,
          previous: current,
          expectedRv: current.metadata.resourceVersion
        }])
        assert.isTrue(Number(updated.objects[0]!.metadata.resourceVersion) > Number(current.metadata.resourceVersion))
        const stale = yield* Effect.exit(
          store.commit([{
            _tag: "Update",
            key: key("u1"),
            object: next,
            previous: current,
            expectedRv: current.metadata.resourceVersion
          }])
        )
        assert.strictEqual(failureReason(stale), "Conflict")
        const missing = yield* Effect.exit(
          store.commit([{ _tag: "Update", key: key("nope"), object: next, previous: current, expectedRv: "1" }])
        )
        assert.strictEqual(failureReason(missing), "NotFound")
        assert.deepStrictEqual(Option.getOrThrow(yield* store.get(key("u1"))).spec, { image: "two" })
      }))

    it.effect("the change log records ADDED, MODIFIED, DELETED in resourceVersion order", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const start = yield* store.resourceVersion
        const [created] = (yield* store.commit([create(makeObject(key("log1"), { labels: { a: "1" } }))])).objects
        const [modified] = (yield* store.commit([{
          _tag: "Update",
          key: key("log1"),
          object: { ...created!, metadata: { ...created!.metadata, labels: { a: "2" } } },
          previous: created!,
          expectedRv: created!.metadata.resourceVersion
        }])).objects
        yield* store.commit([{
          _tag: "Delete",
          key: key("log1"),
          object: modified!,
          expectedRv: modified!.metadata.resourceVersion
        }])
        const page = yield* store.changes(start, 100)
        const mine = page.changes.filter((change) => change.key.name === "log1")
        assert.deepStrictEqual(mine.map((change) => change.type), ["ADDED", "MODIFIED", "DELETED"])
        const versions = page.changes.map((change) => change.resourceVersion)
        assert.deepStrictEqual(versions, [...versions].sort((a, b) => a - b))
        // Each change's object is the object as written (a SQL store takes a written object's text from its row).
        assert.deepStrictEqual(mine.slice(0, 2).map((change) => change.object), [created, modified])
        assert.deepStrictEqual(mine[1]!.previous?.metadata.labels, { a: "1" })
        assert.strictEqual(mine[2]!.object.metadata.resourceVersion, String(mine[2]!.resourceVersion))
        assert.isTrue(Option.isNone(yield* store.get(key("log1"))))
        assert.strictEqual(yield* store.resourceVersion, versions.at(-1))
      }))

    it.effect("the change log pages in numeric resourceVersion order (9 < 10)", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const start = yield* store.resourceVersion
        for (let i = 0; i < 25; i++) yield* store.commit([create(makeObject(key(`page-${i}`)))])
        const collected: Array<number> = []
        let cursor = start
        for (;;) {
          const page = yield* store.changes(cursor, 4)
          if (page.changes.length === 0) break
          collected.push(...page.changes.map((change) => change.resourceVersion))
          cursor = page.changes.at(-1)!.resourceVersion
        }
        assert.strictEqual(collected.length, 25)
        assert.deepStrictEqual(collected, Array.from({ length: 25 }, (_, i) => start + i + 1))
      }))

    it.effect("a commit is all or nothing", () =>
      Effect.gen(function*() {
        const store = yield* Store
        yield* store.commit([create(makeObject(key("atom-existing")))])
        const exit = yield* Effect.exit(store.commit([
          create(makeObject(key("atom-new"))),
          { _tag: "PutRecord", table: "idempotency", id: "atom", value: { a: 1 } },
          create(makeObject(key("atom-existing")))
        ]))
        assert.strictEqual(failureReason(exit), "AlreadyExists")
        assert.isTrue(Option.isNone(yield* store.get(key("atom-new"))))
        assert.isTrue(Option.isNone(yield* store.getRecord("idempotency", "atom", 0)))
      }))

    it.effect("Require checks existence and deletion without writing", () =>
      Effect.gen(function*() {
        const store = yield* Store
        yield* store.commit([create(makeObject(key("ns-live", "")), key("ns-live", "", "namespaces"))])
        yield* store.commit([
          create(makeObject(key("ns-going", ""), { deleting: true }), key("ns-going", "", "namespaces"))
        ])
        const rv = yield* store.resourceVersion
        yield* store.commit([{ _tag: "Require", key: key("ns-live", "", "namespaces"), notDeleting: true }])
        assert.strictEqual(yield* store.resourceVersion, rv)
        const missing = yield* Effect.exit(
          store.commit([{ _tag: "Require", key: key("ns-none", "", "namespaces"), notDeleting: true }])
        )
        assert.strictEqual(failureReason(missing), "NotFound")
        const going = yield* Effect.exit(
          store.commit([{ _tag: "Require", key: key("ns-going", "", "namespaces"), notDeleting: true }])
        )
        assert.strictEqual(failureReason(going), "Terminating")
        yield* store.commit([{ _tag: "Require", key: key("ns-going", "", "namespaces"), notDeleting: false }])
      }))

    it.effect("records: put, ifAbsent, expiry, delete and embedding the committed object", () =>
      Effect.gen(function*() {
        const store = yield* Store
        yield* store.commit([{ _tag: "PutRecord", table: "keys", id: "k1", value: { n: 1 }, expiresAt: 1_000 }])
        assert.deepStrictEqual(Option.getOrThrow(yield* store.getRecord("keys", "k1", 999)), { n: 1 })
        assert.isTrue(Option.isNone(yield* store.getRecord("keys", "k1", 1_000)))
        yield* store.commit([{ _tag: "PutRecord", table: "keys", id: "k3", value: 1, ifAbsent: true }])
        const again = yield* Effect.exit(
          store.commit([{ _tag: "PutRecord", table: "keys", id: "k3", value: 2, ifAbsent: true }])
        )
        assert.strictEqual(failureReason(again), "RecordExists")
        const committed = yield* store.commit([
          create(makeObject(key("embedded"))),
          { _tag: "PutRecord", table: "keys", id: "k4", value: { status: 201 }, embed: { field: "body", op: 0 } }
        ])
        const record = Option.getOrThrow(yield* store.getRecord("keys", "k4", 0)) as {
          status: number
          body: ResourceObject
        }
        assert.strictEqual(record.status, 201)
        assert.strictEqual(record.body.metadata.resourceVersion, committed.objects[0]!.metadata.resourceVersion)
        yield* store.commit([{ _tag: "DeleteRecord", table: "keys", id: "k3" }])
        assert.isTrue(Option.isNone(yield* store.getRecord("keys", "k3", 0)))
        assert.isTrue((yield* store.deleteExpiredRecords(5_000)) >= 1)
      }))

    it.effect("RequireRecord: a commit holds only while a record is there (or absent), and writes nothing of its own", () =>
      Effect.gen(function*() {
        const store = yield* Store
        yield* store.commit([{ _tag: "PutRecord", table: "fence", id: "shard-1@1", value: 1 }])
        const fenced = (present: boolean, id = "shard-1@1") =>
          Effect.exit(store.commit([
            { _tag: "RequireRecord", table: "fence", id, present },
            create(makeObject(key(`fenced-${present}-${id}`)))
          ]))
        const rv = yield* store.resourceVersion
        yield* store.commit([{ _tag: "RequireRecord", table: "fence", id: "shard-1@1", present: true }])
        assert.strictEqual(yield* store.resourceVersion, rv)
        assert.isTrue(Exit.isSuccess(yield* fenced(true)))
        assert.strictEqual(failureReason(yield* fenced(false)), "RecordExists")
        assert.strictEqual(failureReason(yield* fenced(true, "shard-1@2")), "NotFound")
        // The next epoch's claim removes this one's record: a commit of the old owner no longer holds.
        yield* store.commit([{ _tag: "DeleteRecord", table: "fence", id: "shard-1@1" }, {
          _tag: "PutRecord",
          table: "fence",
          id: "shard-1@2",
          value: 2
        }])
        assert.strictEqual(failureReason(yield* fenced(true)), "NotFound")
        assert.isTrue(Option.isNone(yield* store.get(key("fenced-true-shard-1@1x"))))
        assert.isTrue(Exit.isSuccess(yield* fenced(true, "shard-1@2")))
      }))

    it.effect("records of a table page in bytewise id order, without expired ones or other tables' records", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const table = "contract-owners"
        const ids = ["b", "a", "B", "a-2", "c"]
        yield* store.commit(ids.map((id) => ({ _tag: "PutRecord" as const, table, id, value: { id } })))
        yield* store.commit([
          { _tag: "PutRecord", table, id: "expired", value: 0, expiresAt: 10 },
          { _tag: "PutRecord", table: `${table}x`, id: "other", value: 0 },
          { _tag: "PutRecord", table: "contract", id: "owners", value: 0 }
        ])
        const first = yield* store.records(table, "", 2, 10)
        assert.deepStrictEqual(first, [{ id: "B", value: { id: "B" } }, { id: "a", value: { id: "a" } }])
        const rest = yield* store.records(table, first.at(-1)!.id, 10, 10)
        assert.deepStrictEqual(rest.map((record) => record.id), ["a-2", "b", "c"])
        assert.deepStrictEqual((yield* store.records(table, "", 10, 9)).map((record) => record.id), [
          "B",
          "a",
          "a-2",
          "b",
          "c",
          "expired"
        ])
        assert.deepStrictEqual(yield* store.records("contract-none", "", 10, 0), [])
      }))

    it.effect("list orders by project then name bytewise, filters, pages and counts the rest", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const names = ["ab", "a.b", "a-b", "b", "a"]
        for (const name of names) {
          yield* store.commit([
            create(
              makeObject(key(name, "p2", "things"), { labels: { team: name === "b" ? "x" : "y" } }),
              key(name, "p2", "things")
            )
          ])
        }
        yield* store.commit([create(makeObject(key("z", "p1", "things")), key("z", "p1", "things"))])
        const all = yield* store.list({ resource: "things" })
        assert.deepStrictEqual(all.items.map((o) => `${o.metadata.namespace}/${o.metadata.name}`), [
          "p1/z",
          "p2/a",
          "p2/a-b",
          "p2/a.b",
          "p2/ab",
          "p2/b"
        ])
        assert.strictEqual(all.remaining, 0)
        assert.strictEqual(all.resourceVersion, yield* store.resourceVersion)
        const page = yield* store.list({ resource: "things", namespace: "p2", limit: 2 })
        assert.deepStrictEqual(page.items.map((o) => o.metadata.name), ["a", "a-b"])
        assert.strictEqual(page.remaining, 3)
        const next = yield* store.list({
          resource: "things",
          namespace: "p2",
          limit: 2,
          after: { namespace: "p2", name: "a-b" }
        })
        assert.deepStrictEqual(next.items.map((o) => o.metadata.name), ["a.b", "ab"])
        assert.strictEqual(next.remaining, 1)
        const capped = yield* store.list({ resource: "things", namespace: "p2", limit: 1, countUpTo: 2 })
        assert.strictEqual(capped.remaining, 3, "four follow; counting stops after countUpTo + 1")
        const labelled = yield* store.list({ resource: "things", labelEquals: [["team", "x"]] })
        assert.deepStrictEqual(labelled.items.map((o) => o.metadata.name), ["b"])
        const named = yield* store.list({ resource: "things", name: "z" })
        assert.deepStrictEqual(named.items.map((o) => o.metadata.namespace), ["p1"])
        const empty = yield* store.list({ resource: "nothing-here" })
        assert.strictEqual(empty.items.length, 0)
        assert.strictEqual(empty.resourceVersion, yield* store.resourceVersion)
      }))

    it.effect("listText answers what list does, each object as its JSON text (JSON.stringify of it), with its key", () =>
      Effect.gen(function*() {
        const store = yield* Store
        for (const name of ["t-a", "t-b", "t-c"]) {
          yield* store.commit([
            create(
              makeObject(key(name, "p3", "texts"), { labels: { team: name === "t-b" ? "x" : "y" } }),
              key(name, "p3", "texts")
            )
          ])
        }
        for (
          const query of [
            { resource: "texts" },
            { resource: "texts", namespace: "p3", limit: 2, countUpTo: 10 },
            { resource: "texts", namespace: "p3", after: { namespace: "p3", name: "t-a" } },
            { resource: "texts", labelEquals: [["team", "x"]] as const },
            { resource: "texts", name: "t-c" }
          ]
        ) {
          const objects = yield* store.list(query)
          const texts = yield* store.listText(query)
          assert.deepStrictEqual(
            texts.items.map((item) => item.text),
            objects.items.map((object) => JSON.stringify(object))
          )
          assert.deepStrictEqual(
            texts.items.map((item) => [item.namespace, item.name]),
            objects.items.map((object) => [object.metadata.namespace, object.metadata.name])
          )
          assert.strictEqual(texts.remaining, objects.remaining)
          assert.strictEqual(texts.resourceVersion, objects.resourceVersion)
        }
      }))

    it.effect("compaction drops old changes and reports the horizon", () =>
      Effect.gen(function*() {
        const store = yield* Store
        yield* store.commit([create(makeObject(key("compact-1")))])
        const horizon = yield* store.resourceVersion
        yield* store.commit([create(makeObject(key("compact-2")))])
        yield* store.compact(horizon)
        const page = yield* store.changes(0, 1_000)
        assert.strictEqual(page.compactedResourceVersion, horizon)
        assert.isTrue(page.changes.every((change) => change.resourceVersion > horizon))
        assert.isTrue(page.changes.some((change) => change.key.name === "compact-2"))
      }))

    it.effect("owner references are indexed for the garbage collector", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const owner = makeObject(key("owner-1"))
        yield* store.commit([
          create(owner),
          create(makeObject(key("child-1"), { owners: [owner.metadata.uid] })),
          create(makeObject(key("child-2"), { owners: ["someone-else"] }))
        ])
        const dependents = yield* store.dependentsOf(owner.metadata.uid)
        assert.deepStrictEqual(dependents.map((o) => o.metadata.name), ["child-1"])
        assert.isTrue(yield* store.uidExists(owner.metadata.uid))
        assert.isFalse(yield* store.uidExists("no-such-uid"))
      }))

    it.effect("concurrent commits are serialised: distinct versions, one winner per compare-and-swap", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const committed = yield* Effect.forEach(
          Array.from({ length: 60 }, (_, i) => i),
          (i) => store.commit([create(makeObject(key(`conc-${i}`)))]),
          { concurrency: "unbounded" }
        )
        const versions = committed.map((c) => c.objects[0]!.metadata.resourceVersion)
        assert.strictEqual(new Set(versions).size, 60)
        const target = committed[0]!.objects[0]!
        const attempts = yield* Effect.forEach(
          Array.from({ length: 20 }, (_, i) => i),
          (i) =>
            Effect.exit(
              store.commit([{
                _tag: "Update",
                key: key("conc-0"),
                object: { ...target, spec: { n: String(i) } },
                previous: target,
                expectedRv: target.metadata.resourceVersion
              }])
            ),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(attempts.filter(Exit.isSuccess).length, 1)
        assert.strictEqual(attempts.filter((exit) => failureReason(exit) === "Conflict").length, 19)
      }))

    it.effect("ledger: posts append and read back in order, amounts exact beyond 2^53, without changes or resourceVersions", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const start = yield* lastSeq(store)
        const rv = yield* store.resourceVersion
        const made = [
          posting(start + 1, "grant-1#0", { amount: 2n ** 53n + 1n, source: "starter" }),
          posting(start + 2, "hold-1#0", {
            kind: "Hold",
            from: "available",
            to: "held/h1",
            amount: 5n,
            owner: "uid-a",
            hold: "h1",
            expiresAt: 1_767_225_660_000
          }),
          posting(start + 3, "capture-1#0", {
            kind: "Capture",
            from: "held/h1",
            to: "charged/uid-a",
            amount: 3n,
            owner: "uid-a",
            hold: "h1",
            segment: "Running"
          }),
          posting(start + 4, "release-1#0", {
            kind: "Release",
            from: "held/h1",
            to: "available",
            amount: 0n,
            owner: "uid-a",
            hold: "h1"
          }),
          // The largest amount a PostgreSQL bigint holds.
          posting(start + 5, "grant-max#0", { to: "max-account", amount: 2n ** 63n - 1n, source: "max" })
        ]
        const committed = yield* store.commit([post(made[0]!)])
        assert.deepStrictEqual(committed.objects, [undefined])
        yield* store.commit(made.slice(1).map(post))
        assert.deepStrictEqual(yield* store.postings(start, 100), made)
        assert.strictEqual((yield* store.postings(start, 1))[0]!.amount, 9_007_199_254_740_993n)
        assert.strictEqual(yield* store.resourceVersion, rv)
        assert.deepStrictEqual((yield* store.changes(rv, 100)).changes, [])
      }))

    it.effect("ledger: a Post whose key was posted before fails RecordExists and writes nothing of its commit", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const start = yield* lastSeq(store)
        yield* store.commit([post(posting(start + 1, "dup-1#0"))])
        const exit = yield* Effect.exit(store.commit([
          create(makeObject(key("dup-object"))),
          { _tag: "PutRecord", table: "idempotency", id: "dup", value: 1 },
          post(posting(start + 2, "dup-2#0")),
          post(posting(start + 3, "dup-1#0"))
        ]))
        assert.strictEqual(failureReason(exit), "RecordExists")
        assert.isTrue(Option.isNone(yield* store.get(key("dup-object"))))
        assert.isTrue(Option.isNone(yield* store.getRecord("idempotency", "dup", 0)))
        assert.deepStrictEqual((yield* store.postings(start, 10)).map((p) => p.key), ["dup-1#0"])
        // The seqs the failed commit asked for are still free.
        yield* store.commit([post(posting(start + 2, "dup-2#0"))])
      }))

    it.effect("ledger: a taken or skipped seq fails Conflict; one of many concurrent posts at a seq wins", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const start = yield* lastSeq(store)
        yield* store.commit([post(posting(start + 1, "seq-1#0"))])
        const taken = yield* Effect.exit(store.commit([post(posting(start + 1, "seq-taken#0"))]))
        assert.strictEqual(failureReason(taken), "Conflict")
        const gap = yield* Effect.exit(store.commit([post(posting(start + 3, "seq-gap#0"))]))
        assert.strictEqual(failureReason(gap), "Conflict")
        const gapWithin = yield* Effect.exit(
          store.commit([post(posting(start + 2, "seq-2#0")), post(posting(start + 4, "seq-4#0"))])
        )
        assert.strictEqual(failureReason(gapWithin), "Conflict")
        assert.strictEqual(yield* lastSeq(store), start + 1)
        yield* store.commit([post(posting(start + 2, "seq-2#0")), post(posting(start + 3, "seq-3#0"))])
        const racing = yield* Effect.forEach(
          Array.from({ length: 12 }, (_, i) => i),
          (i) => Effect.exit(store.commit([post(posting(start + 4, `seq-race-${i}#0`))])),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(racing.filter(Exit.isSuccess).length, 1)
        assert.strictEqual(racing.filter((exit) => failureReason(exit) === "Conflict").length, 11)
        assert.deepStrictEqual((yield* store.postings(start, 100)).map((p) => p.seq), [
          start + 1,
          start + 2,
          start + 3,
          start + 4
        ])
      }))

    it.effect("ledger: postings(after, limit) pages in numeric seq order (99 < 100)", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const start = yield* lastSeq(store)
        yield* store.commit([post(posting(start + 1, "page-1#0")), post(posting(start + 2, "page-2#0"))])
        // Up past the next power of ten in one commit, so that pages cross a change in the number of digits.
        const end = Math.max(start + 10, 10 ** String(start).length + 5)
        yield* store.commit(
          Array.from({ length: end - start - 2 }, (_, i) => post(posting(start + 3 + i, `page-${i + 3}#0`)))
        )
        const pages: Array<ReadonlyArray<number>> = []
        let cursor = start
        for (;;) {
          const page = yield* store.postings(cursor, 3)
          if (page.length === 0) break
          pages.push(page.map((p) => p.seq))
          cursor = page.at(-1)!.seq
        }
        assert.deepStrictEqual(pages.flat(), Array.from({ length: end - start }, (_, i) => start + 1 + i))
        assert.isTrue(pages.slice(0, -1).every((page) => page.length === 3))
        assert.deepStrictEqual(yield* store.postings(start, 0), [])
        assert.deepStrictEqual((yield* store.postings(end - 2, 100)).map((p) => p.seq), [end - 1, end])
      }))

    it.effect("ledger: balances are the sums of what was posted to minus from each account, and sum to zero", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const start = yield* lastSeq(store)
        const before = yield* store.balances()
        const big = 2n ** 62n + 7n
        yield* store.commit([
          post(posting(start + 1, "bal-1#0", { from: "external", to: "bal/a", amount: big })),
          post(posting(start + 2, "bal-1#1", { from: "bal/a", to: "bal/b", amount: 2n ** 61n }))
        ])
        yield* store.commit([post(posting(start + 3, "bal-2#0", { from: "bal/b", to: "bal/c", amount: 10n }))])
        yield* store.commit([post(posting(start + 4, "bal-3#0", { from: "bal/c", to: "bal/a", amount: 4n }))])
        const after = yield* store.balances()
        assert.strictEqual(after.get("bal/a"), big - 2n ** 61n + 4n)
        assert.strictEqual(after.get("bal/b"), 2n ** 61n - 10n)
        assert.strictEqual(after.get("bal/c"), 6n)
        assert.strictEqual(after.get("external"), (before.get("external") ?? 0n) - big)
        assert.isUndefined(after.get("bal/none"))
        assert.strictEqual(sumOf(before), 0n)
        assert.strictEqual(sumOf(after), 0n)
      }))

    it.effect("ledger: a Post and a Create commit together or not at all", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const start = yield* lastSeq(store)
        yield* store.commit([create(makeObject(key("post-atom-existing")))])
        const before = yield* store.balances()
        const failed = yield* Effect.exit(store.commit([
          post(posting(start + 1, "atom-1#0", { to: "atom/a", amount: 50n })),
          create(makeObject(key("post-atom-existing")))
        ]))
        assert.strictEqual(failureReason(failed), "AlreadyExists")
        assert.deepStrictEqual(yield* store.postings(start, 10), [])
        assert.deepStrictEqual(yield* store.balances(), before)
        const committed = yield* store.commit([
          create(makeObject(key("post-atom-new"))),
          post(posting(start + 1, "atom-1#0", { to: "atom/a", amount: 50n }))
        ])
        assert.isDefined(committed.objects[0])
        assert.isUndefined(committed.objects[1])
        assert.isTrue(Option.isSome(yield* store.get(key("post-atom-new"))))
        assert.strictEqual((yield* store.balances()).get("atom/a"), 50n)
      }))

    it.effect("ledger: a negative amount cannot be stored: StoreError, and nothing of the commit is written", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const start = yield* lastSeq(store)
        const exit = yield* Effect.exit(
          store.commit([
            create(makeObject(key("negative-object"))),
            post(posting(start + 1, "negative#0", { amount: -1n }))
          ])
        )
        assert.strictEqual(failureTag(exit), "StoreError")
        assert.isTrue(Option.isNone(yield* store.get(key("negative-object"))))
        assert.strictEqual(yield* lastSeq(store), start)
      }))

    it.effect("onCommit listeners hear commits until they unregister", () =>
      Effect.gen(function*() {
        const store = yield* Store
        let heard = 0
        const unregister = yield* store.onCommit(() => void (heard += 1))
        yield* store.commit([create(makeObject(key("listen-1")))])
        const fiber = yield* Effect.forkChild(Effect.repeat(Effect.sync(() => heard), { until: (n) => n > 0 }))
        yield* Fiber.join(fiber)
        yield* unregister
        const after = heard
        yield* store.commit([create(makeObject(key("listen-2")))])
        assert.strictEqual(heard, after)
      }))
  })
