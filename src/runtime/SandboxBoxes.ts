/**
 * A running Sandbox's box (docs/sandboxes.md), which the HTTP layer drives (kinds/sandbox/http/SandboxApi.ts): a
 * request goes to the capacity port's `box` for the Sandbox's attempt — a live host's supervisor through its agent, or
 * the simulator's model of a box (`layer`). Without a backend that runs boxes (`layerNone`) every request is
 * Unsupported, with the reason.
 *
 * The Sandboxes themselves are followed through the change feed (Following.ts), so that a command to a Running
 * Sandbox finds its attempt without a read of the store (on the embedded store, most of a command's round trip); the
 * API reads the store for any other phase, and a box that stopped since refuses by itself.
 */
import { Context, Effect, Layer } from "effect"
import { CapacityPort } from "../core/capacity/Capacity.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import type { BoxReply, BoxRequest } from "../core/SandboxBox.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import { Store } from "../store/Store.ts"
import { followStore } from "./Following.ts"

export class SandboxBoxes extends Context.Service<SandboxBoxes, {
  /**
   * The Sandbox as the backend last heard of it (the change feed), when it follows them: its phase and attempt without
   * a read of the store. Undefined: read the store.
   */
  readonly current: (namespace: string, name: string) => ResourceObject | undefined
  /** Sends `request` to the box of `object`'s attempt `attempt` (status.attempt.name). */
  readonly call: (object: ResourceObject, attempt: string, request: BoxRequest) => Effect.Effect<BoxReply, ApiError>
}>()("nodus/runtime/SandboxBoxes") {
  static readonly layerNone = Layer.succeed(SandboxBoxes, {
    current: () => undefined,
    call: (object) =>
      Effect.fail(
        new ApiError({
          code: "Unsupported",
          message:
            `Sandbox "${object.metadata.name}" cannot take commands or file requests: this server runs no boxes (--backend none)`,
          fix: "Run the server with --backend local (the default) or --backend sim (docs/sandboxes.md)."
        })
      )
  })
}

const plural = "sandboxes"

/** The boxes over the capacity port (a backend that runs none answers Unsupported). */
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
