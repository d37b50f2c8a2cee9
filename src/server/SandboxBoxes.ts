/**
 * The boxes of Sandboxes, as the API server reaches them (apiserver/SandboxBoxes.ts): a request goes to the capacity
 * port's `box` for the Sandbox's attempt — a live host's supervisor through its agent, or the simulator's model of a
 * box. A backend whose port runs no boxes answers Unsupported.
 *
 * The Sandboxes themselves are followed through the change feed (runtime/Following.ts), so that a command to a Running
 * Sandbox finds its attempt without a read of the store (on the embedded store, most of a command's round trip); the
 * API reads the store for any other phase, and a box that stopped since refuses by itself.
 */
import { Effect, Layer } from "effect"
import { SandboxBoxes } from "../apiserver/SandboxBoxes.ts"
import { CapacityPort } from "../core/capacity/Capacity.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { followStore } from "../runtime/Following.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import { Store } from "../store/Store.ts"

const plural = "sandboxes"

export const layer = Layer.effect(
  SandboxBoxes,
  Effect.gen(function*() {
    const port = yield* CapacityPort
    const store = yield* Store
    const box = port.box
    const known = new Map<string, ResourceObject>()
    const keyOf = (namespace: string, name: string) => `${namespace}/${name}`
    const resync = Effect.gen(function*() {
      const page = yield* store.list({ resource: plural })
      known.clear()
      for (const object of page.items) known.set(keyOf(object.metadata.namespace ?? "", object.metadata.name), object)
    })
    yield* followStore("sandbox boxes", yield* ChangeFeed, resync, (change) =>
      Effect.sync(() => {
        if (change.key.resource !== plural) return
        const key = keyOf(change.key.namespace, change.key.name)
        if (change.type === "DELETED") known.delete(key)
        else known.set(key, change.object)
      }))
    return SandboxBoxes.of({
      current: (namespace, name) => known.get(keyOf(namespace, name)),
      call: (object, attempt, request) =>
        box === undefined
          ? Effect.fail(
            new ApiError({
              code: "Unsupported",
              message: "this backend runs no Sandbox boxes",
              fix: "Run the server with --backend local (the default) or --backend sim (docs/sandboxes.md)."
            })
          )
          : box(object.metadata.uid, attempt, request)
    })
  })
)
