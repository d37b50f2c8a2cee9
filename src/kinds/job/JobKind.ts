/**
 * The Job's registration with the runtime (spec: Job): the machine of kinds/job, and its spec as admitted by the
 * Job schema, never placed above the price bound its create consented to (docs/billing.md, "Price consent").
 */
import { Effect } from "effect"
import { boundedSpec, priceBoundIn } from "../../core/billing/PriceBound.ts"
import { isObject } from "../../core/Json.ts"
import type { KindEntry, KindEstimator, RuntimeKind } from "../Kind.ts"
import { admitJobSpec } from "./JobAdmission.ts"
import { placedEstimate, placementOf, sampleRequestOf, unplacedEstimate } from "./JobEstimate.ts"
import { jobMachine } from "./JobMachine.ts"
import { jobServed, type JobSpecType, type JobStatusType } from "./JobSchema.ts"

/**
 * A Job's estimate (kinds/job/JobEstimate.ts): placed over the market now, its bands from the sampled runs of the
 * chosen variant, its blocking reasons from the funds now.
 */
const jobEstimator: KindEstimator<JobSpecType> = {
  estimate: (spec, context) => {
    const input = { ...context, spec }
    const { ranking, chosen } = placementOf(input)
    if (chosen === undefined) return Effect.succeed(unplacedEstimate(input, ranking))
    return Effect.map(
      context.sample(sampleRequestOf(input, chosen.variant)),
      (part) => placedEstimate(input, ranking, chosen, part)
    )
  }
}

export const jobKind: RuntimeKind<JobSpecType, JobStatusType> = {
  kind: "Job",
  machine: jobMachine,
  specOf: (object, group) => {
    try {
      return boundedSpec(
        admitJobSpec(isObject(object.spec) ? object.spec : {}),
        priceBoundIn(object.metadata.annotations, group)
      )
    } catch {
      return undefined
    }
  },
  estimator: jobEstimator
}

/** The kind's entry in the registry (src/kinds/Kinds.ts): how it is served, and its machine. */
export const jobEntry: KindEntry = { ...jobServed, runtime: jobKind }
