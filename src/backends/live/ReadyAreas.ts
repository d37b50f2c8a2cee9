/**
 * Run areas made ahead (docs/isolation.md, "Bounds"): where a box's area is a filesystem of its quota (DiskQuota.ts),
 * making one — a sparse copy of the template, a loop mount — takes about 30 ms, on the path of every start. A host
 * keeps `size` areas of the default quota mounted and empty, so a run of that quota takes one and starts at once. A
 * run's area, once the run is dropped, comes back emptied (`recycle`: no unmount, no new image); one taken is replaced
 * a second later where none came back meanwhile, so the making does not compete with the start that took it. What a
 * previous agent left here goes before any is made.
 */
import { randomBytes } from "node:crypto"
import { rmSync } from "node:fs"
import { readdir, rm } from "node:fs/promises"
import { join } from "node:path"
import { mountArea, removeArea, unmountUnder } from "./DiskQuota.ts"

/** How long after a take the pool is filled again, unless an area came back meanwhile. */
const refillDelayMs = 1_000

export class ReadyAreas {
  private readonly ready: Array<string> = []
  /** The areas being made: `stop` waits for them (one finished after it would stay mounted). */
  private readonly making = new Set<Promise<void>>()
  private made = 0
  private stopped = false
  private refill: ReturnType<typeof setTimeout> | undefined
  private readonly cleared: Promise<void>
  private readonly options: {
    readonly dir: string
    readonly size: number
    readonly bytes: number
    readonly say: (message: string) => void
  }

  constructor(options: ReadyAreas["options"]) {
    this.options = options
    this.cleared = unmountUnder(options.dir).then(() => rmSync(options.dir, { recursive: true, force: true }))
  }

  /** Makes areas until `size` are ready or being made. */
  fill() {
    while (!this.stopped && this.ready.length + this.making.size < this.options.size) {
      const area = join(this.options.dir, `area-${++this.made}-${randomBytes(4).toString("hex")}`)
      const making: Promise<void> = this.cleared.then(() => mountArea(area, this.options.bytes)).then(
        () => {
          this.making.delete(making)
          if (this.stopped) return removeArea(area)
          this.ready.push(area)
        },
        (error: unknown) => {
          this.making.delete(making)
          this.options.say(
            `an area could not be made ahead (${
              error instanceof Error ? error.message : String(error)
            }); runs make their own`
          )
        }
      )
      this.making.add(making)
    }
  }

  /** How many are ready to be taken now. */
  get readyCount(): number {
    return this.ready.length
  }

  /** An empty mounted area of the default quota, if one is ready; another is made in its place. */
  take(): string | undefined {
    const area = this.ready.shift()
    if (area !== undefined && this.refill === undefined) {
      this.refill = setTimeout(() => {
        this.refill = undefined
        this.fill()
      }, refillDelayMs)
      this.refill.unref()
    }
    return area
  }

  /**
   * A dropped run's area, still a mounted filesystem of the default quota: emptied and ready again while the pool is
   * short of `size`, else removed. What the run wrote is deleted through the filesystem, so the next box reads none of
   * it (ext4 reads blocks nobody wrote since as zeros).
   */
  async recycle(area: string) {
    if (this.stopped || this.ready.length + this.making.size >= this.options.size) return removeArea(area)
    try {
      for (const entry of await readdir(area)) await rm(join(area, entry), { recursive: true, force: true })
    } catch {
      return removeArea(area)
    }
    if (this.stopped || this.ready.length + this.making.size >= this.options.size) return removeArea(area)
    this.ready.push(area)
  }

  /** No more are made; the ready ones go. */
  async stop() {
    this.stopped = true
    clearTimeout(this.refill)
    await Promise.all([...this.making, ...this.ready.splice(0).map((area) => removeArea(area))])
  }
}
