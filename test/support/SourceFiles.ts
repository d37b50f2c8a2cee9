// The source files the structural tests read (test/Architecture.test.ts, test/http/NamesNoKind.test.ts).
import { readdirSync } from "node:fs"
import { join } from "node:path"

/** Every .ts file under a directory. */
export const filesUnder = (directory: string): Array<string> =>
  readdirSync(directory, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? filesUnder(join(directory, entry.name))
      : entry.name.endsWith(".ts")
      ? [join(directory, entry.name)]
      : []
  )
