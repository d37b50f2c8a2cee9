/**
 * The local backend's own Node's name when several servers share one database (docs/scale-out.md, "Local hosts"):
 * each server's host is a Node of its own. Kept apart from LiveBackend.ts, which the server loads only when it runs.
 */
import { createHash } from "node:crypto"
import { resolve } from "node:path"

/**
 * `local-<host name>-<8 hex digits of the data directory's path>`: stable across restarts on the same data directory,
 * distinct for two servers on one machine (their data directories differ) or on two. A DNS label, as Node names are.
 */
export const sharedLocalNode = (host: string, dataDir: string): string => {
  const digest = createHash("sha256").update(resolve(dataDir)).digest("hex").slice(0, 8)
  const label = host.toLowerCase().replace(/[^a-z0-9-]+/gu, "-").replace(/^-+|-+$/gu, "").slice(0, 48).replace(
    /-+$/u,
    ""
  )
  return label === "" ? `local-${digest}` : `local-${label}-${digest}`
}
