/**
 * Pool (spec: Pool): customer hosts that are measured, routed onto, forecast and managed. The spec schema admits what
 * clients write and applies the spec's defaults (routing Prefer / Approve / Timeout / 30m, predict horizon 168h, act
 * mode Off); the policy rules tie each policy field to the action that uses it (spec: "duration (Drain window)",
 * "idleFor (IdleReclaim)", …). Every field may change after create (the spec names no immutable Pool field). Writes
 * the spec ties to error codes but this module does not decide — enabling prediction without billing:write or rate
 * consent, deleting a Pool still in use (PoolInUse) — belong to the write path (docs/kinds/Pool.md).
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import {
  defaulted,
  described,
  duration,
  intAtLeast,
  listOf,
  matching,
  oneOf,
  onlyWith,
  optional,
  usd
} from "../../core/meta/Fields.ts"
import { fullOps, kindInfo } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, NonNegativeInt, Timestamp } from "../../core/schemas/Shared.ts"
import { parseDurationMs } from "../../core/Units.ts"

/** Spec: Pool, act.policies[].action — also the actions a PoolAction proposes or takes. */
export const poolActions = ["IdleReclaim", "Drain", "Defragment", "WaitTuning", "Burst"] as const

/**
 * Pool phases in `status.phase` (the spec leaves them open — States and transitions; nodus's own, docs/kinds/Pool.md).
 */
export const poolPhases = ["Pending", "Ready", "Degraded", "Offline"] as const

// ---------------------------------------------------------------------------------------------------------------------
// Cron (spec: act.policies[].schedule, "cron expression opening a Drain window")

const cronNames = (names: ReadonlyArray<string>): string =>
  names.flatMap((name) => [name, name.toLowerCase()]).join("|")
const months = cronNames(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"])
const weekdays = cronNames(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])

/** One field of a cron expression: `*`, a value or a range, each with an optional `/step`, in a comma list. */
const cronField = (value: string): string => {
  const item = `(\\*|(${value})(-(${value}))?)(\\/[1-9][0-9]*)?`
  return `${item}(,${item})*`
}

/**
 * The five fields of a standard cron expression — minute (0-59), hour (0-23), day of month (1-31), month (1-12 or
 * JAN-DEC) and day of week (0-7 or SUN-SAT) — separated by spaces. Macros (@daily), seconds and Quartz's `?`, `L`, `W`
 * and `#` are not accepted (nodus; docs/kinds/Pool.md).
 */
export const cronPattern = new RegExp(
  `^${
    [
      cronField("[0-5]?[0-9]"),
      cronField("0?[0-9]|1[0-9]|2[0-3]"),
      cronField("0?[1-9]|[12][0-9]|3[01]"),
      cronField(`0?[1-9]|1[0-2]|${months}`),
      cronField(`[0-7]|${weekdays}`)
    ].join(" +")
  }$`,
  "u"
)

export const CronSchedule = matching(
  cronPattern,
  "must be a cron expression of five fields: minute hour day-of-month month day-of-week"
)

// ---------------------------------------------------------------------------------------------------------------------
// spec

const waitTimeout = duration({ minimumMs: Limits.poolWaitTimeoutMsMin, maximumMs: Limits.poolWaitTimeoutMsMax })
const policyDuration = duration({ minimumMs: Limits.poolPolicyDurationMsMin })

const PoolPolicyFields = Schema.Struct({
  action: described(oneOf(poolActions), "IdleReclaim, Drain, Defragment, WaitTuning or Burst."),
  duration: optional(policyDuration, "Drain window: how long a Drain window stays open (Drain only; at least 1m)."),
  idleFor: optional(
    policyDuration,
    "IdleReclaim: how long a Node must be idle before it is reclaimed (IdleReclaim only; at least 1m)."
  ),
  maxGPUs: optional(
    intAtLeast(1),
    "Burst pre-approval: most GPUs a burst to the market may add without asking (Burst only)."
  ),
  maxRateUSDPerHour: optional(
    usd,
    "Burst pre-approval: highest hourly rate, a decimal USD string, a burst may run at without asking (Burst only)."
  ),
  minWaitTimeout: optional(waitTimeout, "WaitTuning lower bound for routing.waitTimeout, 1m to 24h (WaitTuning only)."),
  maxWaitTimeout: optional(waitTimeout, "WaitTuning upper bound for routing.waitTimeout, 1m to 24h (WaitTuning only)."),
  schedule: optional(CronSchedule, "Cron expression (five fields) opening a Drain window (Drain only).")
})

