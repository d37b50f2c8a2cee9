/**
 * The Funded condition of a kind with a cost, and its events (spec: Event types — "job.max_cost_reached,
 * job.funding_lost, job.funding_restored: stopped or resumed because of the cost cap or balance; same reasons for
 * Sandboxes and other kinds with a cost"). Each kind says what stops and what starts again in its own words.
 */
import type { Funding } from "../billing/Billing.ts"
import { iso } from "../StatusText.ts"
import { type Condition, conditionIn } from "./Conditions.ts"
import type { StepState } from "./StepState.ts"

/** A kind's words for its money moves. `by` is the stop's time as shown (RFC 3339). */
export interface FundedWords {
  /** The events' type prefix: `<prefix>.max_cost_reached` and the rest. */
  readonly prefix: string
  readonly maxCostReached: (cap: string, by: string) => string
  readonly fundingLost: (message: string, by: string) => string
  readonly restoredByCap: string
  readonly restoredByCredits: string
  /** Funded True's message. */
  readonly funded: string
}

/**
 * Funded False with the stop's reason while money stops the object (an event when it starts), or with the refusal
 * while a launch waits for money; True otherwise (an event when money let it go on again).
 */
export const fund = <Status extends { readonly conditions?: ReadonlyArray<Condition> | undefined }>(
  step: StepState<Status>,
  funding: Funding,
  maxCostUSD: string | undefined,
  words: FundedWords
) => {
  const previous = conditionIn(step.conditions, "Funded")
  const stop = funding.stop
  if (stop !== undefined) {
    if (previous?.status !== "False" || previous.reason !== stop.reason) {
      if (stop.reason === "MaxCostReached") {
        step.event(
          `${words.prefix}.max_cost_reached`,
          "MaxCostReached",
          words.maxCostReached(maxCostUSD ?? "", iso(stop.at)),
          true
        )
      } else {step.event(
          `${words.prefix}.funding_lost`,
          "FundingLost",
          words.fundingLost(stop.message, iso(stop.at)),
          true
        )}
    }
    step.condition("Funded", "False", stop.reason, stop.message)
    return
  }
  if (step.waitingForFunds && funding.blocked !== undefined) {
    step.condition("Funded", "False", funding.blocked.code, funding.blocked.message)
    return
  }
  if (previous?.status === "False" && (previous.reason === "FundingLost" || previous.reason === "MaxCostReached")) {
    step.event(
      `${words.prefix}.funding_restored`,
      "FundingRestored",
      previous.reason === "MaxCostReached" ? words.restoredByCap : words.restoredByCredits
    )
  }
  step.condition("Funded", "True", "Funded", words.funded)
}
