/**
 * Where identifiers come from: object uids, generateName suffixes and API key secrets. Randomness is a service so that
 * tests and the simulator can replace it with a seeded source and get the same names on every run.
 */
import { Context, Layer } from "effect"
import { randomBytes, randomUUID } from "node:crypto"

/** Kubernetes' generateName alphabet: no vowels (no words) and no confusable characters. */
const suffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"

export class Ids extends Context.Service<Ids, {
  readonly uid: () => string
  /** Five characters for generateName. */
  readonly nameSuffix: () => string
  /** A secret of `bytes` random bytes, base64url-encoded. */
  readonly secret: (bytes: number) => string
}>()("nodus/apiserver/Ids") {
  static readonly layer = Layer.succeed(
    Ids,
    Ids.of({
      uid: () => randomUUID(),
      nameSuffix: () => Array.from(randomBytes(5), (byte) => suffixAlphabet[byte % suffixAlphabet.length]).join(""),
      secret: (bytes) => randomBytes(bytes).toString("base64url")
    })
  )

  /** Deterministic ids for tests: uid-1, uid-2, …; suffixes cycle through the alphabet. */
  static readonly layerSequential = Layer.sync(Ids, () => {
    let counter = 0
    const next = () => ++counter
    return Ids.of({
      uid: () => `00000000-0000-4000-8000-${String(next()).padStart(12, "0")}`,
      nameSuffix: () => {
        const n = next()
        return Array.from({ length: 5 }, (_, i) => suffixAlphabet[(n + i * 7) % suffixAlphabet.length]).join("")
      },
      secret: (bytes) => Buffer.alloc(bytes, next()).toString("base64url")
    })
  })
}
