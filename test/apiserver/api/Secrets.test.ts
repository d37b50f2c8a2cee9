// Secret values over real HTTP (spec: Conventions 6; Secret; SecretValueInEnv; SecretMount): data is write-only —
// no read, list, watch event or error ever carries a value; writes make versions; a workload's secret mounts pin
// versions at admission; a literal env value equal to a secret value is refused without echoing it.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { assertStatus, createProject, jobsPath, openWatch, v1 } from "./Support.ts"

const secretsPath = (project: string) => `${v1}/namespaces/${project}/secrets`
const value = "s3cr3t-value-4f9a1c"
const rotated = "rotated-value-77b2e0"

describe("secrets", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer()
  })
  afterAll(() => server.stop())

  it("keeps values out of every read: create response, get, list, watch", async () => {
    await createProject(server, "sec-read")
    const watch = await openWatch(server, `${secretsPath("sec-read")}?watch=true`)
    try {
      const created = await request(server, "POST", secretsPath("sec-read"), {
        body: { metadata: { name: "hf" }, spec: { data: { token: value } } }
      })
      assert.strictEqual(created.status, 201, created.text)
      assert.notInclude(created.text, value)
      assert.strictEqual(created.body.status.latestVersion, 1)
      assert.deepStrictEqual(
        created.body.status.versions.map((
          entry: { version: number; keys: Array<string> }
        ) => [entry.version, entry.keys]),
        [[1, ["token"]]]
      )
      const read = await request(server, "GET", `${secretsPath("sec-read")}/hf`)
      assert.strictEqual(read.status, 200)
      assert.notInclude(read.text, value)
      const listed = await request(server, "GET", secretsPath("sec-read"))
      assert.strictEqual(listed.body.items.length, 1)
      assert.notInclude(listed.text, value)
      const [event] = await watch.next(1)
      assert.strictEqual(event!.type, "ADDED")
      assert.notInclude(JSON.stringify(event), value)
    } finally {
      await watch.close()
    }
  })

  it("never echoes a value in an error, even one sent in the wrong shape", async () => {
    await createProject(server, "sec-errors")
    const malformed: ReadonlyArray<unknown> = [value, { token: [value] }, { token: { nested: value } }]
    for (const data of malformed) {
      const reply = await request(server, "POST", secretsPath("sec-errors"), {
        body: { metadata: { name: "bad" }, spec: { data } }
      })
      assertStatus(server, reply, 422, "Invalid")
      assert.notInclude(reply.text, value, JSON.stringify(data))
    }
  })

  it("new values make a new version; the same values again do not", async () => {
    await createProject(server, "sec-versions")
    const path = `${secretsPath("sec-versions")}/db`
    assert.strictEqual(
      (await request(server, "POST", secretsPath("sec-versions"), {
        body: { metadata: { name: "db" }, spec: { data: { password: value } } }
      })).status,
      201
    )
    const again = await request(server, "PATCH", path, {
      body: { spec: { data: { password: value } } },
      contentType: "application/merge-patch+json"
    })
    assert.strictEqual(again.status, 200, again.text)
    assert.strictEqual(again.body.status.latestVersion, 1)
    const rotatedReply = await request(server, "PATCH", path, {
      body: { spec: { data: { password: rotated, user: "app" } } },
      contentType: "application/merge-patch+json"
    })
    assert.strictEqual(rotatedReply.status, 200, rotatedReply.text)
    assert.notInclude(rotatedReply.text, rotated)
    assert.strictEqual(rotatedReply.body.status.latestVersion, 2)
    assert.deepStrictEqual(rotatedReply.body.status.versions.map((entry: { keys: Array<string> }) => entry.keys), [[
      "password"
    ], ["password", "user"]])
    assert.strictEqual(rotatedReply.body.metadata.generation, again.body.metadata.generation + 1)
  })

  it("refuses a literal env value equal to a current secret value (SecretValueInEnv), without echoing it", async () => {
    await createProject(server, "sec-env")
    await request(server, "POST", secretsPath("sec-env"), {
      body: { metadata: { name: "api" }, spec: { data: { key: value } } }
    })
    const job = {
      metadata: { name: "leaky" },
      spec: { image: "python:3.12", env: [{ name: "SAFE", value: "1" }, { name: "API_KEY", value }] }
    }
    const refused = await request(server, "POST", jobsPath("sec-env"), { body: job })
    const status = assertStatus(server, refused, 422, "SecretValueInEnv")
    assert.deepStrictEqual(status.details.causes.map((cause: { field: string }) => cause.field), ["spec.env[1].value"])
    assert.notInclude(refused.text, value)
    const referenced = await request(server, "POST", jobsPath("sec-env"), {
      body: {
        metadata: { name: "proper" },
        spec: {
          image: "python:3.12",
          env: [{ name: "API_KEY", valueFrom: { secretKeyRef: { name: "api", key: "key" } } }]
        }
      }
    })
    assert.strictEqual(referenced.status, 201, referenced.text)
  })

  it("pins the latest version of each mounted Secret at admission; a missing Secret is Invalid", async () => {
    await createProject(server, "sec-pin")
    await request(server, "POST", secretsPath("sec-pin"), {
      body: { metadata: { name: "a" }, spec: { data: { k: "one" } } }
    })
    await request(server, "PATCH", `${secretsPath("sec-pin")}/a`, {
      body: { spec: { data: { k: "two" } } },
      contentType: "application/merge-patch+json"
    })
    await request(server, "POST", secretsPath("sec-pin"), {
      body: { metadata: { name: "b" }, spec: { data: { k: "x" } } }
    })
    const created = await request(server, "POST", jobsPath("sec-pin"), {
      body: { metadata: { name: "j" }, spec: { image: "python:3.12", secrets: ["a", { name: "b", version: 1 }] } }
    })
    assert.strictEqual(created.status, 201, created.text)
    assert.deepStrictEqual(created.body.status.secretVersions, { a: 2, b: 1 })
    assert.deepStrictEqual(created.body.spec.secrets, [{ name: "a" }, { name: "b", version: 1 }])
    const missing = await request(server, "POST", jobsPath("sec-pin"), {
      body: { metadata: { name: "k" }, spec: { image: "python:3.12", secrets: ["nope"] } }
    })
    const status = assertStatus(server, missing, 422, "Invalid")
    assert.deepStrictEqual(status.details.causes.map((cause: { field: string }) => cause.field), [
      "spec.secrets[0].name"
    ])
    const badVersion = await request(server, "POST", jobsPath("sec-pin"), {
      body: { metadata: { name: "l" }, spec: { image: "python:3.12", secrets: [{ name: "b", version: 7 }] } }
    })
    assert.deepStrictEqual(
      assertStatus(server, badVersion, 422, "Invalid").details.causes.map((cause: { field: string }) => cause.field),
      ["spec.secrets[0].version"]
    )
  })
})
