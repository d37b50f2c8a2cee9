/**
 * What label and field selectors can see of an object: its name, project, labels and `status.phase`. The change log
 * keeps this projection of an object's previous state, so that a filtered watch can tell "stopped matching" (DELETED)
 * and "started matching" (ADDED) apart from a plain MODIFIED, as Kubernetes' watch cache does — without storing every
 * previous object whole.
 */
import type { Json } from "../Json.ts"
import { phaseOf, type ResourceObject } from "./ObjectMeta.ts"

export const selectable = (object: ResourceObject): ResourceObject => {
  const { name, namespace, labels, uid, resourceVersion, generation, creationTimestamp } = object.metadata
  const phase = phaseOf(object)
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    metadata: {
      name,
      uid,
      resourceVersion,
      generation,
      creationTimestamp,
      ...(namespace === undefined ? {} : { namespace }),
      ...(labels === undefined ? {} : { labels })
    },
    ...(phase === undefined ? {} : { status: { phase } satisfies Json })
  }
}
