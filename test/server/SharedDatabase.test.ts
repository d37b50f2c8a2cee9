/**
 * Two servers on one PostgreSQL database behave as one API: a watch on one sees writes made through the other
 * (LISTEN/NOTIFY wakes its change feed), and resourceVersions come from one counter. Runs when DATABASE_URL is set.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Layer } from "effect"
import * as SqlStore from "../../src/store/SqlStore.ts"
import { createDatabase, databaseUrl } from "../support/Postgres.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

/** Reads newline-delimited watch events until `count` arrived or the deadline passed. */
const collectEvents = async (response: Response, count: number, deadlineMs: number) => {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  const events: Array<{ type: string; object: { metadata: { name: string; resourceVersion: string } } }> = []
  let buffered = ""
  const deadline = Date.now() + deadlineMs
  while (events.length < count && Date.now() < deadline) {
    const next = await Promise.race([
      reader.read(),
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), deadline - Date.now()))
    ])
    if (next === undefined || next.done) break
    buffered += decoder.decode(next.value, { stream: true })
    let newline: number
    while ((newline = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, newline)
      buffered = buffered.slice(newline + 1)
      if (line.trim() !== "") events.push(JSON.parse(line))
    }
  }
  await reader.cancel()
  return events
}

describe.skipIf(databaseUrl === undefined)("two servers on one PostgreSQL database", () => {
  let first: TestServer
  let second: TestServer
  let dropDatabase: () => Promise<void>

  beforeAll(async () => {
    const database = await createDatabase(databaseUrl!)
    dropDatabase = database.drop
    first = await startTestServer({ store: Layer.fresh(SqlStore.layerPostgres(database.url)) })
    second = await startTestServer({ store: Layer.fresh(SqlStore.layerPostgres(database.url)) })
  })
  afterAll(async () => {
    await first?.stop()
    await second?.stop()
    await dropDatabase?.()
  })

  it("a watch on one server sees creates, updates and deletes made through the other", async () => {
    const project = await request(first, "POST", "/api/v1/namespaces", { body: { metadata: { name: "shared" } } })
    assert.strictEqual(project.status, 201, project.text)
    const watch = await fetch(`${second.url}/apis/nodus.dev/v1/namespaces/shared/jobs?watch=true`, {
      headers: { authorization: `Bearer ${second.token}` }
    })
    assert.strictEqual(watch.status, 200)
    const events = collectEvents(watch, 3, 10_000)
    const created = await request(first, "POST", "/apis/nodus.dev/v1/namespaces/shared/jobs", {
      body: { metadata: { name: "j1" }, spec: { image: "a" } }
    })
    assert.strictEqual(created.status, 201, created.text)
    const patched = await request(first, "PATCH", "/apis/nodus.dev/v1/namespaces/shared/jobs/j1", {
      body: { spec: { backoffLimit: 2 } },
      contentType: "application/merge-patch+json"
    })
    assert.strictEqual(patched.status, 200, patched.text)
    const deleted = await request(first, "DELETE", "/apis/nodus.dev/v1/namespaces/shared/jobs/j1")
    assert.strictEqual(deleted.status, 200, deleted.text)
    const seen = await events
    assert.deepStrictEqual(seen.map((event) => `${event.type} ${event.object.metadata.name}`), [
      "ADDED j1",
      "MODIFIED j1",
      "DELETED j1"
    ])
    const versions = seen.map((event) => Number(event.object.metadata.resourceVersion))
    assert.isTrue(versions[0]! < versions[1]! && versions[1]! < versions[2]!)
  })

  it("both servers read the same objects and the same resourceVersion counter", async () => {
    const created = await request(second, "POST", "/apis/nodus.dev/v1/namespaces/shared/jobs", {
      body: { metadata: { name: "j2" }, spec: { image: "a" } }
    })
    assert.strictEqual(created.status, 201, created.text)
    const read = await request(first, "GET", "/apis/nodus.dev/v1/namespaces/shared/jobs/j2")
    assert.strictEqual(read.status, 200)
    assert.strictEqual(read.body.metadata.uid, created.body.metadata.uid)
    const again = await request(first, "POST", "/apis/nodus.dev/v1/namespaces/shared/jobs", {
      body: { metadata: { name: "j2" }, spec: { image: "a" } }
    })
    assert.strictEqual(again.status, 409)
    assert.strictEqual(again.body.reason, "AlreadyExists")
  })
})
