/**
 * Budget (spec: Other kinds — "a Budget caps spending and is matched during holds"; Estimate.holdUSD; Events
 * budget.threshold and budget.exceeded; error BudgetExceeded; cluster-scoped): a USD cap per period over the work of
 * the projects and labels it selects. The spec does not show its fields; this module decides a small schema from those
 * facts (docs/kinds/Budget.md): the amount and period, the selector, the thresholds that emit budget.threshold, and
 * what happens on exceeding it. Every field may change after create.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { defaulted, described, intBetween, listOf, oneOf, optional, uniqueBy, usd } from "../../core/meta/Fields.ts"
import { condition, fullOps, kindInfo, shown } from "../../core/meta/Kinds.ts"
import { LabelValue, ProjectName, QualifiedNameMap } from "../../core/meta/ObjectMeta.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, NonNegativeInt } from "../../core/schemas/Shared.ts"

/** Budget periods (nodus; the spec names none): calendar month, ISO week and UTC day, or the Budget's whole life. */
export const budgetPeriods = ["Monthly", "Weekly", "Daily", "Total"] as const

/**
 * What crossing 100 % does (nodus): Refuse new holds with BudgetExceeded (the cap the spec describes), or only Notify.
 */
export const budgetActions = ["Refuse", "Notify"] as const

/** A label selector map (matchLabels): keys are qualified names, values label values, as metadata.labels are. */
const LabelSelectorMap = QualifiedNameMap(LabelValue)

const BudgetSelector = Schema.Struct({
  projects: optional(
    listOf(ProjectName, Limits.budgetProjectsMax).check(uniqueBy((project: string) => project, "projects")),
    "Projects whose spending counts; empty = every project."
  ),
  labels: optional(LabelSelectorMap, "Only objects carrying every one of these labels count; empty = every object.")
})

const Thresholds = listOf(
  intBetween(Limits.budgetThresholdPercentMin, Limits.budgetThresholdPercentMax),
  Limits.budgetThresholdsMax
)
  .check(uniqueBy((percent: number) => String(percent), "thresholds"))

export const BudgetSpec = Schema.Struct({
  amountUSD: described(usd, "The cap in USD for each period (a decimal string such as 500.00)."),
  period: described(
    oneOf(budgetPeriods),
    "Monthly, Weekly, Daily (UTC calendar periods) or Total (the Budget's whole life)."
  ),
  selector: optional(
    BudgetSelector,
    "Which spending counts against the Budget; absent or empty = all spending of the organization."
  ),
  thresholds: optional(
    Thresholds,
    "Percentages of amountUSD (1 to 100, e.g. 50, 80, 100); crossing one emits budget.threshold once per period."
  ),
  action: defaulted(
    oneOf(budgetActions),
    "Refuse",
    "Refuse: a hold that would take spent plus held past amountUSD is refused with BudgetExceeded (event budget.exceeded); Notify: only events."
  )
}).annotate({ identifier: "BudgetSpec", description: "A USD cap per period matched during holds (spec: Other kinds)." })

export const BudgetStatus = Schema.Struct({
  spentUSD: optional(usd, "Charged in the current period by matching work."),
  heldUSD: optional(usd, "Currently held by matching work."),
  periodStart: optional(Schema.String, "When the current period started."),
  periodEnd: optional(Schema.String, "When the current period ends (absent for Total)."),
  thresholdsCrossed: optional(Schema.Array(NonNegativeInt), "Thresholds crossed in the current period."),
  conditions: optional(Schema.Array(Condition), "Exceeded is True while spent plus held reaches amountUSD."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects.")
}).annotate({ identifier: "BudgetStatus", description: "What the Budget has counted in its current period." })

export const budget: KindDefinition = {
  spec: BudgetSpec,
  status: BudgetStatus
  // Every field may change after create (nodus; the spec states no immutability for Budget).
}

/**
 * How the API serves Budget (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const budgetServed: ServedKind = {
  info: kindInfo({
    kind: "Budget",
    plural: "budgets",
    shortNames: ["bdg"],
    scope: "Cluster",
    operations: fullOps,
    scopePrefix: "billing",
    state: condition("Exceeded", "True while spent plus held reaches the amount (its Exceeded condition)"),
    columns: [
      { ...shown("Amount", "spec.amountUSD", "The cap per period"), format: "usd" },
      shown("Period", "spec.period", "Monthly, Weekly, Daily or Total"),
      { ...shown("Spent", "status.spentUSD", "Charged this period by matching work"), format: "usd" },
      { ...shown("Held", "status.heldUSD", "Held now by matching work"), format: "usd" }
    ],
    description: "A USD cap per period matched by project and labels during holds."
  }),
  definition: budget
}
