/** A Sandbox's estimate on dry runs and creates (kinds/sandbox/SandboxEstimate.ts): pure, nothing sampled. */
import { Effect } from "effect"
import type { KindEstimator } from "../Kind.ts"
import { estimateSandbox } from "./SandboxEstimate.ts"
import type { SandboxMachineSpec } from "./SandboxMachine.ts"

export const sandboxEstimator: KindEstimator<SandboxMachineSpec> = {
  estimate: (spec, context) => Effect.succeed(estimateSandbox({ ...context, spec }))
}
