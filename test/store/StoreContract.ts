/**
 * The contract every store driver keeps (memory, PGlite, PostgreSQL). `suite(name, layer)` runs it against one driver;
 * each driver's test file calls it, so no driver can drift from the others.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Option } from "effect"
import type { ResourceObject } from "../../src/core/ObjectMeta.ts"
import { type ObjectKey, Store, type WriteOp } from "../../src/store/Store.ts"

let uidCounter = 0

/** A minimal stored object for tests. */
export const makeObject = (key: ObjectKey, extra: { labels?: Record<string, string>; owners?: ReadonlyArray<string>; deleting?: boolean; spec?: Record<string, string> } = {}): ResourceObject => ({
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
    ...(extra.owners === undefined ? {} : { ownerReferences: extra.owners.map((uid) => ({ apiVersion: "nodus.dev/v1", kind: "Job", name: "owner", uid })) })
  },
  spec: extra.spec ?? { image: "busybox" }
})

const key = (name: string, namespace = "demo", resource = "jobs"): ObjectKey => ({ resource, namespace, name })

const create = (object: ResourceObject, at = key(object.metadata.name, object.metadata.namespace ?? "")): WriteOp =>
  ({ _tag: "Create", key: at, object })

const failureReason = <A, E>(exit: Exit.Exit<A, E>): string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
  return (failure as { error?: { _tag?: string; reason?: string } } | undefined)?.error?.reason
}

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
        const updated = yield* store.commit([{ _tag: "Update", key: key("u1"), object: next, previous: current, expectedRv: current.metadata.resourceVersion }])
        assert.isTrue(Number(updated.objects[0]!.metadata.resourceVersion) > Number(current.metadata.resourceVersion))
        const stale = yield* Effect.exit(store.commit([{ _tag: "Update", key: key("u1"), object: next, previous: current, expectedRv: current.metadata.resourceVersion }]))
        assert.strictEqual(failureReason(stale), "Conflict")
        const missing = yield* Effect.exit(store.commit([{ _tag: "Update", key: key("nope"), object: next, previous: current, expectedRv: "1" }]))
        assert.strictEqual(failureReason(missing), "NotFound")
        assert.deepStrictEqual(Option.getOrThrow(yield* store.get(key("u1"))).spec, { image: "two" })
      }))

    it.effect("the change log records ADDED, MODIFIED, DELETED in resourceVersion order", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const start = yield* store.resourceVersion
        const [created] = (yield* store.commit([create(makeObject(key("log1"), { labels: { a: "1" } }))])).objects
        const [modified] = (yield* store.commit([{ _tag: "Update", key: key("log1"), object: { ...created!, metadata: { ...created!.metadata, labels: { a: "2" } } }, previous: created!, expectedRv: created!.metadata.resourceVersion }])).objects
        yield* store.commit([{ _tag: "Delete", key: key("log1"), object: modified!, expectedRv: modified!.metadata.resourceVersion }])
        const page = yield* store.changes(start, 100)
        const mine = page.changes.filter((change) => change.key.name === "log1")
        assert.deepStrictEqual(mine.map((change) => change.type), ["ADDED", "MODIFIED", "DELETED"])
        const versions = page.changes.map((change) => change.resourceVersion)
        assert.deepStrictEqual(versions, [...versions].sort((a, b) => a - b))
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
        yield* store.commit([create(makeObject(key("ns-going", ""), { deleting: true }), key("ns-going", "", "namespaces"))])
        const rv = yield* store.resourceVersion
        yield* store.commit([{ _tag: "Require", key: key("ns-live", "", "namespaces"), notDeleting: true }])
        assert.strictEqual(yield* store.resourceVersion, rv)
        const missing = yield* Effect.exit(store.commit([{ _tag: "Require", key: key("ns-none", "", "namespaces"), notDeleting: true }]))
        assert.strictEqual(failureReason(missing), "NotFound")
        const going = yield* Effect.exit(store.commit([{ _tag: "Require", key: key("ns-going", "", "namespaces"), notDeleting: true }]))
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
        const again = yield* Effect.exit(store.commit([{ _tag: "PutRecord", table: "keys", id: "k3", value: 2, ifAbsent: true }]))
        assert.strictEqual(failureReason(again), "RecordExists")
        const committed = yield* store.commit([
          create(makeObject(key("embedded"))),
          { _tag: "PutRecord", table: "keys", id: "k4", value: { status: 201 }, embed: { field: "body", op: 0 } }
        ])
        const record = Option.getOrThrow(yield* store.getRecord("keys", "k4", 0)) as { status: number; body: ResourceObject }
        assert.strictEqual(record.status, 201)
        assert.strictEqual(record.body.metadata.resourceVersion, committed.objects[0]!.metadata.resourceVersion)
        yield* store.commit([{ _tag: "DeleteRecord", table: "keys", id: "k3" }])
        assert.isTrue(Option.isNone(yield* store.getRecord("keys", "k3", 0)))
        assert.isTrue((yield* store.deleteExpiredRecords(5_000)) >= 1)
      }))

    it.effect("list orders by project then name bytewise, filters, pages and counts the rest", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const names = ["ab", "a.b", "a-b", "b", "a"]
        for (const name of names) yield* store.commit([create(makeObject(key(name, "p2", "things"), { labels: { team: name === "b" ? "x" : "y" } }), key(name, "p2", "things"))])
        yield* store.commit([create(makeObject(key("z", "p1", "things")), key("z", "p1", "things"))])
        const all = yield* store.list({ resource: "things" })
        assert.deepStrictEqual(all.items.map((o) => `${o.metadata.namespace}/${o.metadata.name}`), ["p1/z", "p2/a", "p2/a-b", "p2/a.b", "p2/ab", "p2/b"])
        assert.strictEqual(all.remaining, 0)
        assert.strictEqual(all.resourceVersion, yield* store.resourceVersion)
        const page = yield* store.list({ resource: "things", namespace: "p2", limit: 2 })
        assert.deepStrictEqual(page.items.map((o) => o.metadata.name), ["a", "a-b"])
        assert.strictEqual(page.remaining, 3)
        const next = yield* store.list({ resource: "things", namespace: "p2", limit: 2, after: { namespace: "p2", name: "a-b" } })
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
        yield* store.commit([create(owner), create(makeObject(key("child-1"), { owners: [owner.metadata.uid] })), create(makeObject(key("child-2"), { owners: ["someone-else"] }))])
        const dependents = yield* store.dependentsOf(owner.metadata.uid)
        assert.deepStrictEqual(dependents.map((o) => o.metadata.name), ["child-1"])
        assert.isTrue(yield* store.uidExists(owner.metadata.uid))
        assert.isFalse(yield* store.uidExists("no-such-uid"))
      }))

    it.effect("concurrent commits are serialised: distinct versions, one winner per compare-and-swap", () =>
      Effect.gen(function*() {
        const store = yield* Store
        const committed = yield* Effect.forEach(Array.from({ length: 60 }, (_, i) => i), (i) =>
          store.commit([create(makeObject(key(`conc-${i}`)))]), { concurrency: "unbounded" })
        const versions = committed.map((c) => c.objects[0]!.metadata.resourceVersion)
        assert.strictEqual(new Set(versions).size, 60)
        const target = committed[0]!.objects[0]!
        const attempts = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), (i) =>
          Effect.exit(store.commit([{ _tag: "Update", key: key("conc-0"), object: { ...target, spec: { n: String(i) } }, previous: target, expectedRv: target.metadata.resourceVersion }])), { concurrency: "unbounded" })
        assert.strictEqual(attempts.filter(Exit.isSuccess).length, 1)
        assert.strictEqual(attempts.filter((exit) => failureReason(exit) === "Conflict").length, 19)
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

