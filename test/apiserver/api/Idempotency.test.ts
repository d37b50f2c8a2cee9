// Idempotency-Key on creates over real HTTP (spec: Create semantics 4; Errors: IdempotencyKeyReused,
// RequestInProgress): a retry with the same key and payload replays the original response, a different payload is a
// conflict, keys belong to one principal, concurrent retries create one object, and a failed create frees its key.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as MemoryStore from "../../../src/store/MemoryStore.ts"
import { Store } from "../../../src/store/Store.ts"
import { type Reply, request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { assertStatus, createProject, jobBody, jobPath, jobsPath, namesOf, v1 } from "./Support.ts"

const createWithKey = (
  server: TestServer,
  project: string,
  key: string,
  body: unknown,
  token?: string
): Promise<Reply> =>
  request(server, "POST", jobsPath(project), {
    body,
    headers: { "idempotency-key": key },
    ...(token === undefined ? {} : { token })
  })

describe("Idempotency-Key", () => {
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer()
  })
  afterAll(() => server.stop())

  it("same key and payload: the original response again, and one object", async () => {
    await createProject(server, "idem-replay")
    const body = jobBody("j", { labels: { team: "a" } })
    const first = await createWithKey(server, "idem-replay", "key-1", body)
    assert.strictEqual(first.status, 201, first.text)
    assert.isNull(first.headers.get("idempotent-replayed"))
    // Something else changes the object in between: the replay is still the original response.
    const patched = await request(server, "PATCH", jobPath("idem-replay", "j"), {
      body: { metadata: { labels: { team: "b" } } },
      contentType: "application/merge-patch+json"
    })
    assert.strictEqual(patched.status, 200, patched.text)
    for (let retry = 0; retry < 2; retry++) {
      const again = await createWithKey(server, "idem-replay", "key-1", body)
      assert.strictEqual(again.status, 201, again.text)
      assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
      assert.strictEqual(again.body.metadata.uid, first.body.metadata.uid)
      assert.strictEqual(again.body.metadata.resourceVersion, first.body.metadata.resourceVersion)
      assert.deepStrictEqual(again.body.metadata.labels, { team: "a" })
      assert.strictEqual(again.headers.get("etag"), first.headers.get("etag"))
    }
    assert.deepStrictEqual(namesOf(await request(server, "GET", jobsPath("idem-replay"))), ["j"])
  })

  it("without a key, a second identical create is AlreadyExists", async () => {
    await createProject(server, "idem-none")
    assert.strictEqual((await request(server, "POST", jobsPath("idem-none"), { body: jobBody("j") })).status, 201)
    assertStatus(
      server,
      await request(server, "POST", jobsPath("idem-none"), { body: jobBody("j") }),
      409,
      "AlreadyExists"
    )
  })

  it("same key, different payload: IdempotencyKeyReused, and nothing new is created", async () => {
    await createProject(server, "idem-reused")
    const first = await createWithKey(server, "idem-reused", "key-2", jobBody("j"))
    assert.strictEqual(first.status, 201, first.text)
    const payloads: ReadonlyArray<{ readonly what: string; readonly body: unknown }> = [
      { what: "another spec", body: jobBody("j", {}, { image: "python:3.13" }) },
      { what: "another name", body: jobBody("k") },
      { what: "another label", body: jobBody("j", { labels: { x: "y" } }) }
    ]
    for (const payload of payloads) {
      const reply = await createWithKey(server, "idem-reused", "key-2", payload.body)
      assertStatus(server, reply, 409, "IdempotencyKeyReused")
      assert.isNull(reply.headers.get("idempotent-replayed"), payload.what)
    }
    // The same payload under another project's path is another request too.
    await createProject(server, "idem-reused-other")
    assertStatus(
      server,
      await createWithKey(server, "idem-reused-other", "key-2", jobBody("j")),
      409,
      "IdempotencyKeyReused"
    )
    assert.deepStrictEqual(namesOf(await request(server, "GET", jobsPath("idem-reused"))), ["j"])
    assert.deepStrictEqual(namesOf(await request(server, "GET", jobsPath("idem-reused-other"))), [])
  })

  it("keys are per principal: a ServiceAccount's identical key string is independent", async () => {
    await createProject(server, "idem-principal")
    const account = await request(server, "POST", `${v1}/namespaces/idem-principal/serviceaccounts`, {
      body: {
        apiVersion: "nodus.dev/v1",
        kind: "ServiceAccount",
        metadata: { name: "robot" },
        spec: { scopes: ["jobs:write"] }
      }
    })
    assert.strictEqual(account.status, 201, account.text)
    const issued = await request(server, "POST", `${v1}/namespaces/idem-principal/serviceaccounts/robot/tokens`, {
      body: {}
    })
    assert.strictEqual(issued.status, 201, issued.text)
    const token = issued.body.status.token as string
    const admin = await createWithKey(server, "idem-principal", "shared-key", jobBody("by-admin"))
    assert.strictEqual(admin.status, 201, admin.text)
    const robot = await createWithKey(server, "idem-principal", "shared-key", jobBody("by-robot"), token)
    assert.strictEqual(robot.status, 201, robot.text)
    assert.isNull(robot.headers.get("idempotent-replayed"))
    assert.strictEqual(robot.body.metadata.name, "by-robot")
    // Each principal's key still replays its own response.
    const robotAgain = await createWithKey(server, "idem-principal", "shared-key", jobBody("by-robot"), token)
    assert.strictEqual(robotAgain.status, 201, robotAgain.text)
    assert.strictEqual(robotAgain.headers.get("idempotent-replayed"), "true")
    assert.strictEqual(robotAgain.body.metadata.uid, robot.body.metadata.uid)
    const adminAgain = await createWithKey(server, "idem-principal", "shared-key", jobBody("by-admin"))
    assert.strictEqual(adminAgain.headers.get("idempotent-replayed"), "true")
    assert.strictEqual(adminAgain.body.metadata.uid, admin.body.metadata.uid)
    assert.deepStrictEqual(namesOf(await request(server, "GET", jobsPath("idem-principal"))), ["by-admin", "by-robot"])
  })

  it("concurrent requests with the same key and payload create exactly one object", async () => {
    await createProject(server, "idem-concurrent")
    const body = jobBody("j", {}, { command: ["python", "train.py"] })
    const replies = await Promise.all(
      Array.from({ length: 8 }, () => createWithKey(server, "idem-concurrent", "key-3", body))
    )
    const outcomes = new Set<string>()
    const uids = new Set<string>()
    for (const reply of replies) {
      if (reply.status === 201) {
        outcomes.add("201")
        uids.add(reply.body.metadata.uid)
      } else {
        const status = assertStatus(server, reply, 409, "RequestInProgress")
        assert.isString(reply.headers.get("retry-after"), reply.text)
        assert.match(reply.headers.get("retry-after")!, /^[1-9][0-9]*$/u)
        assert.strictEqual(String(status.details?.retryAfterSeconds), reply.headers.get("retry-after"))
        outcomes.add("409 RequestInProgress")
      }
    }
    assert.isTrue(outcomes.has("201"), `outcomes ${[...outcomes].join(", ")}`)
    assert.isTrue([...outcomes].every((outcome) => outcome === "201" || outcome === "409 RequestInProgress"))
    assert.strictEqual(uids.size, 1, `every 201 is the same object: ${[...uids].join(", ")}`)
    const originals = replies.filter((reply) =>
      reply.status === 201 && reply.headers.get("idempotent-replayed") === null
    )
    assert.strictEqual(originals.length, 1, "exactly one response is the original")
    const list = await request(server, "GET", jobsPath("idem-concurrent"))
    assert.deepStrictEqual(namesOf(list), ["j"])
    assert.strictEqual(list.body.items[0].metadata.uid, [...uids][0])
    // Once the first finished, a retry replays it.
    const later = await createWithKey(server, "idem-concurrent", "key-3", body)
    assert.strictEqual(later.status, 201, later.text)
    assert.strictEqual(later.headers.get("idempotent-replayed"), "true")
    assert.strictEqual(later.body.metadata.uid, [...uids][0])
  })

  it("a failed create does not burn the key: the corrected payload then succeeds with it", async () => {
    await createProject(server, "idem-failed")
    const broken = { apiVersion: "nodus.dev/v1", kind: "Job", metadata: { name: "j" } }
    const failed = await createWithKey(server, "idem-failed", "key-4", broken)
    assertStatus(server, failed, 422, "Invalid")
    const again = await createWithKey(server, "idem-failed", "key-4", broken)
    assertStatus(server, again, 422, "Invalid")
    const corrected = await createWithKey(server, "idem-failed", "key-4", jobBody("j"))
    assert.strictEqual(corrected.status, 201, corrected.text)
    assert.isNull(corrected.headers.get("idempotent-replayed"))
    const replay = await createWithKey(server, "idem-failed", "key-4", jobBody("j"))
    assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
    assert.strictEqual(replay.body.metadata.uid, corrected.body.metadata.uid)
    // The key is now bound to the success: the broken payload is a reuse.
    assertStatus(server, await createWithKey(server, "idem-failed", "key-4", broken), 409, "IdempotencyKeyReused")
  })

  it("a create that failed because the name exists does not burn the key either", async () => {
    await createProject(server, "idem-exists")
    assert.strictEqual((await request(server, "POST", jobsPath("idem-exists"), { body: jobBody("taken") })).status, 201)
    assertStatus(server, await createWithKey(server, "idem-exists", "key-5", jobBody("taken")), 409, "AlreadyExists")
    const other = await createWithKey(server, "idem-exists", "key-5", jobBody("free"))
    assert.strictEqual(other.status, 201, other.text)
  })

  it("a dry run with a key neither records nor consumes it", async () => {
    await createProject(server, "idem-dry")
    const dry = await request(server, "POST", `${jobsPath("idem-dry")}?dryRun=All`, {
      body: jobBody("dry"),
      headers: { "idempotency-key": "key-6" }
    })
    assert.strictEqual(dry.status, 201, dry.text)
    const real = await createWithKey(server, "idem-dry", "key-6", jobBody("real"))
    assert.strictEqual(real.status, 201, real.text)
    assert.isNull(real.headers.get("idempotent-replayed"))
    assert.deepStrictEqual(namesOf(await request(server, "GET", jobsPath("idem-dry"))), ["real"])
  })
})

