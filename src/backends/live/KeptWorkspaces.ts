/**
 * The /workspace of Snapshotted Sandboxes' boxes that ended without the server asking (docs/sandboxes.md, "/workspace
 * continuity"): their supervisor died, their agent was stopped or killed (a `nodus serve` restart), their lease
 * lapsed. Each is kept on its host, one per Sandbox, and the next box of that Sandbox here starts from it — what was
 * written, not only what the last snapshot held — unless a newer snapshot was saved meanwhile (by a box elsewhere).
 *
 * A box's area carries a marker (`box.json`, outside what the box sees) naming its owner and the snapshot its
 * /workspace descends from (the one it restored, or the last it saved), so an agent that starts again finds what the
 * previous one left, warm boxes' areas included. A kept /workspace nobody takes goes after `maxAgeMs`.
 *
 * Where the area is a filesystem of its quota (DiskQuota.ts: an ext4 image mounted at the area), /workspace cannot be
 * renamed out of it: the whole image is kept instead (unmounted, then renamed beside the marker: one rename on the
 * host's disk, whatever /workspace holds), and the next box mounts it as its area, everything but /workspace cleared.
 */
import { execFileSync } from "node:child_process"
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync
} from "node:fs"
import { join } from "node:path"
import { imageOf } from "./DiskQuota.ts"

/** What a box's area says of its /workspace. */
interface Marker {
  readonly owner: string
  /** The snapshot it descends from: the owner's checkpoint number, 0 for none (the image). */
  readonly base: number
  /** When its box started (the agent's clock): of two kept for one owner, the later one wins. */
  readonly startedAt: number
  /** When it was kept (the agent's clock): one nobody takes for `maxAgeMs` goes. */
  readonly keptAt?: number | undefined
}

const markerFile = "box.json"
const workspaceDir = "workspace"
/** A kept area's image, where the area was a filesystem of its quota. */
const imageFile = "disk"
/** Where a kept area's log goes, its image gone (the agent still reports the box's last lines). */
export const keptLogOf = (area: string) => `${area}.log`

const readMarker = (dir: string): Marker | undefined => {
  try {
    const parsed: unknown = JSON.parse(readFileSync(join(dir, markerFile), "utf8"))
    if (typeof parsed !== "object" || parsed === null) return undefined
    const { owner, base, startedAt, keptAt } = parsed as Record<string, unknown>
    if (
      typeof owner !== "string" || !/^[A-Za-z0-9._-]+$/u.test(owner) || typeof base !== "number" ||
      typeof startedAt !== "number"
    ) return undefined
    return { owner, base, startedAt, keptAt: typeof keptAt === "number" ? keptAt : undefined }
  } catch {
    return undefined
  }
}

const writeMarker = (dir: string, marker: Marker) =>
  writeFileSync(join(dir, markerFile), JSON.stringify(marker), { mode: 0o600 })

const subdirectories = (dir: string): ReadonlyArray<string> => {
  try {
    return readdirSync(dir, { withFileTypes: true }).filter((entry) => entry.isDirectory()).map((entry) =>
      join(dir, entry.name)
    )
  } catch {
    return []
  }
}

export class KeptWorkspaces {
  private readonly dir: string
  private readonly now: () => number
  private readonly maxAgeMs: number

  constructor(options: { readonly dir: string; readonly now: () => number; readonly maxAgeMs: number }) {
    this.dir = options.dir
    this.now = options.now
    this.maxAgeMs = options.maxAgeMs
    mkdirSync(this.dir, { recursive: true, mode: 0o700 })
  }

  /** A box's area starts: its owner, and the snapshot its /workspace starts from (0: the image). */
  mark(area: string, owner: string, base: number) {
    writeMarker(area, { owner, base, startedAt: this.now() })
  }

  /** The box saved a snapshot: its /workspace descends from that one now. */
  rebase(area: string, seq: number) {
    const marker = readMarker(area)
    if (marker !== undefined && seq > marker.base) writeMarker(area, { ...marker, base: seq })
  }

  /**
   * A marked box ended without being asked: its /workspace is kept (replacing an older one of its owner). True when
   * it was; an area that was a filesystem is then unmounted and gone, its log moved to `keptLogOf(area)`.
   */
  keep(area: string): boolean {
    const marker = readMarker(area)
    if (marker === undefined || !existsSync(join(area, workspaceDir))) return false
    const target = join(this.dir, marker.owner)
    const previous = readMarker(target)
    if (previous !== undefined && previous.startedAt > marker.startedAt) return false
    rmSync(target, { recursive: true, force: true })
    mkdirSync(target, { mode: 0o700 })
    if (existsSync(imageOf(area))) {
      if (existsSync(join(area, "log"))) copyFileSync(join(area, "log"), keptLogOf(area))
      execFileSync("umount", ["-l", area])
      renameSync(imageOf(area), join(target, imageFile))
    } else renameSync(join(area, workspaceDir), join(target, workspaceDir))
    writeMarker(target, { ...marker, keptAt: this.now() })
    return true
  }

  /**
   * What a previous agent left under `runsDir` (areas of boxes that died with it, `<owner>/<attempt>` and warm ones):
   * each marked /workspace is kept, then the area goes. Called before anything starts here.
   */
  keepLeftovers(runsDir: string) {
    for (const first of subdirectories(runsDir)) {
      if (first === this.dir) continue
      for (const area of subdirectories(first)) {
        if (readMarker(area) === undefined) continue
        // A previous agent's area may still be mounted (it was killed): kept, it is unmounted and its image moved.
        if (this.keep(area)) rmSync(area, { recursive: true, force: true })
        rmSync(keptLogOf(area), { force: true })
      }
    }
    this.prune()
  }

  /** Whether the owner has a kept /workspace at least as new as the snapshot a box would restore (0: none). */
  has(owner: string, restoreSeq: number): boolean {
    this.prune()
    const source = join(this.dir, owner)
    const marker = readMarker(source)
    return marker !== undefined && marker.base >= restoreSeq &&
      (existsSync(join(source, imageFile)) || existsSync(join(source, workspaceDir)))
  }

  /**
   * Makes `area` (which must not exist) from the owner's kept /workspace when it is at least as new as the snapshot
   * the box would restore (`restoreSeq`; 0: none), answering the snapshot it descends from: a kept image is mounted as
   * the area with everything but /workspace cleared, a kept directory becomes its /workspace. A kept one that a newer
   * snapshot superseded is dropped. Undefined: nothing kept to start from (and no area made).
   */
  take(owner: string, restoreSeq: number, area: string): number | undefined {
    const usable = this.has(owner, restoreSeq)
    const source = join(this.dir, owner)
    const base = readMarker(source)?.base
    if (usable && base !== undefined) {
      mkdirSync(area, { recursive: true })
      if (existsSync(join(source, imageFile))) {
        renameSync(join(source, imageFile), imageOf(area))
        execFileSync("mount", ["-o", "loop,nosuid,nodev", imageOf(area), area])
        for (const entry of readdirSync(area)) {
          if (entry !== workspaceDir) rmSync(join(area, entry), { recursive: true, force: true })
        }
      } else renameSync(join(source, workspaceDir), join(area, workspaceDir))
    }
    rmSync(source, { recursive: true, force: true })
    return usable ? base : undefined
  }

  /** Kept /workspaces nobody took for `maxAgeMs` (their Sandbox deleted, or started elsewhere) go. */
  private prune() {
    const oldest = this.now() - this.maxAgeMs
    for (const kept of subdirectories(this.dir)) {
      if ((readMarker(kept)?.keptAt ?? 0) < oldest) rmSync(kept, { recursive: true, force: true })
    }
  }
}
