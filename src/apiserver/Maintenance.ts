/**
 * Periodic housekeeping: expired records go (idempotency keys after 24 hours, expired API keys), blob uploads left
 * unfinished go (docs/blobs.md), and the change log is compacted to its retained window. Watches that ask for a resourceVersion older than the window get 410 Expired.
 */
import { Clock, Effect, Layer, Schedule } from "effect"
import { blobUploadAbandonedMs } from "../core/Limits.ts"
import { BlobStore } from "../store/BlobStore.ts"
import { Store } from "../store/Store.ts"

/** The change log keeps at least this many latest changes. */
export const changeLogRetention = 100_000

export const maintenanceInterval = "1 minute"

export const layer = Layer.effectDiscard(Effect.gen(function*() {
  const store = yield* Store
  const blobs = yield* BlobStore
  const pass = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    yield* store.deleteExpiredRecords(now)
    yield* blobs.sweep(now - blobUploadAbandonedMs)
    const resourceVersion = yield* store.resourceVersion
    if (resourceVersion > changeLogRetention) yield* store.compact(resourceVersion - changeLogRetention)
  })
  yield* Effect.forkScoped(Effect.repeat(Effect.ignore(pass), Schedule.spaced(maintenanceInterval)))
}))
