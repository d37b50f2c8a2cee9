/**
 * A live host for tests: the live driver (LiveCapacity) and one in-process node agent running real bubblewrap boxes,
 * its runs under `dir`. Its secret resolution answers `env` for every program; checkpoints are kept in memory.
 */
import { Effect } from "effect"
import { join } from "node:path"
import { Agent } from "../../../src/backends/live/Agent.ts"
import type { HostGpu } from "../../../src/backends/live/HostFacts.ts"
import { detectIsolation } from "../../../src/backends/live/Isolation.ts"
import { LiveCapacity } from "../../../src/backends/live/LiveCapacity.ts"
import { inProcessLink } from "../../../src/server/LiveBackend.ts"
import { memoryCheckpoints } from "./MemoryCheckpoints.ts"

const GiB = 1024 ** 3

export const makeLiveHost = async (options: {
  readonly dir: string
  readonly node: string
  readonly cpus: number
  readonly now: () => number
  readonly env?: Readonly<Record<string, string>>
  readonly hidden?: ReadonlyArray<string>
  readonly warmBoxes?: number
  /** The host's GPUs, as HostFacts.detectGpus finds them (a test's device nodes may be plain files). */
  readonly gpus?: ReadonlyArray<HostGpu>
  readonly appendLog?: (owner: string, attempt: string, text: string) => void
  /** Poll disk quotas, as a host that cannot mount a filesystem per box does (DiskQuota.ts). */
  readonly polledQuotas?: boolean
}) => {
  const capacity = await Effect.runPromise(LiveCapacity.make({
    now: options.now,
    resolve: () => Effect.succeed({ env: options.env ?? {}, secretFiles: [], secretValues: [], inputs: new Map() }),
    appendLog: options.appendLog ?? (() => undefined),
    storeOutput: async () => ({ sha256: "0".repeat(64), sizeBytes: 0 }),
    checkpoints: memoryCheckpoints()
  }))
  const detected = detectIsolation()
  const isolation = options.polledQuotas === true ? { ...detected, diskQuotas: "polled" as const } : detected
  const agent = new Agent({
    link: inProcessLink(capacity, { pool: "test", namespace: undefined }),
    hello: {
      node: options.node,
      hostname: options.node,
      agentVersion: "test",
      capacity: {
        cpus: options.cpus,
        memoryBytes: 8 * GiB,
        diskBytes: 100 * GiB,
        gpus: (options.gpus ?? []).map(({ model, memoryMiB }) => ({ model, memoryMiB }))
      },
      isolation: {
        bubblewrap: isolation.bwrap !== undefined,
        memoryLimits: isolation.memoryLimits !== "none",
        problems: isolation.problems
      }
    },
    dataDir: join(options.dir, "agent"),
    runsDir: join(options.dir, "runs"),
    support: isolation,
    hidden: options.hidden ?? [],
    now: options.now,
    warmBoxes: options.warmBoxes,
    gpus: (options.gpus ?? []).map((gpu) => gpu.device)
  })
  return { capacity, agent }
}
