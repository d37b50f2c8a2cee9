import { Effect, Layer, ManagedRuntime } from "effect"
import * as Server from "./src/server/Server.ts"
import * as MemoryStore from "./src/store/MemoryStore.ts"
import { defaultFeedOptions } from "./src/store/ChangeFeed.ts"
import { Resources } from "./src/apiserver/Resources.ts"
import { refOfKind, namespaceRef } from "./src/core/meta/Kinds.ts"
const layer = Server.layerWith({ host: "127.0.0.1", port: 0, apiGroup: "nodus.dev", tls: undefined, adminToken: "nds_x-0123456789abcdefghijklmnopqrstuvwxyz0123", bookmarkInterval: "30 seconds", feed: defaultFeedOptions, onListening: () => {}, sim: undefined, starterCreditsMicro: 10n ** 12n }, Layer.fresh(MemoryStore.layer))
const rt = ManagedRuntime.make(layer)
const opts = { dryRun: false, fieldValidation: "Strict" as const, fieldManager: "bench" }
const job = (i: number) => ({ apiVersion: "nodus.dev/v1", kind: "Job", metadata: { name: `j-${i}` }, spec: { image: "python:3.12", command: ["python", "-c", "print(1)"] } })
const vol = (i: number) => ({ apiVersion: "nodus.dev/v1", kind: "Volume", metadata: { name: `v-${i}` }, spec: { size: "10Gi" } })
await rt.runPromise(Effect.gen(function*() {
  const r = yield* Resources
  yield* r.create(namespaceRef, undefined, { apiVersion: "v1", kind: "Namespace", metadata: { name: "b" } }, opts)
  const jobs = refOfKind("nodus.dev", "Job"), vols = refOfKind("nodus.dev", "Volume")
  let round = 0
  for (const [label, ref, body] of [["job", jobs, job], ["vol", vols, vol], ["job", jobs, job], ["vol", vols, vol]] as const) {
    round++; const n = 6000; const t0 = performance.now()
    for (let i = 0; i < n; i++) yield* r.create(ref, "b", body(i + 10000 * round), opts)
    const dt = performance.now() - t0
    console.log(label, (dt / n * 1000).toFixed(0), "µs/create")
  }
  const one = yield* r.create(jobs, "b", job(999999), opts)
  console.log("job object bytes", JSON.stringify(one.object).length, "estimate bytes", JSON.stringify((one.object.status as any).estimate).length)
}))
await rt.dispose()
