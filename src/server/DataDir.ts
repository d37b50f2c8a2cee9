/**
 * What of the data directory a server prepares before its modules have loaded (issue 16: start-up), so this module
 * imports none of them: the directory itself, and a new embedded database unpacked from the prebuilt snapshot
 * (store/PgliteSnapshot.ts) on a worker thread while the rest of the server loads. Bootstrap.ts holds the other files.
 */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { restoreOffThread } from "../store/PgliteSnapshot.ts"
import type { ServerConfig } from "./Config.ts"

export const pgliteDirectory = (dataDir: string): string => join(dataDir, "pglite")

export const ensureDataDir = (dataDir: string): void => {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
}

/** Readies the data directory and, for the embedded store, a new database in it (nothing for PostgreSQL). */
export const prepareStore = async (config: ServerConfig): Promise<void> => {
  ensureDataDir(config.dataDir)
  if (config.databaseUrl === undefined) await restoreOffThread(pgliteDirectory(config.dataDir))
}
