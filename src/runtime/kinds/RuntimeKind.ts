/**
 * What the runtime needs of a kind it runs (Registry.ts holds the entries): its machine, and how a stored object's spec
 * is read for it.
 */
import type { Machine } from "../../core/controller/Controller.ts"
import type { ResourceObject } from "../../core/meta/ObjectMeta.ts"

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

