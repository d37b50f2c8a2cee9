/**
 * Periodic housekeeping: expired records go (idempotency keys after 24 hours, expired API keys), blob uploads left
 * unfinished go, and so do the blobs of objects that are gone (docs/blobs.md: their release is done when the object is
 * forgotten; this catches what a failure then, or an upload landing after it, left), and the change log is compacted
 * to its retained window. Watches that ask for a resourceVersion older than the window get 410 Expired.
 */
import { Clock, Effect, Layer, Schedule } from "effect"
import { blobUploadAbandonedMs } from "../core/Limits.ts"
import { BlobStore } from "../store/BlobStore.ts"
import { Store } from "../store/Store.ts"

/** The change log keeps at least this many latest changes. */
export const changeLogRetention = 100_000

export const maintenanceInterval = "1 minute"

/** Blob holders (object uids) a pass checks for an object that is gone. */
export const blobHoldersPerPass = 500

export const layer = Layer.effectDiscard(Effect.gen(function*() {
  const store = yield* Store
  const blobs = yield* BlobStore
  // Where the scan of blob holders goes on from: a pass looks at `blobHoldersPerPass` of them.
  let holdersAfter = ""
  const collectOrphans = Effect.gen(function*() {
    const holders = yield* blobs.holders(holdersAfter, blobHoldersPerPass)
    holdersAfter = holders.length < blobHoldersPerPass ? "" : holders.at(-1)!
    for (const holder of holders) {
      if (!(yield* store.uidExists(holder))) yield* blobs.release(holder)
    }
  })
  const pass = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    yield* store.deleteExpiredRecords(now)
    yield* blobs.sweep(now - blobUploadAbandonedMs)
    yield* collectOrphans
    const resourceVersion = yield* store.resourceVersion
    if (resourceVersion > changeLogRetention) yield* store.compact(resourceVersion - changeLogRetention)
  })
  yield* Effect.forkScoped(Effect.repeat(Effect.ignore(pass), Schedule.spaced(maintenanceInterval)))
}))
