/**
 * Budgets as billing reads them (docs/billing.md, "Budgets"; docs/kinds/Budget.md): a USD cap per period over the
 * spending of the objects it selects. The spec fixes that "a Budget caps spending and is matched during holds" and that
 * a run's first hold "must fit ... every matching Budget" (spec: Estimate.holdUSD); everything else here is nodus's.
 *
 * - A period is a UTC calendar month, an ISO week (from Monday), a UTC day, or the Budget's whole life (Total).
 * - An owner (the object a ledger charges and holds for) matches by project and labels (matchLabels).
 * - Usage is read from the ledger: spent = charges posted to matching owners within the period; held = what their open
 *   holds hold now. The room left for new holds is amountUSD − spent − held; a Notify Budget limits nothing.
 * - A threshold is crossed once spending this period reaches its percentage of amountUSD; the Budget is Exceeded
 *   while spent plus held reaches amountUSD.
 *
 * Pure: `now` comes in as epoch milliseconds.
 */
import { type budgetActions, budgetPeriods } from "../../kinds/budget/BudgetSchema.ts"
import { isObject, type Json } from "../Json.ts"
import { tryParseMicroUsd } from "../Money.ts"
import type { Room } from "./Billing.ts"
import type { Ledger } from "./Ledger.ts"

export type BudgetPeriod = typeof budgetPeriods[number]
export type BudgetAction = typeof budgetActions[number]

/** A Budget's spec in the ledger's units, and its creation time (where a Total period starts). */
export interface BudgetRule {
  readonly name: string
  readonly amountMicro: bigint
  readonly period: BudgetPeriod
  readonly createdAt: number
  /** Empty: every project. */
  readonly projects: ReadonlyArray<string>
  /** matchLabels; empty: every object. */
  readonly labels: Readonly<Record<string, string>>
  /** Whole percentages of the amount, ascending. */
  readonly thresholds: ReadonlyArray<number>
  readonly action: BudgetAction
}

/** What a Budget matches an owner (a ledger owner: an object by uid) on. */
export interface BudgetOwner {
  readonly namespace: string
  readonly labels: Readonly<Record<string, string>>
}

/** A period: from `start` (inclusive) to `end` (exclusive; undefined for Total, which never ends). */
export interface Period {
  readonly start: number
  readonly end: number | undefined
}

/** Spent this period and held now by the owners a Budget matches (micro-USD). */
export interface Usage {
  readonly spent: bigint
  readonly held: bigint
}

const dayMs = 86_400_000

/** The period of `rule` that holds `now` (UTC calendar periods; Total from the Budget's creation). */
export const periodOf = (rule: Pick<BudgetRule, "period" | "createdAt">, now: number): Period => {
  if (rule.period === "Total") return { start: rule.createdAt, end: undefined }
  const date = new Date(now)
  const year = date.getUTCFullYear()
  const month = date.getUTCMonth()
  if (rule.period === "Monthly") return { start: Date.UTC(year, month, 1), end: Date.UTC(year, month + 1, 1) }
  const day = Date.UTC(year, month, date.getUTCDate())
  if (rule.period === "Daily") return { start: day, end: day + dayMs }
  // ISO 8601 weeks start on Monday; getUTCDay counts from Sunday (0).
  const start = day - ((date.getUTCDay() + 6) % 7) * dayMs
  return { start, end: start + 7 * dayMs }
}

/** Whether the Budget selects the owner: its project is listed (or none are) and it carries every selector label. */
export const matches = (rule: Pick<BudgetRule, "projects" | "labels">, owner: BudgetOwner): boolean => {
  if (rule.projects.length > 0 && !rule.projects.includes(owner.namespace)) return false
  for (const key in rule.labels) if (owner.labels[key] !== rule.labels[key]) return false
  return true
}

/** Spent within the period and held now by these owners (uids), from the ledger. */
export const usageOf = (ledger: Ledger, owners: Iterable<string>, period: Period): Usage => {
  let spent = 0n
  let held = 0n
  for (const owner of owners) {
    spent += ledger.chargedSince(owner, period.start)
    if (period.end !== undefined) spent -= ledger.chargedSince(owner, period.end)
    held += ledger.heldBy(owner)
  }
  return { spent, held }
}

/** The room a Refuse Budget leaves for new holds (may be negative); a Notify Budget limits nothing. */
export const roomOf = (rule: BudgetRule, usage: Usage): Room | undefined =>
  rule.action === "Notify"
    ? undefined
    : { code: "BudgetExceeded", name: rule.name, room: rule.amountMicro - usage.spent - usage.held }

/** Exceeded while spent plus held reaches the amount (an amount of 0 freezes the selected spending). */
export const isExceeded = (rule: BudgetRule, usage: Usage): boolean => usage.spent + usage.held >= rule.amountMicro

/**
 * The thresholds spending has reached this period: money charged, not held, since a hold may come back. Nothing spent
 * crosses nothing, so a Budget of 0 does not report every threshold at once.
 */
export const thresholdsReached = (rule: BudgetRule, usage: Usage): ReadonlyArray<number> =>
  usage.spent === 0n
    ? []
    : rule.thresholds.filter((percent) => usage.spent * 100n >= rule.amountMicro * BigInt(percent))

// ---------------------------------------------------------------------------------------------------------------------
// Reading a stored Budget

const strings = (value: Json | undefined): ReadonlyArray<string> =>
  Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : []

const stringMap = (value: Json | undefined): Readonly<Record<string, string>> =>
  isObject(value)
    ? Object.fromEntries(
      Object.entries(value).filter((entry): entry is [string, string] => typeof entry[1] === "string")
    )
    : {}

const periods: ReadonlyArray<string> = budgetPeriods

/**
 * The rule of a stored Budget (admitted by its schema, so defaults are filled), or undefined when its spec cannot be
 * read (a spec of an older schema): such a Budget is shown but limits nothing.
 */
export const ruleOf = (
  object: { readonly metadata: { readonly name: string; readonly creationTimestamp?: string }; readonly spec?: Json }
): BudgetRule | undefined => {
  const spec = object.spec
  if (
    !isObject(spec) || typeof spec["amountUSD"] !== "string" || typeof spec["period"] !== "string" ||
    !periods.includes(spec["period"])
  ) return undefined
  const amountMicro = tryParseMicroUsd(spec["amountUSD"])
  if (amountMicro === undefined) return undefined
  const selector = isObject(spec["selector"]) ? spec["selector"] : {}
  const thresholds = Array.isArray(spec["thresholds"])
    ? spec["thresholds"].filter((item): item is number => typeof item === "number")
    : []
  const created = Date.parse(object.metadata.creationTimestamp ?? "")
  return {
    name: object.metadata.name,
    amountMicro,
    period: spec["period"] as BudgetPeriod,
    createdAt: Number.isNaN(created) ? 0 : created,
    projects: strings(selector["projects"]),
    labels: stringMap(selector["labels"]),
    thresholds: [...thresholds].sort((a, b) => a - b),
    action: spec["action"] === "Notify" ? "Notify" : "Refuse"
  }
}
