/**
 * Volume (spec: Other kinds — "a Volume has revisions"; VolumeMount {volume, mountPath, readOnly, revision (only with
 * readOnly)}; JobInput.volume {name, revision}; Workspace.volume "ReadWriteOnce Volume mounted at /home/platform, saved
 * on every stop"; error VolumeBusy): persistent storage whose contents are committed as numbered revisions. The spec
 * does not show its fields; this module decides a small schema (docs/kinds/Volume.md): its size and access mode, and
 * the revisions, phase and current writer the service reports. Size and access mode are fixed at create.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { defaulted, described, oneOf, optional, quantity } from "../../core/meta/Fields.ts"
import { fullOps, kindInfo } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, NonNegativeInt } from "../../core/schemas/Shared.ts"
import { parseQuantity } from "../../core/Units.ts"

/** Access modes (Kubernetes' names): one writer at a time, or read-only mounts only. */
export const volumeAccessModes = ["ReadWriteOnce", "ReadOnlyMany"] as const

/** Volume phases (nodus): Pending (being provisioned), Available, InUse (a writer holds it), Failed. */
export const volumePhases = ["Pending", "Available", "InUse", "Failed"] as const

const size = quantity({ value: Limits.volumeSizeBytesMax, text: Limits.volumeSizeMaxText }).check(Schema.makeFilter(
  (text: string) => {
    const bytes = parseQuantity(text)
    return bytes === undefined || bytes >= 1 ? undefined : `Invalid value: "${text}": must be greater than 0`
  },
  { toJsonSchema: () => [{}, true] }
))

export const VolumeSpec = Schema.Struct({
  size: described(size, `Capacity, a quantity such as 100Gi; at most ${Limits.volumeSizeMaxText}.`),
  accessMode: defaulted(
    oneOf(volumeAccessModes),
    "ReadWriteOnce",
    "ReadWriteOnce (one workload writes at a time; another writer gets VolumeBusy) or ReadOnlyMany (mounted read-only by any number at once)."
  )
}).annotate({
  identifier: "VolumeSpec",
  description: "Persistent storage with revisions (spec: Other kinds, VolumeMount)."
})

const VolumeRevision = Schema.Struct({
  revision: described(
    Schema.Int,
    "The revision number, from 1; what VolumeMount.revision and JobInput.volume.revision name."
  ),
  createdTime: optional(Schema.String, "When it was committed."),
  sizeBytes: optional(NonNegativeInt, "Bytes stored: the size of its archive."),
  sha256: optional(
    Schema.String,
    "The SHA-256 (hex) of its archive (a tar.zst of the Volume's files), as a JobInput's status shows it."
  ),
  committedBy: optional(
    Schema.Struct({
      kind: described(Schema.String, "The workload's kind."),
      name: described(Schema.String, "The workload's name.")
    }),
    "The workload whose write made it."
  )
})

export const VolumeStatus = Schema.Struct({
  phase: optional(oneOf(volumePhases), "Pending, Available, InUse or Failed."),
  revision: optional(NonNegativeInt, "The last committed revision; 0 before the first commit."),
  revisions: optional(
    Schema.Array(VolumeRevision),
    `Revisions kept (the newest ${Limits.volumeRevisionsKept}), oldest first.`
  ),
  boundTo: optional(
    Schema.Struct({
      kind: described(Schema.String, "The workload's kind (e.g. Workspace, Job)."),
      name: described(Schema.String, "The workload's name."),
      uid: optional(Schema.String, "The workload's uid."),
      attempt: optional(Schema.String, "The Attempt that mounts it.")
    }),
    "The workload that holds the write mount; another writer gets VolumeBusy."
  ),
  usedBytes: optional(NonNegativeInt, "Bytes in use."),
  conditions: optional(Schema.Array(Condition), "Conditions."),
  message: optional(Schema.String, "Details."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects.")
}).annotate({ identifier: "VolumeStatus", description: "The Volume's revisions and who holds it." })

export const volume: KindDefinition = {
  spec: VolumeSpec,
  status: VolumeStatus,
  // nodus: size and access mode are fixed at create (growing would need a grow-only rule Kind.ts does not have).
  updates: { immutable: ["size", "accessMode"] }
}

/**
 * How the API serves Volume (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const volumeServed: ServedKind = {
  info: kindInfo({
    kind: "Volume",
    plural: "volumes",
    shortNames: ["vol"],
    operations: fullOps,
    description: "Persistent storage with revisions."
  }),
  definition: volume
}
