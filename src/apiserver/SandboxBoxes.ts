/**
 * A running Sandbox's box (docs/sandboxes.md), which the HTTP layer drives (http/SandboxApi.ts) and a backend that runs
 * boxes reaches through its capacity port (server/SandboxBoxes.ts): a request goes to the box of the Sandbox's current
 * attempt. Without such a backend every request is Unsupported, with the reason.
 */
import { Context, Effect, Layer } from "effect"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import type { BoxReply, BoxRequest } from "../core/SandboxBox.ts"

export class SandboxBoxes extends Context.Service<SandboxBoxes, {
  /**
   * The Sandbox as the backend last heard of it (the change feed), when it follows them: its phase and attempt without
   * a read of the store. Undefined: read the store.
   */
  readonly current: (namespace: string, name: string) => ResourceObject | undefined
  /** Sends `request` to the box of `object`'s attempt `attempt` (status.attempt.name). */
  readonly call: (object: ResourceObject, attempt: string, request: BoxRequest) => Effect.Effect<BoxReply, ApiError>
}>()("nodus/apiserver/SandboxBoxes") {
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
