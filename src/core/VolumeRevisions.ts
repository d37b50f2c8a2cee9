/**
 * A Volume's revisions (spec: "a Volume has revisions"; VolumeMount.revision; JobInput.volume {name, revision}; Job
 * status.inputs volumeRevision): which revision a reference means, and what a new commit keeps. The fields are
 * nodus's (docs/kinds/Volume.md): each revision is one archive (a tar.zst of the Volume's files) in the blob store,
 * named in `status.revisions[]` by its SHA-256; the newest `volumeRevisionsKept` are kept.
 */
import { isObject, type Json, type JsonObject } from "./Json.ts"
import { volumeRevisionsKept } from "./Limits.ts"
import { parseQuantity } from "./Units.ts"

/** One committed revision, as `status.revisions[]` lists it. */
export interface RevisionEntry {
  readonly revision: number
  readonly sha256: string
  readonly sizeBytes: number
  readonly createdTime: string
  readonly committedBy?: { readonly kind: string; readonly name: string } | undefined
}

const entriesOf = (status: Json | undefined): ReadonlyArray<RevisionEntry> =>
  (isObject(status ?? null) && Array.isArray((status as JsonObject)["revisions"])
    ? (status as JsonObject)["revisions"] as ReadonlyArray<Json>
    : [])
    .filter((entry): entry is JsonObject =>
      isObject(entry) && typeof entry["revision"] === "number" && typeof entry["sha256"] === "string"
    )
    .map((entry) => entry as unknown as RevisionEntry)

/** Whether a kept revision's archive has the digest `sha256`. */
export const keepsArchive = (status: Json | undefined, sha256: string): boolean =>
  entriesOf(status).some((entry) => entry.sha256 === sha256)

/** The last committed revision (0 before the first). */
export const latestRevision = (status: Json | undefined): number =>
  isObject(status ?? null) && typeof (status as JsonObject)["revision"] === "number"
    ? (status as JsonObject)["revision"] as number
    : 0

/**
 * The revision a reference names (absent: the latest), or why there is none to read: no commit yet, a number not
 * reached yet, or one no longer kept.
 */
export const pickRevision = (
  volume: string,
  status: Json | undefined,
  wanted: number | undefined
): RevisionEntry | string => {
  const entries = entriesOf(status)
  const latest = latestRevision(status)
  if (latest === 0 || entries.length === 0) {
    return `Volume "${volume}" has no committed revision yet (commit one: nodus volume put ${volume} <dir>)`
  }
  const revision = wanted ?? latest
  const found = entries.find((entry) => entry.revision === revision)
  if (found !== undefined) return found
  if (revision > latest) return `Volume "${volume}" has no revision ${revision} (its latest is ${latest})`
  return `Volume "${volume}" no longer keeps revision ${revision} (it keeps ${entries[0]!.revision} to ${
    entries.at(-1)!.revision
  })`
}

/**
 * The status after `entry` is committed as the next revision: the newest `volumeRevisionsKept` kept, and the digests
 * no kept revision names any more (their archives may be released).
 */
export const commitRevision = (
  status: Json | undefined,
  entry: Omit<RevisionEntry, "revision">
): { readonly status: JsonObject; readonly revision: number; readonly released: ReadonlyArray<string> } => {
  const revision = latestRevision(status) + 1
  const all = [...entriesOf(status), { ...entry, revision }]
  const kept = all.slice(-volumeRevisionsKept)
  const keptDigests = new Set(kept.map((kept) => kept.sha256))
  const released = [
    ...new Set(
      all.slice(0, all.length - kept.length).map((dropped) => dropped.sha256).filter((digest) =>
        !keptDigests.has(digest)
      )
    )
  ]
  const previous = isObject(status ?? null) ? status as JsonObject : {}
  return {
    revision,
    released,
    status: {
      ...previous,
      phase: "Available",
      revision,
      revisions: kept as unknown as Json,
      usedBytes: entry.sizeBytes
    }
  }
}

/** A Volume's spec.size in bytes (0 when it has none): what one revision may hold, archived and unpacked. */
export const volumeSizeBytes = (spec: Json | undefined): number => {
  const size = isObject(spec ?? null) ? (spec as { size?: Json }).size : undefined
  return typeof size === "string" ? parseQuantity(size) ?? 0 : 0
}
