/**
 * The runtime's writer (runtime/ObjectWriter.ts): a step's Events are stored even when the step changes nothing else
 * (no status change, no Attempt), and a repeated Event counts up from what is stored.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { AdmissionPlugins } from "../../src/apiserver/AdmissionPlugins.ts"
import { ApiConfig } from "../../src/apiserver/ApiConfig.ts"
import { Ids } from "../../src/apiserver/Ids.ts"
import { Resources, type WriteOptions } from "../../src/apiserver/Resources.ts"
import { eventRef, namespaceRef } from "../../src/core/meta/Kinds.ts"
import { refOfKind } from "../../src/kinds/Kinds.ts"
import { EventOutbox } from "../../src/runtime/EventOutbox.ts"
import { makeWriter, type WrittenObject } from "../../src/runtime/ObjectWriter.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { Store } from "../../src/store/Store.ts"
import { T0 } from "../core/Fixtures.ts"

const group = "nodus.dev"
const functions = refOfKind(group, "Function")
const options: WriteOptions = { dryRun: false, fieldValidation: "Strict", fieldManager: "test" }
const layer = Resources.layer.pipe(
  Layer.provideMerge(AdmissionPlugins.layerNone),
  Layer.provideMerge(EventOutbox.layer),
  Layer.provideMerge(
    Layer.succeed(ApiConfig, { group, publicUrl: () => "http://127.0.0.1", bookmarkInterval: "30 seconds" })
  ),
  Layer.provideMerge(Layer.merge(Layer.fresh(MemoryStore.layer), Ids.layer))
)

const event = (message: string) => [{ event: { type: undefined, reason: "Waiting", message, warning: false }, at: T0 }]

describe("ObjectWriter", () => {
  it.effect("stores a step's Events when nothing else of it changed, and counts a repeat up from the stored one", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const resources = yield* Resources
      yield* resources.create(namespaceRef, undefined, {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "demo" }
      }, options)
      const body = {
        apiVersion: functions.apiVersion,
        kind: "Function",
        metadata: { name: "fn" },
        spec: { image: "python:3.12", code: { module: "app", qualname: "f" } }
      }
      const created = yield* resources.create(functions, "demo", body, options)
      const writer = makeWriter({
        resources,
        store: yield* Store,
        ids: yield* Ids,
        outbox: yield* EventOutbox,
        attemptRef: refOfKind(group, "Attempt")
      })
      const object: WrittenObject = {
        ref: functions,
        namespace: "demo",
        name: "fn",
        uid: created.object.metadata.uid,
        written: undefined,
        resourceVersion: undefined,
        attempts: new Map(),
        events: new Map()
      }
      const status = { phase: "Pending" }
      yield* writer.write(object, status, event("first"))
      // The same status: only the Event is new.
      yield* writer.write(object, status, event("second"))
      yield* writer.write(object, status, event("first"))
      const stored = (yield* resources.list(eventRef, "demo", {})).items.map((item) =>
        `${String(item["message"])}:${String(item["count"])}`
      ).sort()
      assert.deepStrictEqual(stored, ["first:2", "second:1"])
    }).pipe(Effect.provide(layer)))
})
