/**
 * Conditions (spec: Object envelope — `status.conditions[]`), written the same way by every controller: a list keyed
 * by type; `lastTransitionTime` moves when the status or the reason changes and is the time the caller passes (no
 * clock is read here, unlike apimachinery's SetStatusCondition); a condition that says the same thing again is the
 * same object, so a step that changes nothing returns what it was given.
 */
import type { Condition as ConditionSchema } from "../schemas/Shared.ts"
import { iso } from "../StatusText.ts"

export type Condition = typeof ConditionSchema.Type

export type ConditionStatus = "True" | "False" | "Unknown"

/** The first condition of `type` (a loop: a step looks conditions up several times). */
export const conditionIn = <C extends { readonly type: string }>(
  conditions: ReadonlyArray<C> | undefined,
  type: string
): C | undefined => {
  if (conditions === undefined) return undefined
  for (let index = 0; index < conditions.length; index++) {
    const condition = conditions[index]!
    if (condition.type === type) return condition
  }
  return undefined
}

/** Whether the condition of `type` has `status`. */
export const isCondition = (
  conditions: ReadonlyArray<Condition> | undefined,
  type: string,
  status: ConditionStatus
): boolean => conditionIn(conditions, type)?.status === status

/**
 * Sets a condition at `now` (epoch ms). lastTransitionTime moves when status or reason changes (the reason starts
 * clocks: a queue timeout counts from Scheduled False Unschedulable); `observedGeneration` is written when given.
 */
export const withCondition = (
  conditions: ReadonlyArray<Condition>,
  type: string,
  status: ConditionStatus,
  reason: string,
  message: string,
  now: number,
  observedGeneration?: number
): ReadonlyArray<Condition> => {
  const previous = conditionIn(conditions, type)
  if (
    previous !== undefined && previous.status === status && previous.reason === reason &&
    previous.message === message && previous.observedGeneration === observedGeneration
  ) return conditions
  const lastTransitionTime = previous !== undefined && previous.status === status && previous.reason === reason
    ? previous.lastTransitionTime
    : iso(now)
  const next: Condition = observedGeneration === undefined
    ? { type, status, reason, message, lastTransitionTime }
    : { type, status, reason, message, lastTransitionTime, observedGeneration }
  // concat and map make arrays of their exact length (a spread leaves room for 17 or more, kept as long as the status).
  return previous === undefined
    ? conditions.concat([next])
    : conditions.map((condition) => (condition.type === type ? next : condition))
}

export const withoutCondition = (conditions: ReadonlyArray<Condition>, type: string): ReadonlyArray<Condition> =>
  conditionIn(conditions, type) !== undefined ? conditions.filter((condition) => condition.type !== type) : conditions

/**
 * The conditions of a stored status (JSON): the well-formed entries, for a controller that reads status as JSON (a
 * Budget's, a TopUp's). Entries of another shape are dropped.
 */
export const conditionsOf = (status: unknown): ReadonlyArray<Condition> => {
  const conditions = typeof status === "object" && status !== null && !Array.isArray(status)
    ? (status as { conditions?: unknown }).conditions
    : undefined
  if (!Array.isArray(conditions)) return []
  return conditions.filter((entry): entry is Condition => {
    if (typeof entry !== "object" || entry === null) return false
    const { type, status: value, reason, message, lastTransitionTime } = entry as Record<string, unknown>
    return typeof type === "string" && (value === "True" || value === "False" || value === "Unknown") &&
      typeof reason === "string" && typeof message === "string" && typeof lastTransitionTime === "string"
  })
}
