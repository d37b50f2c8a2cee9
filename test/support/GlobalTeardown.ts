/**
 * After the whole suite: whatever a killed agent of a test left mounted under the system's temporary directory (its
 * boxes' areas, src/backends/live/DiskQuota.ts) is unmounted, so that runs of the suite on one machine do not pile up
 * loop devices. Tests remove their own directories with support/RemoveTree.ts; this catches a test that failed first.
 */
import { readdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { unmountUnder } from "../../src/backends/live/DiskQuota.ts"

export const teardown = async (): Promise<void> => {
  for (const entry of readdirSync(tmpdir())) if (entry.startsWith("nodus")) await unmountUnder(join(tmpdir(), entry))
}
