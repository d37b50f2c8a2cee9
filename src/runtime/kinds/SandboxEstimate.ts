/** A Sandbox's estimate on dry runs and creates (core/kinds/sandbox/SandboxEstimate.ts): pure, nothing sampled. */
import { Effect } from "effect"
import { estimateSandbox } from "../../core/kinds/sandbox/SandboxEstimate.ts"
import type { SandboxMachineSpec } from "../../core/kinds/sandbox/SandboxMachine.ts"
import type { KindEstimator } from "./RuntimeKind.ts"

export const sandboxEstimator: KindEstimator<SandboxMachineSpec> = {
  estimate: (spec, context) => Effect.succeed(estimateSandbox({ ...context, spec }))
}
