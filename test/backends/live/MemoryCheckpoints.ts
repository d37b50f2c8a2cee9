/** Checkpoints kept in memory, as the live driver's store of them (LiveOptions.checkpoints), for tests. */
import { createHash } from "node:crypto"

export const memoryCheckpoints = () => {
  const kept = new Map<string, Buffer>()
  return {
    store: async (owner: string, _namespace: string, seq: number, bytes: AsyncIterable<Uint8Array>) => {
      const chunks: Array<Uint8Array> = []
      for await (const chunk of bytes) chunks.push(chunk)
      const all = Buffer.concat(chunks)
      kept.set(`${owner}/${seq}`, all)
      return { sha256: createHash("sha256").update(all).digest("hex"), sizeBytes: all.length }
    },
    open: async (owner: string, seq: number) => {
      const bytes = kept.get(`${owner}/${seq}`)
      return bytes === undefined ? undefined : (async function*() {
        yield bytes
      })()
    },
    latest: async (owner: string) =>
      Math.max(
        0,
        ...[...kept.keys()].filter((key) => key.startsWith(`${owner}/`)).map((key) =>
          Number(key.slice(owner.length + 1))
        )
      )
  }
}
