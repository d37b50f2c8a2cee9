/**
 * The Budgets' status loop (docs/billing.md, "Budgets"): writes each Budget's status through the status subresource
 * when it changed, and records budget.threshold once per threshold per period (BudgetService.reconcile). It runs at
 * `pollInterval` and whenever a Budget changes. Apart from Budgets.ts because it writes through Resources, which the
 * service must not need (the estimates that Resources calls read rooms from it).
 */
import { type Duration, Effect, Layer, Queue, Schedule } from "effect"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { Resources } from "../apiserver/Resources.ts"
import { refOf, type ResourceRef } from "../core/meta/Kinds.ts"
import { byPluralName } from "../kinds/Kinds.ts"
import { budgetComponent, BudgetService, budgetsResource, type BudgetStatusWriter } from "./Budgets.ts"
import { surviving } from "./Following.ts"

export interface BudgetStatusOptions {
  /** How often statuses are computed again when no Budget changed (spending moves with the ledger). */
  readonly pollInterval?: Duration.Input
}

/** Budgets' statuses catch up with spending within this (real) time. */
export const budgetPollIntervalDefault: Duration.Input = "5 seconds"

/**
 * Writes a Budget's status through the status subresource, at the resourceVersion the snapshot holds, with `ops` in its
 * commit.
 */
export const budgetStatusWriter = (resources: Resources["Service"], group: string): BudgetStatusWriter => {
  const info = byPluralName(budgetsResource)!
  const ref: ResourceRef = refOf(group, info)
  return (budget, status, ops) => {
    const { name, uid, resourceVersion } = budget.metadata
    const body = { apiVersion: ref.apiVersion, kind: info.kind, metadata: { name, uid, resourceVersion }, status }
    return Effect.map(
      resources.replace(ref, undefined, name, body, {
        dryRun: false,
        fieldValidation: "Ignore",
        fieldManager: budgetComponent,
        commitWith: () => ops
      }, "status"),
      (result) => result.object
    )
  }
}

/** The status loop (needs BudgetService, Resources, ApiConfig). */
export const layer = (options: BudgetStatusOptions = {}) => Layer.effectDiscard(statusLoop(options))

function statusLoop(options: BudgetStatusOptions) {
  return Effect.gen(function*() {
    const service = yield* BudgetService
    const resources = yield* Resources
    const { group } = yield* ApiConfig
    const write = budgetStatusWriter(resources, group)
    const pokes = yield* Queue.sliding<void>(1)
    const poke = Effect.sync(() => Queue.offerUnsafe(pokes, undefined))
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(service.changed, poke)))
    yield* Effect.forkScoped(Effect.repeat(poke, Schedule.spaced(options.pollInterval ?? budgetPollIntervalDefault)))
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.andThen(Queue.take(pokes), surviving("budgets", "writing statuses")(service.reconcile(write)))
      )
    )
  })
}