describe("Idempotency-Key while the first request is still committing", () => {
  let server: TestServer

  /** A gate the next commit that creates an object stops at: it says when it waits, and goes on when opened. */
  interface Gate {
    readonly reached: Promise<void>
    readonly open: () => void
  }
  let gate: { readonly arrive: () => void; readonly opened: Promise<void> } | undefined
  const closeGate = (): Gate => {
    let arrive: () => void = () => {}
    let open: () => void = () => {}
    const reached = new Promise<void>((resolve) => (arrive = resolve))
    const opened = new Promise<void>((resolve) => (open = resolve))
    gate = { arrive, opened }
    return { reached, open }
  }
  const gatedCreates = Layer.effect(
    Store,
    Effect.map(MemoryStore.make, (store) =>
      Store.of({
        ...store,
        commit: (ops) => {
          const held = gate
          if (held === undefined || !ops.some((op) => op._tag === "Create")) return store.commit(ops)
          gate = undefined
          held.arrive()
          return Effect.andThen(Effect.promise(() => held.opened), store.commit(ops))
        }
      }))
  )

  beforeAll(async () => {
    server = await startTestServer({ store: gatedCreates })
  })
  afterAll(() => server.stop())

  it("a retry during the first create is RequestInProgress with Retry-After; after it, the retry replays", async () => {
    await createProject(server, "idem-slow")
    const held = closeGate()
    const first = createWithKey(server, "idem-slow", "key-slow", jobBody("j"))
    // The claim is committed (it creates no object); the create itself now waits at the gate.
    await held.reached
    const during = await createWithKey(server, "idem-slow", "key-slow", jobBody("j"))
    assertStatus(server, during, 409, "RequestInProgress")
    assert.strictEqual(during.headers.get("retry-after"), "1")
    held.open()
    const original = await first
    assert.strictEqual(original.status, 201, original.text)
    assert.isNull(original.headers.get("idempotent-replayed"))
    const after = await createWithKey(server, "idem-slow", "key-slow", jobBody("j"))
    assert.strictEqual(after.headers.get("idempotent-replayed"), "true")
    assert.strictEqual(after.body.metadata.uid, original.body.metadata.uid)
  })
})