type PoolPolicyInput = typeof PoolPolicyFields.Type

const only = (field: string, action: (typeof poolActions)[number]) =>
  onlyWith<PoolPolicyInput>(field, `action ${action}`, (policy) => policy.action === action)

// WaitTuning bounds: minWaitTimeout ≤ maxWaitTimeout (they bound one value).
const waitBoundsOrdered = Schema.makeFilter<PoolPolicyInput>(
  (policy) => {
    const minimum = policy.minWaitTimeout === undefined ? undefined : parseDurationMs(policy.minWaitTimeout)
    const maximum = policy.maxWaitTimeout === undefined ? undefined : parseDurationMs(policy.maxWaitTimeout)
    return minimum !== undefined && maximum !== undefined && minimum > maximum
      ? {
        path: ["maxWaitTimeout"],
        issue: `Invalid value: "${policy.maxWaitTimeout}": must be at least minWaitTimeout (${policy.minWaitTimeout})`
      }
      : undefined
  },
  { toJsonSchema: () => [{}, true] }
)

export const PoolPolicy = PoolPolicyFields.check(
  only("duration", "Drain"),
  only("schedule", "Drain"),
  only("idleFor", "IdleReclaim"),
  only("maxGPUs", "Burst"),
  only("maxRateUSDPerHour", "Burst"),
  only("minWaitTimeout", "WaitTuning"),
  only("maxWaitTimeout", "WaitTuning"),
  waitBoundsOrdered
)

const PoolRouting = Schema.Struct({
  mode: defaulted(
    oneOf(["Prefer", "Only"]),
    "Prefer",
    "Prefer (default: the Pool first, then the market per burstToMarket) or Only."
  ),
  burstToMarket: defaulted(oneOf(["Allow", "Approve", "Deny"]), "Approve", "Allow, Approve (default) or Deny."),
  waitPolicy: defaulted(oneOf(["Never", "Cheaper", "Timeout"]), "Timeout", "Never, Cheaper or Timeout (default)."),
  waitTimeout: defaulted(
    waitTimeout,
    Limits.poolWaitTimeoutDefault,
    "How long work waits for the Pool, 1m to 24h; default 30m."
  )
})

const PoolPredict = Schema.Struct({
  enabled: optional(
    Schema.Boolean,
    "Turns on forecasting (needs billing:write and rate consent; the Predict fee is billed from status.predict.enabledTime). Absent means off."
  ),
  horizon: defaulted(
    duration({ minimumMs: Limits.poolPredictHorizonMsMin, maximumMs: Limits.poolPredictHorizonMsMax }),
    Limits.poolPredictHorizonDefault,
    "How far ahead the forecast looks, 24h to 720h; default 168h."
  )
})

const PoolAct = Schema.Struct({
  mode: defaulted(oneOf(["Off", "Shadow", "Propose", "Auto"]), "Off", "Off (default), Shadow, Propose or Auto."),
  paused: optional(
    Schema.Boolean,
    "Kill switch: running actions stop at the next safe point, pending ones are canceled."
  ),
  policies: optional(listOf(PoolPolicy, Limits.poolActPoliciesMax), "At most 16 policies.")
})

export const PoolSpec = Schema.Struct({
  sandboxCapable: optional(Schema.Boolean, "Whether the Pool's hosts may run Sandboxes."),
  routing: defaulted(PoolRouting, {}, "How work is routed onto the Pool and to the market."),
  predict: defaulted(PoolPredict, {}, "Demand forecasting."),
  act: defaulted(PoolAct, {}, "Actions the service may propose or take on the Pool.")
}).annotate({ identifier: "PoolSpec", description: "How the Pool is routed onto, forecast and managed (spec: Pool)." })

