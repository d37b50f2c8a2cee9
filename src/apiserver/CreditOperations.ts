/**
 * What the HTTP layer asks of the credit services (docs/billing.md, "Credits"), declared here and implemented by the
 * runtime (src/runtime/Credits.ts), so the API server never imports the services it serves: the create hooks of the
 * credit kinds a client's request passes through (TopUp, the operator's CreditGrant), and the operator's refund.
 */
import { Context, Effect, Layer } from "effect"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"

/** Steps a client's create of a credits kind takes around the generic create (src/http/Api.ts). */
export interface CreateHooks {
  /** Before the create (dry runs too): refuses what the kind's rules refuse; answers the body to create. */
  readonly admit: (body: unknown) => Effect.Effect<unknown, ApiError>
  /** After a real create: the processing, answering the object as it then stands (failures are retried later). */
  readonly settle: (object: ResourceObject) => Effect.Effect<ResourceObject>
}

export class CreditOperations extends Context.Service<CreditOperations, {
  /** The hooks of creates of `plural` (topups, creditgrants), if it has any. */
  readonly createHooks: (plural: string) => CreateHooks | undefined
  /** Refunds a Succeeded TopUp (an operator's operation); a Refunded one is answered as it is. */
  readonly refund: (name: string) => Effect.Effect<ResourceObject, ApiError>
}>()("nodus/apiserver/CreditOperations") {
  /** No credit services behind the API (tests of the bare machinery): no hooks, and nothing to refund. */
  static readonly layerNone = Layer.succeed(
    CreditOperations,
    CreditOperations.of({
      createHooks: () => undefined,
      refund: (name) => Effect.fail(new ApiError({ code: "NotFound", message: `topups "${name}" not found` }))
    })
  )
}
