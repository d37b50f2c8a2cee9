/**
 * The kinds the runtime runs: for each, its machine (kinds/<kind>/), how a stored object's spec is read for it
 * (its schema, with defaults), and the admission it adds. The reconciler (Reconciler.ts) steps every object of every
 * kind registered here, through the same billing step and the same capacity port, and names no kind itself.
 *
 * A newcomer adds a kind by writing its schema (core/schemas/<Kind>.ts, registered in kinds/Definitions.ts),
 * its machine, and one entry in `defaultKinds` (docs/architecture.md, "Adding a kind").
 */
import { Context, Layer } from "effect"
import { functionKind } from "../kinds/function/FunctionKind.ts"
import { jobKind } from "../kinds/job/JobKind.ts"
import type { AnyRuntimeKind } from "../kinds/Kind.ts"
import { sandboxKind } from "../kinds/sandbox/SandboxKind.ts"

/** The kinds nodus runs today. */
export const defaultKinds: ReadonlyArray<AnyRuntimeKind> = [jobKind, sandboxKind, functionKind]

export class KindRegistry extends Context.Service<KindRegistry, {
  readonly kinds: ReadonlyArray<AnyRuntimeKind>
}>()("nodus/runtime/Registry") {
  static readonly layer = (kinds: ReadonlyArray<AnyRuntimeKind> = defaultKinds) =>
    Layer.succeed(KindRegistry, KindRegistry.of({ kinds }))
}
