// Map batches of FunctionCalls (src/kinds/function/http/FunctionMap.ts; spec: FunctionCall, "in batches of up to
// 1,000"; docs/functions.md, "Map batches"): POST …/functions/{name}/map creates one call per input in one commit, all
// or nothing, each admitted as a single create is.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { assertStatus, createProject, v1 } from "./Support.ts"

const project = "fn-map"
const mapPath = (name: string) => `${v1}/namespaces/${project}/functions/${name}/map`
const callsPath = `${v1}/namespaces/${project}/functioncalls`

const inline = (value: unknown) => ({
  encoding: "JSON",
  inline: Buffer.from(JSON.stringify({ args: [value], kwargs: {} })).toString("base64")
})
const batch = (mapId: string, inputs: ReadonlyArray<unknown>, extra: Record<string, unknown> = {}) => ({
  apiVersion: "nodus.dev/v1",
  kind: "FunctionCallBatch",
  mapId,
  inputs,
  ...extra
})

describe("FunctionCall map batches", () => {
  let server: TestServer

  /** The calls of a map, as a user lists them: by its label. */
  const callsOfMap = async (mapId: string): Promise<ReadonlyArray<any>> => {
    const reply = await request(
      server,
      "GET",
      `${callsPath}?labelSelector=${encodeURIComponent(`nodus.dev/map=${mapId}`)}`
    )
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body.items
  }

  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, project)
    const created = await request(server, "POST", `${v1}/namespaces/${project}/functions`, {
      body: {
        apiVersion: "nodus.dev/v1",
        kind: "Function",
        metadata: { name: "embed" },
        spec: { image: "python:3.12-slim", python: "3.12", code: { module: "app", qualname: "embed" }, timeout: "60s" }
      }
    })
    assert.strictEqual(created.status, 201, created.text)
  })
  afterAll(() => server.stop())

  it("creates one call per input in one request, in input order, with mapId, mapIndex and the map label", async () => {
    const reply = await request(server, "POST", mapPath("embed"), {
      body: batch("m-one", [1, 2, 3].map(inline), { startIndex: 1000, session: "s1", timeout: "30s" })
    })
    assert.strictEqual(reply.status, 201, reply.text)
    assert.strictEqual(reply.body.kind, "FunctionCallList")
    const items: ReadonlyArray<any> = reply.body.items
    assert.deepStrictEqual(items.map((call) => call.spec.mapIndex), [1000, 1001, 1002])
    for (const [index, call] of items.entries()) {
      assert.strictEqual(call.kind, "FunctionCall")
      assert.match(call.metadata.name, new RegExp(`^embed-[a-z0-9]+-${1000 + index}$`, "u"))
      assert.strictEqual(call.metadata.labels["nodus.dev/map"], "m-one")
      assert.deepStrictEqual(call.spec.input, inline(index + 1))
      assert.strictEqual(call.spec.function, "embed")
      assert.strictEqual(call.spec.mapId, "m-one")
      assert.strictEqual(call.spec.session, "s1")
      assert.strictEqual(call.spec.timeout, "30s")
    }
    // The list's resourceVersion is its last call's (all came from one commit).
    assert.strictEqual(reply.body.metadata.resourceVersion, items.at(-1).metadata.resourceVersion)
    const stored = await callsOfMap("m-one")
    assert.sameMembers(stored.map((call) => call.metadata.name), items.map((call) => call.metadata.name))
  })

  it("a single create with a mapId is labelled too", async () => {
    const reply = await request(server, "POST", callsPath, {
      body: {
        apiVersion: "nodus.dev/v1",
        kind: "FunctionCall",
        metadata: { generateName: "embed-" },
        spec: { function: "embed", mapId: "m-single", mapIndex: 0 }
      }
    })
    assert.strictEqual(reply.status, 201, reply.text)
    assert.strictEqual(reply.body.metadata.labels["nodus.dev/map"], "m-single")
  })

  it("more than 1,000 inputs is FunctionCallBatchTooLarge at inputs, and nothing is created", async () => {
    const inputs = Array.from({ length: 1001 }, () => ({ encoding: "JSON", inline: "e30=" }))
    const reply = await request(server, "POST", mapPath("embed"), { body: batch("m-large", inputs) })
    const status = assertStatus(server, reply, 413, "FunctionCallBatchTooLarge")
    assert.strictEqual(status.details.causes[0].field, "inputs")
    assert.include(status.details.fix ?? status.message, "1000")
    assert.lengthOf(await callsOfMap("m-large"), 0)
    // Exactly 1,000 is a batch.
    const full = await request(server, "POST", mapPath("embed"), { body: batch("m-full", inputs.slice(0, 1000)) })
    assert.strictEqual(full.status, 201, full.text.slice(0, 500))
    assert.lengthOf(full.body.items, 1000)
    assert.lengthOf(await callsOfMap("m-full"), 1000)
  })

  it("a batch of a missing Function is 404 FunctionNotFound, and nothing is created", async () => {
    const reply = await request(server, "POST", mapPath("nope"), { body: batch("m-missing", [inline(1)]) })
    assertStatus(server, reply, 404, "FunctionNotFound")
    assert.lengthOf(await callsOfMap("m-missing"), 0)
  })

  it("a bad input is 422 naming inputs[i], and none of the batch is created", async () => {
    const inputs = [inline(0), inline(1), inline(2), {
      encoding: "JSON",
      inline: "e30=",
      blob: `sha256:${"ab".repeat(32)}`
    }, inline(4)]
    const reply = await request(server, "POST", mapPath("embed"), { body: batch("m-bad", inputs) })
    const status = assertStatus(server, reply, 422, "Invalid")
    assert.isTrue(status.details.causes.some((cause: any) => cause.field.startsWith("inputs[3]")), reply.text)
    assert.lengthOf(await callsOfMap("m-bad"), 0)
    // A refusal that only the call's admission finds (a blob the project lacks) is named by the input's place too.
    const unreadable = [inline(0), { encoding: "JSON", blob: `sha256:${"cd".repeat(32)}` }]
    const second = await request(server, "POST", mapPath("embed"), { body: batch("m-bad", unreadable) })
    assert.strictEqual(assertStatus(server, second, 422, "Invalid").details.causes[0].field, "inputs[1].blob")
    // So is a shared field: a timeout beyond the Function's.
    const longer = await request(server, "POST", mapPath("embed"), {
      body: batch("m-bad", [inline(0)], { timeout: "2m" })
    })
    assert.strictEqual(assertStatus(server, longer, 422, "Invalid").details.causes[0].field, "timeout")
    assert.lengthOf(await callsOfMap("m-bad"), 0)
  })

  it("a retry with the same Idempotency-Key creates nothing twice and answers the same calls", async () => {
    const body = batch("m-retry", [inline("a"), inline("b")])
    const headers = { "idempotency-key": "map-retry-1" }
    const first = await request(server, "POST", mapPath("embed"), { body, headers })
    assert.strictEqual(first.status, 201, first.text)
    const again = await request(server, "POST", mapPath("embed"), { body, headers })
    assert.strictEqual(again.status, 201, again.text)
    assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
    assert.deepStrictEqual(
      again.body.items.map((call: any) => call.metadata.name),
      first.body.items.map((call: any) => call.metadata.name)
    )
    assert.lengthOf(await callsOfMap("m-retry"), 2)
    // Another batch under the same key is the key's misuse.
    const other = await request(server, "POST", mapPath("embed"), { body: batch("m-retry", [inline("c")]), headers })
    assertStatus(server, other, 409, "IdempotencyKeyReused")
  })

  it("is authorized as a create of functioncalls; only POST is served", async () => {
    const get = await request(server, "GET", mapPath("embed"))
    assertStatus(server, get, 405, "MethodNotAllowed")
    const onCall = await request(server, "POST", `${callsPath}/x/map`, { body: batch("m-x", [inline(1)]) })
    assert.include([404, 405], onCall.status, onCall.text)
  })
})
