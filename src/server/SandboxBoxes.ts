/**
 * The boxes of Sandboxes, as the API server reaches them (apiserver/SandboxBoxes.ts): a request goes to the capacity
 * port's `box` for the Sandbox's attempt — a live host's supervisor through its agent, or the simulator's model of a
 * box. A backend whose port runs no boxes answers Unsupported.
 */
import { Effect, Layer } from "effect"
import { ApiError } from "../core/meta/ApiError.ts"
import { CapacityPort } from "../core/capacity/Capacity.ts"
import { SandboxBoxes } from "../apiserver/SandboxBoxes.ts"

export const layer = Layer.effect(SandboxBoxes, Effect.gen(function*() {
  const port = yield* CapacityPort
  const box = port.box
  return SandboxBoxes.of({
    call: (object, attempt, request) =>
      box === undefined
        ? Effect.fail(new ApiError({ code: "Unsupported", message: "this backend runs no Sandbox boxes", fix: "Run the server with --backend local (the default) or --backend sim (docs/sandboxes.md)." }))
        : box(object.metadata.uid, attempt, request)
  })
}))
