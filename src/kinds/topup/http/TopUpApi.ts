/**
 * A TopUp's HTTP parts (docs/billing.md, "Credits"): its create is checked and processed by the credit service
 * (runtime/Credits.ts) before the answer, and the operator refunds one with `POST …/operator/topups/{name}/refund`,
 * admin only.
 */
import { Effect } from "effect"
import type { KindRegistration } from "../../../http/KindApi.ts"
import { CreditService } from "../../../runtime/Credits.ts"

export const topUpRegistration: KindRegistration<CreditService> = {
  kind: "TopUp",
  make: Effect.gen(function*() {
    const credits = yield* CreditService
    const hooks = credits.createHooks("topups")
    return {
      ...(hooks === undefined ? {} : { createHooks: hooks }),
      operator: (name, path) =>
        name !== undefined && path.length === 1 && path[0] === "refund"
          ? { does: "refund topups", run: credits.refund }
          : undefined
    }
  })
}
