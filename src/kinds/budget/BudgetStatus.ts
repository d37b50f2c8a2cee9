/**
 * The status a Budget shows (docs/kinds/Budget.md; docs/billing.md, "Budgets"): its period, spent and held, the
 * thresholds crossed this period, and the Exceeded condition. Pure: the usage comes from the ledger's rules in
 * core/billing/Budgets.ts, `now` as epoch milliseconds; the runtime's Budget controller (src/runtime/Budgets.ts)
 * writes it.
 */
import { type BudgetRule, isExceeded, type Period, thresholdsReached, type Usage } from "../../core/billing/Budgets.ts"
import { conditionsOf, withCondition } from "../../core/controller/Conditions.ts"
import { isObject, type Json, type JsonObject } from "../../core/Json.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import { iso } from "../../core/StatusText.ts"

export interface BudgetStatusInput {
  readonly rule: BudgetRule
  readonly usage: Usage
  readonly period: Period
  /** The status as stored (its thresholdsCrossed and Exceeded condition carry over within a period). */
  readonly previous: Json | undefined
  readonly generation: number
  readonly now: number
}

export interface BudgetStatusResult {
  readonly status: JsonObject
  /** Thresholds crossed since the stored status (budget.threshold once each per period). */
  readonly crossed: ReadonlyArray<number>
}

const exceededCondition = "Exceeded"

/** The Exceeded condition's reason and message for this usage. */
const exceededOf = (rule: BudgetRule, usage: Usage) => {
  const amounts = `${formatMicroUsd(usage.spent)} USD spent and ${formatMicroUsd(usage.held)} USD held of ${
    formatMicroUsd(rule.amountMicro)
  } USD this period`
  if (!isExceeded(rule, usage)) return { status: "False" as const, reason: "WithinAmount", message: `${amounts}.` }
  const consequence = rule.action === "Refuse"
    ? "new runs of matching work are refused (BudgetExceeded)"
    : "action Notify: nothing is refused"
  return { status: "True" as const, reason: "AmountReached", message: `${amounts}; ${consequence}.` }
}

/**
 * The status a Budget shows (docs/kinds/Budget.md): the period, spent and held, the thresholds crossed this period
 * (kept from the stored status while its period lasts, so a restart does not announce one again), and the Exceeded
 * condition, whose lastTransitionTime moves only when its status changes.
 */
export const budgetStatusOf = (input: BudgetStatusInput): BudgetStatusResult => {
  const { rule, usage, period, previous, now } = input
  const stored = isObject(previous) ? previous : {}
  const periodStart = iso(period.start)
  const samePeriod = stored["periodStart"] === periodStart
  const before = samePeriod && Array.isArray(stored["thresholdsCrossed"])
    ? stored["thresholdsCrossed"].filter((item): item is number => typeof item === "number")
    : []
  const crossed = thresholdsReached(rule, usage).filter((percent) => !before.includes(percent))
  const exceeded = exceededOf(rule, usage)
  const conditions = withCondition(
    conditionsOf(stored),
    exceededCondition,
    exceeded.status,
    exceeded.reason,
    exceeded.message,
    now,
    input.generation
  )
  const status: JsonObject = {
    spentUSD: formatMicroUsd(usage.spent),
    heldUSD: formatMicroUsd(usage.held),
    periodStart,
    ...(period.end === undefined ? {} : { periodEnd: iso(period.end) }),
    thresholdsCrossed: [...before, ...crossed].sort((a, b) => a - b),
    conditions: conditions as unknown as Json,
    observedGeneration: input.generation
  }
  return { status, crossed }
}
