/**
 * A test's directory removed whole: the boxes of a live host keep their areas mounted (a filesystem of each one's disk
 * quota, src/backends/live/DiskQuota.ts) until their agent stops, and an agent killed with SIGKILL never does, so
 * what it left mounted under the directory is unmounted first (a plain rmSync answers EBUSY there).
 */
import { rmSync } from "node:fs"
import { unmountUnder } from "../../src/backends/live/DiskQuota.ts"

export const removeTree = async (dir: string): Promise<void> => {
  await unmountUnder(dir)
  rmSync(dir, { recursive: true, force: true })
}
