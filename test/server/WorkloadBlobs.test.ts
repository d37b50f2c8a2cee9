// What runs leave the server to keep, in the blob store (src/server/WorkloadBlobs.ts; docs/blobs.md): checkpoints by
// number, outputs found through status.outputs, numbers that keep growing after a restart (a new instance over the same
// store), and everything of an owner gone when it is forgotten.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime, Stream } from "effect"
import { createHash } from "node:crypto"
import { Blobs } from "../../src/apiserver/Blobs.ts"
import type { ResourceObject } from "../../src/core/meta/ObjectMeta.ts"
import { makeWorkloadBlobs } from "../../src/server/WorkloadBlobs.ts"
import { BlobStore } from "../../src/store/BlobStore.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { Store } from "../../src/store/Store.ts"

const bytesOf = (text: string) => new TextEncoder().encode(text)
async function* once(bytes: Uint8Array) {
  yield bytes
}
const collect = async (iterable: AsyncIterable<Uint8Array> | undefined) => {
  assert.isDefined(iterable)
  const chunks: Array<Uint8Array> = []
  for await (const chunk of iterable!) chunks.push(chunk)
  return Buffer.concat(chunks).toString()
}

const jobWithOutput = (uid: string, output: { sha256: string; sizeBytes: number }): ResourceObject =>
  ({
    apiVersion: "nodus.dev/v1",
    kind: "Job",
    metadata: {
      name: "train",
      namespace: "p",
      uid,
      resourceVersion: "1",
      generation: 1,
      creationTimestamp: "2026-11-26T00:00:00Z"
    },
    status: {
      outputs: [{
        name: "model",
        path: "/platform/outputs/model",
        sha256: output.sha256,
        size: output.sizeBytes,
        index: 0
      }]
    }
  }) as unknown as ResourceObject

describe("workload blobs", () => {
  it("checkpoints, outputs and forgetting an owner", async () => {
    const runtime = ManagedRuntime.make(Blobs.layer.pipe(Layer.provideMerge(MemoryStore.layer)))
    const [blobs, store, blobStore] = await runtime.runPromise(
      Effect.all([Effect.service(Blobs), Effect.service(Store), Effect.service(BlobStore)])
    )
    const kept = makeWorkloadBlobs(blobs, store)

    assert.strictEqual(await kept.checkpoints.latest("owner-1"), 0)
    const first = await kept.checkpoints.store("owner-1", "p", 1, once(bytesOf("state at step 100")))
    assert.strictEqual(first.sha256, createHash("sha256").update("state at step 100").digest("hex"))
    await kept.checkpoints.store("owner-1", "p", 2, once(bytesOf("state at step 200")))
    await kept.checkpoints.store("owner-10", "p", 7, once(bytesOf("another owner, a prefix of whose uid is owner-1")))
    // A server that starts again over the same store goes on from the highest number.
    const restarted = makeWorkloadBlobs(blobs, store)
    assert.strictEqual(await restarted.checkpoints.latest("owner-1"), 2)
    assert.strictEqual(await collect(await restarted.checkpoints.open("owner-1", 1)), "state at step 100")
    assert.strictEqual(await collect(await restarted.checkpoints.open("owner-1", 2)), "state at step 200")
    assert.isUndefined(await restarted.checkpoints.open("owner-1", 3))

    const stored = await kept.outputs.store("owner-1", "p", once(bytesOf("weights")))
    const file = await runtime.runPromise(kept.outputs.output(jobWithOutput("owner-1", stored), "model", 0))
    assert.strictEqual(
      Buffer.concat([...await runtime.runPromise(Stream.runCollect(file.bytes))]).toString(),
      "weights"
    )
    const missing = await runtime.runPromiseExit(kept.outputs.output(jobWithOutput("owner-1", stored), "other", 0))
    assert.isTrue(missing._tag === "Failure")

    await runtime.runPromise(kept.forget("owner-1"))
    assert.strictEqual(await kept.checkpoints.latest("owner-1"), 0)
    assert.isUndefined(await kept.checkpoints.open("owner-1", 2))
    assert.isUndefined(await runtime.runPromise(blobStore.stat(stored.sha256)))
    assert.isUndefined(await runtime.runPromise(blobStore.stat(first.sha256)))
    // The other owner keeps its own.
    assert.strictEqual(await kept.checkpoints.latest("owner-10"), 7)
    await runtime.dispose()
  })
})
