/**
 * After the whole suite: whatever a killed agent of a test left mounted under the system's temporary directory (its
 * boxes' areas, src/backends/live/DiskQuota.ts) is unmounted, so that runs of the suite on one machine do not pile up
 * loop devices. Tests remove their own directories with support/RemoveTree.ts; this catches a test that failed first.
 *
 * Before it, under CI: the suite refuses to start without DATABASE_URL. The scale-out and PostgreSQL store tests skip
 * without a server, and a green run that ran none of them would say nothing about them (.ci/run provides one).
 */
import { readdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { unmountUnder } from "../../src/backends/live/DiskQuota.ts"

export const setup = (): void => {
  if (process.env["CI"] !== undefined && process.env["CI"] !== "" && process.env["CI"] !== "false") {
    if (process.env["DATABASE_URL"] === undefined || process.env["DATABASE_URL"] === "") {
      throw new Error(
        "CI is set but DATABASE_URL is not: the PostgreSQL and scale-out tests would be skipped. Run .ci/run, which starts PostgreSQL, or set DATABASE_URL."
      )
    }
  }
}

export const teardown = async (): Promise<void> => {
  for (const entry of readdirSync(tmpdir())) if (entry.startsWith("nodus")) await unmountUnder(join(tmpdir(), entry))
}
