// SecretValueInEnv is not an oracle (docs/secrets.md): the refusal compares literal env values with secret values, so
// it names the entry, Secret and key only to a caller who may read Secrets; one who may not learns a single bit about
// the whole write, never which entry matched; and every caller's distinct literal values are bounded per hour, so a
// thousand guesses cost a thousand of the budget, not one request.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { guessesPerWindow } from "../../../src/runtime/GuessBudget.ts"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { assertStatus, causeFields, createProject, jobsPath, v1 } from "./Support.ts"

const project = "sec-oracle"
const secret = "pa55-guessable"

/** A dry-run Job whose env holds `values` literally, the secret's own value at `at` (if any). */
const probe = (values: ReadonlyArray<string>) => ({
  metadata: { name: "probe" },
  spec: { image: "python:3.12", env: values.map((value, index) => ({ name: `GUESS_${index}`, value })) }
})

const guesses = (count: number, prefix: string, at?: number): ReadonlyArray<string> =>
  Array.from({ length: count }, (_, index) => (index === at ? secret : `${prefix}-${index}`))

describe("SecretValueInEnv as a caller may be told", () => {
  let server: TestServer
  const tokens = new Map<string, string>()

  const account = async (name: string, scopes: ReadonlyArray<string>) => {
    const created = await request(server, "POST", `${v1}/namespaces/${project}/serviceaccounts`, {
      body: { metadata: { name }, spec: { scopes } }
    })
    assert.strictEqual(created.status, 201, created.text)
    const issued = await request(server, "POST", `${v1}/namespaces/${project}/serviceaccounts/${name}/tokens`, {
      body: {}
    })
    assert.strictEqual(issued.status, 201, issued.text)
    tokens.set(name, issued.body.status.token)
  }

  const dryRun = (who: string, values: ReadonlyArray<string>) =>
    request(server, "POST", `${jobsPath(project)}?dryRun=All`, { body: probe(values), token: tokens.get(who)! })

  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, project)
    const created = await request(server, "POST", `${v1}/namespaces/${project}/secrets`, {
      body: { metadata: { name: "db" }, spec: { data: { password: secret } } }
    })
    assert.strictEqual(created.status, 201, created.text)
    await account("blind", ["jobs:write"])
    await account("blind-2", ["jobs:write"])
    await account("reader", ["jobs:write", "secrets:read"])
  })
  afterAll(() => server.stop())

  it("tells a caller without secrets:read one bit for the whole write: not the entry, the Secret or the key", async () => {
    const early = await dryRun("blind", guesses(200, "a", 3))
    const late = await dryRun("blind", guesses(200, "a", 150))
    for (const reply of [early, late]) {
      const status = assertStatus(server, reply, 422, "SecretValueInEnv")
      assert.deepStrictEqual(causeFields(status), ["spec"])
      for (const hint of [secret, "GUESS_", "\"db\"", "password"]) assert.notInclude(reply.text, hint)
      assert.notMatch(reply.text, /env\[\d/u)
    }
    // Wherever the match is, the answer is the same (but for the request's id).
    const { requestId: _early, ...earlyStatus } = early.body
    const { requestId: _late, ...lateStatus } = late.body
    assert.deepStrictEqual(earlyStatus, lateStatus)
    assert.strictEqual((await dryRun("blind", guesses(200, "a"))).status, 201)
  })

  it("names the entry, Secret and key to a caller who may read Secrets", async () => {
    const reply = await dryRun("reader", guesses(10, "r", 7))
    const status = assertStatus(server, reply, 422, "SecretValueInEnv")
    assert.deepStrictEqual(causeFields(status), ["spec.env[7].value"])
    assert.include(status.details.causes[0].message, `Secret "db" key "password"`)
    assert.notInclude(reply.text, secret)
  })

  it("bounds each caller's distinct guesses per hour; values it sent before are free", async () => {
    const first = guesses(guessesPerWindow, "b")
    assert.strictEqual((await dryRun("blind-2", first)).status, 201)
    // The same values again cost nothing.
    assert.strictEqual((await dryRun("blind-2", first.slice(0, 500))).status, 201)
    // One new value is past the budget: refused before anything is compared, so it says nothing of secrets.
    for (const next of [["b-new"], [secret]]) {
      const refused = await dryRun("blind-2", next)
      const status = assertStatus(server, refused, 429, "TooManyRequests")
      assert.isAbove(status.details.retryAfterSeconds, 3_000)
      assert.notInclude(refused.text, secret)
    }
    // Other callers have budgets of their own; the admin's writes are not guesses.
    assert.strictEqual((await dryRun("reader", ["b-new"])).status, 201)
    assert.strictEqual(
      (await request(server, "POST", `${jobsPath(project)}?dryRun=All`, {
        body: probe(guesses(guessesPerWindow + 1, "admin"))
      })).status,
      201
    )
  })
})
