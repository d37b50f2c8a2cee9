/**
 * A host's warm boxes (docs/sandboxes.md, "Warm boxes"): Sandbox boxes started before any Sandbox wants one — bwrap
 * and the supervisor's node up, its area made — so a Sandbox whose box has the common shape (egress Deny, no secret
 * files, the default bounds of one vCPU, working under /workspace or /tmp) starts by taking one and configuring it (its
 * env, working directory and main process) instead of waiting for a box to start. Each one taken is replaced in the
 * background.
 */
import { randomBytes } from "node:crypto"
import { rmSync } from "node:fs"
import { join } from "node:path"
import * as Limits from "../../core/Limits.ts"
import { BoxChannel, type OutputBounds } from "./BoxChannel.ts"
import { mountArea, unmountUnder } from "./DiskQuota.ts"
import { type IsolationSupport, type Outcome, runIsolated, type RunningProgram } from "./Isolation.ts"
import type { RunSpec } from "./Protocol.ts"

/** The bounds a warm box is made with: a Sandbox's that names no resources (ProgramParts.boxBoundsOf). */
const warmBounds = {
  memoryBytes: Limits.boxMemoryBytesPerCpu,
  pidsMax: Limits.boxPidsPerCpu,
  diskBytes: Limits.boxDiskBytesDefault
}

export interface WarmBox {
  readonly area: string
  readonly program: RunningProgram
  readonly channel: BoxChannel
  readonly exited: Promise<Outcome>
}

/** Whether a run's box can be a warm one: everything that differs between boxes of that shape is set after start. */
export const isWarmable = (spec: RunSpec): boolean =>
  spec.box === true &&
  spec.egress === "Deny" &&
  spec.secretFiles.length === 0 &&
  (spec.memoryBytes ?? warmBounds.memoryBytes) === warmBounds.memoryBytes &&
  (spec.pidsMax ?? warmBounds.pidsMax) === warmBounds.pidsMax &&
  (spec.diskBytes ?? warmBounds.diskBytes) === warmBounds.diskBytes &&
  (spec.gpus ?? 0) === 0 &&
  (spec.workingDir === undefined ||
    ["/workspace", "/tmp"].some((dir) => spec.workingDir === dir || spec.workingDir!.startsWith(`${dir}/`)))

export class WarmBoxes {
  private readonly ready: Array<WarmBox> = []
  private starting = 0
  private made = 0
  private stopped = false
  private readonly cleared: Promise<void>
  /** Each box's start and then its exit: `ended` waits for those of boxes still starting when `stop` came too. */
  private readonly starts: Array<Promise<void>> = []
  private readonly options: {
    readonly size: number
    readonly dir: string
    readonly support: IsolationSupport
    readonly hidden: ReadonlyArray<string>
    readonly now: () => number
    readonly say: (message: string) => void
    /** The agent's: a warm box's commands count in its host's output bound. */
    readonly outputBounds: OutputBounds
  }

  constructor(options: WarmBoxes["options"]) {
    this.options = options
    // What a previous agent left here (its warm boxes' areas, a Sandbox's files among them) goes before any is made.
    this.cleared = unmountUnder(options.dir).then(() => rmSync(options.dir, { recursive: true, force: true }))
  }

  /** Starts boxes until `size` are ready or starting. */
  fill() {
    while (
      !this.stopped && this.options.support.bwrap !== undefined && this.ready.length + this.starting < this.options.size
    ) {
      this.starting++
      const started = this.startOne()
      this.starts.push(started.then((box) => box.exited).then(() => undefined, () => undefined))
      void started.then(
        (box) => {
          this.starting--
          if (this.stopped) return box.program.stop(0)
          this.ready.push(box)
          // A warm box that dies before it is taken leaves the pool (and is not replaced: something is wrong here).
          void box.exited.finally(() => {
            const at = this.ready.indexOf(box)
            if (at >= 0) this.ready.splice(at, 1)
          })
        },
        (error: unknown) => {
          this.starting--
          this.options.say(
            `a warm box did not start (${error instanceof Error ? error.message : String(error)}); Sandboxes start cold`
          )
        }
      )
    }
  }

  /** How many are ready to be taken now. */
  get readyCount(): number {
    return this.ready.length
  }

  /** A ready box for a run of the warm shape, if one is; another starts in its place. */
  take(): WarmBox | undefined {
    const box = this.ready.shift()
    if (box !== undefined) this.fill()
    return box
  }

  stop() {
    this.stopped = true
    for (const box of this.ready.splice(0)) box.program.stop(0)
  }

  /** Once every box started here has ended (after `stop`). */
  get ended(): Promise<unknown> {
    return Promise.all(this.starts)
  }

  private async startOne(): Promise<WarmBox> {
    const area = join(this.options.dir, `box-${++this.made}-${randomBytes(4).toString("hex")}`)
    await this.cleared
    if (this.options.support.diskQuotas === "loop") await mountArea(area, warmBounds.diskBytes)
    const program = runIsolated(
      {
        argv: [],
        env: {},
        workingDir: undefined,
        secretFiles: [],
        egress: "Deny",
        memoryBytes: warmBounds.memoryBytes,
        pidsMax: warmBounds.pidsMax,
        area,
        logPath: join(area, "log"),
        box: { node: process.execPath }
      },
      { support: this.options.support, hidden: this.options.hidden }
    )
    const channel = new BoxChannel(program.control!, this.options.now, this.options.outputBounds)
    const exited = program.exited
    const up = await Promise.race([channel.ready.then(() => true), exited.then(() => false, () => false)])
    if (!up) throw new Error("its supervisor ended before it was ready")
    return { area, program, channel, exited }
  }
}
