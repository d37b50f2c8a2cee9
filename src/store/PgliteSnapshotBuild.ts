/**
 * Builds the prebuilt PGlite data directory of PgliteSnapshot.ts: `npm run pglite:snapshot` runs this file after a
 * PGlite upgrade (or a migration, for speed). Apart from PgliteSnapshot.ts because it needs the driver and the store's
 * migrations, which import the snapshot's reader: a server that restores a snapshot loads neither.
 */
import { PGlite } from "@electric-sql/pglite"
import { Effect } from "effect"
import { statSync, writeFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { constants, zstdCompressSync } from "node:zlib"
import * as Pglite from "./Pglite.ts"
import { pack, snapshotFile } from "./PgliteSnapshot.ts"
import * as SqlStore from "./SqlStore.ts"

/**
 * Runs the installed PGlite's initdb into a scratch directory, then the store's migrations on it through the driver,
 * shuts it down cleanly, and packs what it wrote.
 */
export const build = async (): Promise<Buffer> => {
  const scratch = await mkdtemp(join(tmpdir(), "nodus-pglite-snapshot-"))
  try {
    const dataDir = join(scratch, "data")
    const database = await PGlite.create({ dataDir })
    await database.close()
    await Effect.runPromise(SqlStore.migrate.pipe(Effect.provide(Pglite.layer(dataDir))))
    // A 64 MB window with long-distance matching finds the three databases' likeness (40 MB of files in 1.1 MB).
    return zstdCompressSync(pack(dataDir), {
      params: {
        [constants.ZSTD_c_compressionLevel]: 19,
        [constants.ZSTD_c_enableLongDistanceMatching]: 1,
        [constants.ZSTD_c_windowLog]: 26
      }
    })
  } finally {
    await rm(scratch, { recursive: true, force: true })
  }
}

// `npm run pglite:snapshot`: (re)builds the snapshot of the installed PGlite.
if (import.meta.main) {
  const file = snapshotFile()
  writeFileSync(file, await build())
  console.log(`wrote ${file} (${(statSync(file).size / 1e6).toFixed(2)} MB)`)
}