// ---------------------------------------------------------------------------------------------------------------------
// status

/** A non-negative decimal string (spec: utilization.deviceHours "decimal"). */
const decimalString = matching(/^(0|[1-9][0-9]*)(\.[0-9]+)?$/u, "must be a non-negative decimal string such as 12.5")

const percent = Schema.Number.check(Schema.makeFilter(
  (value: number) =>
    value >= 0 && value <= Limits.percentMax
      ? undefined
      : `Invalid value: ${value}: must be between 0 and ${Limits.percentMax}, inclusive`,
  { toJsonSchema: () => ({ minimum: 0, maximum: Limits.percentMax }) }
))

export const PoolStatus = Schema.Struct({
  phase: optional(
    oneOf(poolPhases),
    "Pending (no Node Ready yet), Ready, Degraded (some Nodes not Ready) or Offline (no Node Ready)."
  ),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  capacity: optional(
    Schema.Struct({
      nodes: optional(NonNegativeInt, "Nodes enrolled."),
      readyNodes: optional(NonNegativeInt, "Nodes Ready."),
      gpus: optional(
        Schema.Record(
          Schema.String,
          Schema.Struct({
            total: optional(NonNegativeInt, "GPUs of the model."),
            free: optional(NonNegativeInt, "GPUs of the model not in use.")
          })
        ),
        "GPUs by model: total and free."
      )
    }),
    "Capacity of the Pool's Nodes."
  ),
  conditions: optional(Schema.Array(Condition), "Conditions of the Pool."),
  forecast: optional(
    Schema.Struct({
      generatedTime: optional(Timestamp, "When the forecast was made."),
      horizon: optional(duration(), "How far ahead it looks."),
      peakDemandGPUs: optional(
        Schema.Struct({ p50: optional(NonNegativeInt, "Median."), p90: optional(NonNegativeInt, "90th percentile.") }),
        "Peak GPU demand over the horizon."
      ),
      shortfallTime: optional(Timestamp, "When demand is forecast to exceed the Pool (event pool.forecast_shortfall).")
    }),
    "The latest demand forecast (predict.enabled)."
  ),
  predict: optional(
    Schema.Struct({
      enabledTime: optional(Timestamp, "When prediction was enabled; the Predict fee is billed from it.")
    }),
    "Prediction."
  ),
  routing: optional(
    Schema.Struct({
      waiting: optional(NonNegativeInt, "Workloads waiting for the Pool."),
      burstPending: optional(NonNegativeInt, "Bursts to the market waiting for approval."),
      consent: optional(
        Schema.Struct({
          rateUSD: optional(usd, "The rate consented to."),
          time: optional(Timestamp, "When consent was given.")
        }),
        "Rate consent."
      )
    }),
    "Routing."
  ),
  act: optional(
    Schema.Struct({
      pending: optional(NonNegativeInt, "PoolActions waiting for approval."),
      lastActionTime: optional(Timestamp, "When an action was last applied.")
    }),
    "Actions."
  ),
  utilization: optional(
    Schema.Struct({
      deviceHours: optional(decimalString, "GPU device-hours used in the window (decimal string)."),
      gpuPercent: optional(percent, "GPU utilization in the window, 0 to 100."),
      window: optional(duration(), "The window measured.")
    }),
    "Utilization."
  )
}).annotate({ identifier: "PoolStatus", description: "What the service observed of the Pool." })

// Spec: Pool — no field is declared immutable, so every field may change (no `updates`).
export const pool: KindDefinition = {
  spec: PoolSpec,
  status: PoolStatus
}

/**
 * How the API serves Pool (spec: Availability by kind) and its schema: its entry in the registry (src/kinds/Kinds.ts).
 */
export const poolServed: ServedKind = {
  info: kindInfo({
    kind: "Pool",
    plural: "pools",
    operations: fullOps,
    description: "Customer hosts that are measured, routed onto, forecast and managed."
  }),
  definition: pool
}
