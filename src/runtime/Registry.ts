/**
 * The kinds the runtime runs: for each, its machine (kinds/<kind>/), how a stored object's spec is read for it
 * (its schema, with defaults), and the admission it adds. The reconciler (Reconciler.ts) steps every object of every
 * kind registered here, through the same billing step and the same capacity port, and names no kind itself.
 *
 * A newcomer adds a kind as its folder (src/kinds/<kind>/: schema, machine, entry) and one line in the registry,
 * src/kinds/Kinds.ts, whose kinds with a machine are the runtime's (docs/architecture.md, "Adding a kind").
 */
import { Context, Layer } from "effect"
import type { AnyRuntimeKind } from "../kinds/Kind.ts"
import { runtimeKinds } from "../kinds/Kinds.ts"

/** The kinds nodus runs today. */
export const defaultKinds: ReadonlyArray<AnyRuntimeKind> = runtimeKinds

export class KindRegistry extends Context.Service<KindRegistry, {
  readonly kinds: ReadonlyArray<AnyRuntimeKind>
}>()("nodus/runtime/Registry") {
  static readonly layer = (kinds: ReadonlyArray<AnyRuntimeKind> = defaultKinds) =>
    Layer.succeed(KindRegistry, KindRegistry.of({ kinds }))
}
