/**
 * `nodus serve --role` (docs/scale-out.md, "Roles"): on one PostgreSQL database, a server of role api and one of role
 * controllers. A Job created through the api server is run by the controllers server (the api server owns nothing and
 * joins no cluster); the controllers server answers health checks and /version, and refuses API requests with a Status
 * saying where to send them. Runs when DATABASE_URL is set; bounded, loopback only.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChildProcess } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { eventually } from "../support/Eventually.ts"
import { createDatabase, databaseUrl } from "../support/Postgres.ts"
import { removeTree } from "../support/RemoveTree.ts"
import { callAs, spawnClusterServer } from "../support/ServerProcess.ts"

const token = "nds_roles-test-token-0123456789abcdefghijklmnopqrstu"
const call = callAs(token)
const group = "nodus.dev"

describe.skipIf(databaseUrl === undefined)("servers of role api and controllers on one database", () => {
  let database: { readonly url: string; readonly drop: () => Promise<void> }
  const dataDir = mkdtempSync(join(tmpdir(), "nodus-roles-"))
  const children: Array<ChildProcess> = []

  const serve = async (role: string) => {
    const server = await spawnClusterServer({
      databaseUrl: database.url,
      dataDir,
      speed: 60,
      token,
      args: ["--role", role]
    })
    children.push(server.child)
    return server
  }

  beforeAll(async () => {
    database = await createDatabase(databaseUrl!)
  })
  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL")
    await database?.drop()
    await removeTree(dataDir)
  })

  it("the api server stores the Job, the controllers server runs it and serves no API", async () => {
    const api = await serve("api")
    const controllers = await serve("controllers")
    assert.match(api.printed(), /role: api/u)

    const project = await call(api.url, "POST", "/api/v1/namespaces", {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "roles" }
    })
    assert.strictEqual(project.status, 201, project.text)
    const job = {
      apiVersion: `${group}/v1`,
      kind: "Job",
      metadata: { name: "through-api", annotations: { "sim.nodus.dev/duration": "1m" } },
      spec: { image: "python:3.12" }
    }
    const created = await call(api.url, "POST", `/apis/${group}/v1/namespaces/roles/jobs`, job)
    assert.strictEqual(created.status, 201, created.text)
    await eventually(
      "the Job Succeeded",
      async () =>
        (await call(api.url, "GET", `/apis/${group}/v1/namespaces/roles/jobs/through-api`)).body?.status?.phase ===
          "Succeeded",
      { timeoutMs: 90_000 }
    )

    // The controllers server took every shard; the api server never joined the cluster.
    await controllers.first(/cluster: runner \S+ took \d+ shards, gave up \d+; holds (\d+) of \d+/u, 1_000)
    assert.notMatch(api.printed(), /cluster: runner/u)

    const refused = await call(controllers.url, "GET", `/apis/${group}/v1/namespaces/roles/jobs`)
    assert.strictEqual(refused.status, 503)
    assert.strictEqual(refused.body.reason, "Unavailable")
    assert.match(refused.body.message, /--role controllers/u)
    assert.match(refused.body.fix, /--role api or --role all/u)
    assert.strictEqual((await fetch(`${controllers.url}/healthz`)).status, 200)
    assert.strictEqual((await fetch(`${controllers.url}/version`)).status, 200)
  }, 150_000)
})
