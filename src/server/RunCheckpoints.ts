/**
 * Checkpoints of runs on live hosts (docs/live.md, "Checkpoints"): `<dir>/<owner uid>/<seq>.tar.zst`, uploaded by the
 * agent that saved them, read by whichever host restores them; they go with their owner.
 */
import { createReadStream, existsSync, readdirSync, rmSync } from "node:fs"
import { join } from "node:path"
import { storeUpload } from "./JobOutputs.ts"

export const makeCheckpointFiles = (dir: string) => ({
  store: (owner: string, seq: number, bytes: AsyncIterable<Uint8Array>) =>
    storeUpload(join(dir, owner, `${seq}.tar.zst`), bytes, Number.MAX_SAFE_INTEGER, `checkpoint ${seq}`),
  open: (owner: string, seq: number): AsyncIterable<Uint8Array> | undefined => {
    const file = join(dir, owner, `${seq}.tar.zst`)
    return existsSync(file) ? createReadStream(file) : undefined
  },
  latest: (owner: string) => {
    const kept = existsSync(join(dir, owner)) ? readdirSync(join(dir, owner)).map((file) => Number.parseInt(file, 10)).filter(Number.isFinite) : []
    return Math.max(0, ...kept)
  },
  forget: (owner: string) => rmSync(join(dir, owner), { recursive: true, force: true })
})
