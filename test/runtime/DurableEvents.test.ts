/**
 * Durable events (the outbox): a Job's Kubernetes Events and its spec-typed events (what webhooks will get) are
 * written in the same commit as the status change that caused them. The store is killed in the middle of the write
 * that finishes a Job: neither the Succeeded status nor job.succeeded nor the Completed Event is stored; once the
 * store answers again, the runtime's retry stores all three, each once.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { Store, StoreError } from "../../src/store/Store.ts"
import { createJob, createProject, jobPath, v1 } from "../apiserver/api/Support.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

/** A memory store whose commits fail while `killed` holds for them: what a crash in the middle of a write leaves. */
const breakableStore = (killed: (ops: Parameters<Store["Service"]["commit"]>[0]) => boolean) =>
  Layer.effect(
    Store,
    Effect.map(MemoryStore.make, (inner): Store["Service"] => ({
      ...inner,
      commit: (ops) => (killed(ops)
        ? Effect.fail(new StoreError({ message: "killed in the middle of the write" }))
        : inner.commit(ops))
    }))
  )

describe("durable events", () => {
  let server: TestServer
  let killing = false
  let killedWrites = 0

  beforeAll(async () => {
    // Killed: any write that records job.succeeded (its status, its Event and its outbox record are one commit).
    const store = breakableStore((ops) => {
      const finishing = killing &&
        ops.some((op) => op._tag === "PutRecord" && JSON.stringify(op.value).includes("\"job.succeeded\""))
      if (finishing) killedWrites++
      return finishing
    })
    server = await startTestServer({ sim: { speed: 1 }, store })
    await createProject(server, "durable")
  })
  afterAll(() => server.stop())

  const advance = async (by: string) => {
    const reply = await request(server, "POST", `${v1}/simulation/clock`, { body: { advance: by } })
    assert.strictEqual(reply.status, 200, reply.text)
  }
  const events = async (job: string) =>
    (await request(server, "GET", `/api/v1/namespaces/durable/events`)).body.items.filter((event: any) =>
      event.involvedObject.name === job
    ).map((event: any) => event.reason)
  const outbox = async (uid: string) =>
    (await server.streamed()).filter((entry) => entry.data.object.metadata.uid === uid).map((entry) => entry.type)

  it("no event without its change, and no change without its event", async () => {
    const job = await createJob(server, "durable", "killed", { annotations: { "sim.nodus.dev/duration": "10m" } })
    await advance("5m")
    assert.strictEqual((await request(server, "GET", jobPath("durable", "killed"))).body.status.phase, "Running")
    killing = true
    await advance("20m")
    assert.isAbove(killedWrites, 0, "the write that finishes the Job was attempted and killed")
    // Nothing of the killed write is stored: not the status, not the Event, not the outbox record.
    assert.strictEqual((await request(server, "GET", jobPath("durable", "killed"))).body.status.phase, "Running")
    assert.notInclude(await events("killed"), "Completed")
    assert.notInclude(await outbox(job.metadata.uid), "job.succeeded")
    // The store answers again: the runtime's retry (after its backoff) stores the change and its events together, once.
    killing = false
    await advance("10m")
    assert.strictEqual((await request(server, "GET", jobPath("durable", "killed"))).body.status.phase, "Succeeded")
    assert.deepStrictEqual((await events("killed")).filter((reason: string) => reason === "Completed"), ["Completed"])
    assert.deepStrictEqual((await outbox(job.metadata.uid)).filter((type) => type === "job.succeeded"), [
      "job.succeeded"
    ])
  })
})
