/**
 * The kinds the runtime runs: for each, its machine (core/kinds/<kind>/), how a stored object's spec is read for it
 * (its schema, with defaults), and the admission it adds. The reconciler (Reconciler.ts) steps every object of every
 * kind registered here, through the same billing step and the same capacity port, and names no kind itself.
 *
 * A newcomer adds a kind by writing its schema (core/schemas/<Kind>.ts, registered in core/schemas/Definitions.ts),
 * its machine, and one entry in `defaultKinds` (docs/architecture.md, "Adding a kind").
 */
import { Context, Layer } from "effect"
import type { Machine } from "../core/controller/Controller.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { jobKind } from "./kinds/Job.ts"

export interface RuntimeKind<Spec, Status> {
  /** The kind's name in the registry of served kinds (core/meta/Kinds.ts). */
  readonly kind: string
  readonly machine: Machine<Spec, Status>
  /**
   * The spec of a stored object as the machine reads it: the kind's schema with its defaults (the object was admitted
   * already; this gives it its types), and server-owned annotations folded in. Undefined for a spec the schema refuses
   * (an object stored under an older schema), which is then left alone.
   */
  readonly specOf: (object: ResourceObject, group: string) => Spec | undefined
}

/** A kind of any spec and status: the registry holds kinds of different types side by side. */
// biome-ignore lint: the registry is heterogeneous; each entry is typed where it is written.
export type AnyRuntimeKind = RuntimeKind<any, any>

/** The kinds nodus runs today. */
export const defaultKinds: ReadonlyArray<AnyRuntimeKind> = [jobKind]

export class KindRegistry extends Context.Service<KindRegistry, {
  readonly kinds: ReadonlyArray<AnyRuntimeKind>
}>()("nodus/runtime/KindRegistry") {
  static readonly layer = (kinds: ReadonlyArray<AnyRuntimeKind> = defaultKinds) => Layer.succeed(KindRegistry, KindRegistry.of({ kinds }))
}
