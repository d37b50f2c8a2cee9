/**
 * A CreditGrant's HTTP parts (docs/billing.md, "Credits"): the operator's grant, `POST …/operator/creditgrants` (a
 * CreditGrant body; Idempotency-Key as on creates), admin only, beside the spec's operations (list, read); its create
 * is checked and processed by the credit service (runtime/Credits.ts) before the answer.
 */
import { Effect } from "effect"
import type { KindRegistration } from "../../../http/KindApi.ts"
import { CreditService } from "../../../runtime/Credits.ts"

export const creditGrantRegistration: KindRegistration<CreditService> = {
  kind: "CreditGrant",
  make: Effect.gen(function*() {
    const hooks = (yield* CreditService).createHooks("creditgrants")
    return {
      ...(hooks === undefined ? {} : { createHooks: hooks }),
      operator: (name) => (name === undefined ? { does: "grant credits", run: "create" } : undefined)
    }
  })
}
