/** Run areas made ahead (ReadyAreas.ts), with real loop mounts where this host can make them. */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { detectDiskQuotas } from "../../../src/backends/live/DiskQuota.ts"
import { ReadyAreas } from "../../../src/backends/live/ReadyAreas.ts"
import { removeTree } from "../../support/RemoveTree.ts"

const mounted = (path: string) =>
  readFileSync("/proc/self/mountinfo", "utf8").split("\n").some((line) => line.split(" ")[4] === path)
const dirs: Array<string> = []
afterEach(async () => {
  for (const dir of dirs.splice(0)) await removeTree(dir)
})

/** Whether `what` held within 5 s (asked every 25 ms, and no more once it held: it may take an area). */
const until = async (what: () => boolean) => {
  for (let tries = 0; tries < 200; tries++) {
    if (what()) return true
    await new Promise((done) => setTimeout(done, 25))
  }
  return false
}

describe.runIf(detectDiskQuotas().diskQuotas === "loop")("areas made ahead", () => {
  it("keeps one mounted and empty, makes another when it is taken, and removes what is ready when stopped", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nodus-ready-"))
    dirs.push(dir)
    const areas = new ReadyAreas({ dir: join(dir, "ready"), size: 1, bytes: 16 * 1024 * 1024, say: () => undefined })
    expect(areas.take()).toBeUndefined()
    areas.fill()
    let first: string | undefined
    expect(await until(() => (first = areas.take()) !== undefined)).toBe(true)
    expect(mounted(first!)).toBe(true)
    let second: string | undefined
    expect(await until(() => (second = areas.take()) !== undefined)).toBe(true)
    expect(second).not.toBe(first)
    expect(await until(() => areas.readyCount === 1)).toBe(true)
    const ready = readdirSync(join(dir, "ready")).map((name) => join(dir, "ready", name)).filter((path) =>
      path !== first && path !== second && !path.endsWith(".disk")
    )
    expect(ready).toHaveLength(1)
    expect(mounted(ready[0]!)).toBe(true)
    await areas.stop()
    expect(existsSync(ready[0]!)).toBe(false)
    expect(mounted(ready[0]!)).toBe(false)
  })

  it("takes a dropped run's area back emptied, still mounted, while it is short of areas", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nodus-ready-"))
    dirs.push(dir)
    const areas = new ReadyAreas({ dir: join(dir, "ready"), size: 1, bytes: 16 * 1024 * 1024, say: () => undefined })
    areas.fill()
    let taken: string | undefined
    expect(await until(() => (taken = areas.take()) !== undefined)).toBe(true)
    mkdirSync(join(taken!, "workspace"))
    writeFileSync(join(taken!, "workspace", "secret"), "the last run's")
    await areas.recycle(taken!)
    expect(areas.take()).toBe(taken)
    expect(mounted(taken!)).toBe(true)
    expect(readdirSync(taken!)).toEqual([])
    await areas.stop()
    expect(mounted(taken!)).toBe(true) // taken again: the run that took it removes it
  })
})
