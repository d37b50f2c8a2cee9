/**
 * Resources.replaceStatusMany (apiserver/Resources.ts): the statuses of many objects in one store commit, as a
 * controller writes what one step decided of many objects (runtime/FunctionDispatch.ts). Every status is written or
 * none; one at a stale resourceVersion is a Conflict that writes nothing; a status that changes nothing is not
 * written; the store's change log has one change per object written.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Result } from "effect"
import { AdmissionPlugins } from "../../../src/apiserver/AdmissionPlugins.ts"
import { ApiConfig } from "../../../src/apiserver/ApiConfig.ts"
import { Ids } from "../../../src/apiserver/Ids.ts"
import { Resources, type WriteOptions } from "../../../src/apiserver/Resources.ts"
import { namespaceRef } from "../../../src/core/meta/Kinds.ts"
import { refOfKind } from "../../../src/kinds/Kinds.ts"
import * as MemoryStore from "../../../src/store/MemoryStore.ts"
import { Store } from "../../../src/store/Store.ts"

const group = "nodus.dev"
const calls = refOfKind(group, "FunctionCall")
const options: WriteOptions = { dryRun: false, fieldValidation: "Strict", fieldManager: "test" }
const layer = Resources.layer.pipe(
  Layer.provideMerge(
    Layer.mergeAll(
      AdmissionPlugins.layerNone,
      Layer.fresh(MemoryStore.layer),
      Ids.layer,
      Layer.succeed(ApiConfig, { group, publicUrl: () => "http://127.0.0.1", bookmarkInterval: "30 seconds" })
    )
  )
)

const setUp = Effect.gen(function*() {
  const resources = yield* Resources
  yield* resources.create(
    namespaceRef,
    undefined,
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "p" } },
    options
  )
  const made = []
  for (const name of ["a", "b", "c"]) {
    made.push(
      (yield* resources.create(calls, "p", {
        apiVersion: calls.apiVersion,
        kind: "FunctionCall",
        metadata: { name },
        spec: { function: "f" }
      }, options)).object
    )
  }
  return made
})

const statusBody = (object: { metadata: { name: string; resourceVersion: string } }, phase: string) => ({
  name: object.metadata.name,
  body: {
    apiVersion: calls.apiVersion,
    kind: "FunctionCall",
    metadata: { name: object.metadata.name, resourceVersion: object.metadata.resourceVersion },
    status: { phase }
  }
})

describe("replaceStatusMany", () => {
  it.effect("writes every status in one commit; a status unchanged is not written", () =>
    Effect.gen(function*() {
      const resources = yield* Resources
      const store = yield* Store
      const [a, b, c] = yield* setUp
      const first = yield* resources.replaceStatusMany(calls, "p", [
        statusBody(a!, "Queued"),
        statusBody(b!, "Running"),
        statusBody(c!, "Queued")
      ], options)
      assert.deepStrictEqual(first.map((one) => (one.object.status as { phase: string }).phase), [
        "Queued",
        "Running",
        "Queued"
      ])
      const before = yield* store.resourceVersion
      // b again with the same status: nothing to write for it; a and c move on.
      const second = yield* resources.replaceStatusMany(calls, "p", [
        statusBody(first[0]!.object, "Succeeded"),
        statusBody(first[1]!.object, "Running"),
        statusBody(first[2]!.object, "Failed")
      ], options)
      assert.strictEqual(second[1]!.object.metadata.resourceVersion, first[1]!.object.metadata.resourceVersion)
      const page = yield* store.changes(Number(before), 100)
      assert.deepStrictEqual(page.changes.map((change) => `${change.type} ${change.key.name}`), [
        "MODIFIED a",
        "MODIFIED c"
      ])
      assert.strictEqual(
        (yield* resources.get(calls, "p", "c")).metadata.resourceVersion,
        second[2]!.object.metadata.resourceVersion
      )
    }).pipe(Effect.provide(layer)))

  it.effect("one status at a stale resourceVersion is a Conflict, and none is written", () =>
    Effect.gen(function*() {
      const resources = yield* Resources
      const [a, b] = yield* setUp
      const moved = yield* resources.replaceStatusMany(calls, "p", [statusBody(b!, "Running")], options)
      const refused = yield* Effect.result(
        resources.replaceStatusMany(calls, "p", [statusBody(a!, "Succeeded"), statusBody(b!, "Failed")], options)
      )
      assert.isTrue(Result.isFailure(refused))
      if (Result.isFailure(refused)) assert.strictEqual(refused.failure.code, "Conflict")
      assert.isUndefined((yield* resources.get(calls, "p", "a")).status)
      assert.strictEqual(((yield* resources.get(calls, "p", "b")).status as { phase: string }).phase, "Running")
      assert.strictEqual(moved.length, 1)
    }).pipe(Effect.provide(layer)))
})
