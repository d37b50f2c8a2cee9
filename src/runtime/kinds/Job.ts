/**
 * The Job's registration with the runtime (spec: Job): the machine of core/kinds/job, and its spec as admitted by the
 * Job schema, never placed above the price bound its create consented to (docs/billing.md, "Price consent").
 */
import { boundedSpec, priceBoundIn } from "../../core/billing/PriceBound.ts"
import { isObject } from "../../core/Json.ts"
import { admitJobSpec } from "../../core/kinds/job/JobAdmission.ts"
import { jobMachine } from "../../core/kinds/job/JobMachine.ts"
import type { JobSpecType, JobStatusType } from "../../core/schemas/Job.ts"
import type { RuntimeKind } from "./RuntimeKind.ts"

export const jobKind: RuntimeKind<JobSpecType, JobStatusType> = {
  kind: "Job",
  machine: jobMachine,
  specOf: (object, group) => {
    try {
      return boundedSpec(admitJobSpec(isObject(object.spec) ? object.spec : {}), priceBoundIn(object.metadata.annotations, group))
    } catch {
      return undefined
    }
  }
}
