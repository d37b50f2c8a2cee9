/**
 * The /workspace a host keeps of boxes that ended unasked (KeptWorkspaces.ts), on real directories: which one a box
 * takes.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { detectDiskQuotas, imageOf, mountArea, removeArea } from "../../../src/backends/live/DiskQuota.ts"
import { keptLogOf, KeptWorkspaces } from "../../../src/backends/live/KeptWorkspaces.ts"

const mounted = (path: string) =>
  readFileSync("/proc/self/mountinfo", "utf8").split("\n").some((line) => line.split(" ")[4] === path)

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A runs directory, its kept workspaces, and a clock the test moves. */
const host = () => {
  const runs = mkdtempSync(join(tmpdir(), "nodus-kept-"))
  dirs.push(runs)
  let now = 1_000
  const kept = new KeptWorkspaces({ dir: join(runs, "kept"), now: () => now, maxAgeMs: 60_000 })
  /** A box's area with /workspace holding `text`, marked as the owner's, descending from snapshot `base`. */
  const area = (name: string, owner: string, base: number, text: string) => {
    const path = join(runs, owner, name)
    mkdirSync(join(path, "workspace"), { recursive: true })
    writeFileSync(join(path, "workspace", "file"), text)
    kept.mark(path, owner, base)
    now += 10
    return path
  }
  /** Where the next box's area is to be made. */
  const target = () => join(mkdtempSync(join(runs, "next-")), "area")
  return { runs, kept, area, target, advance: (ms: number) => (now += ms) }
}

describe("kept workspaces", () => {
  it("gives the owner's next box the /workspace of its last box, once", () => {
    const { kept, area, target } = host()
    kept.keep(area("a-1", "owner", 3, "written"))
    const into = target()
    expect(kept.take("owner", 3, into)).toBe(3)
    expect(readFileSync(join(into, "workspace", "file"), "utf8")).toBe("written")
    expect(kept.take("owner", 3, target())).toBeUndefined()
  })

  it("drops one that a newer snapshot superseded, and takes one newer than the snapshot asked for", () => {
    const { kept, area, target } = host()
    kept.keep(area("a-1", "old", 2, "stale"))
    expect(kept.take("old", 5, target())).toBeUndefined()
    expect(kept.take("old", 0, target())).toBeUndefined()
    const saved = area("a-2", "new", 2, "newer")
    kept.rebase(saved, 7)
    kept.keep(saved)
    const into = target()
    expect(kept.take("new", 4, into)).toBe(7)
    expect(readFileSync(join(into, "workspace", "file"), "utf8")).toBe("newer")
  })

  it("keeps the later box's of two, what a previous agent left (warm areas too), and forgets one nobody took", () => {
    const { runs, kept, area, target, advance } = host()
    const earlier = area("a-1", "owner", 1, "earlier")
    const later = area("a-2", "owner", 1, "later")
    kept.keep(later)
    kept.keep(earlier)
    const into = target()
    expect(kept.take("owner", 1, into)).toBe(1)
    expect(readFileSync(join(into, "workspace", "file"), "utf8")).toBe("later")

    const warm = join(runs, "warm", "box-1")
    mkdirSync(join(warm, "workspace"), { recursive: true })
    writeFileSync(join(warm, "workspace", "file"), "left")
    kept.mark(warm, "other", 0)
    kept.keepLeftovers(runs)
    expect(existsSync(warm)).toBe(false)
    const left = target()
    expect(kept.take("other", 0, left)).toBe(0)
    expect(readFileSync(join(left, "workspace", "file"), "utf8")).toBe("left")

    kept.keep(area("a-3", "gone", 0, "forgotten"))
    advance(61_000)
    expect(kept.take("gone", 0, target())).toBeUndefined()
  })

  it("leaves an unmarked area alone (a Job's) and keeps nothing of it", () => {
    const { runs, kept } = host()
    const job = join(runs, "job-uid", "job-0-1")
    mkdirSync(join(job, "work"), { recursive: true })
    kept.keepLeftovers(runs)
    expect(existsSync(job)).toBe(true)
  })

  it.runIf(detectDiskQuotas().diskQuotas === "loop")(
    "keeps an area that is a filesystem of its quota whole: its image, mounted again as the next box's area",
    async () => {
      const { runs, kept, target } = host()
      const area = join(runs, "owner", "a-1")
      await mountArea(area, 16 * 1024 * 1024)
      try {
        mkdirSync(join(area, "workspace"))
        writeFileSync(join(area, "workspace", "file"), "in the image")
        writeFileSync(join(area, "log"), "the box's last words")
        mkdirSync(join(area, "work"))
        kept.mark(area, "owner", 2)
        expect(kept.keep(area)).toBe(true)
        expect(mounted(area)).toBe(false)
        expect(existsSync(imageOf(area))).toBe(false)
        expect(readFileSync(keptLogOf(area), "utf8")).toBe("the box's last words")

        const into = target()
        expect(kept.take("owner", 2, into)).toBe(2)
        try {
          expect(mounted(into)).toBe(true)
          expect(readFileSync(join(into, "workspace", "file"), "utf8")).toBe("in the image")
          expect(existsSync(join(into, "work"))).toBe(false)
          expect(existsSync(join(into, "log"))).toBe(false)
        } finally {
          await removeArea(into)
        }
      } finally {
        await removeArea(area)
      }
    }
  )
})
