/**
 * The TypeScript client (src/client) against a server with the local backend (docs/live.md, docs/sandboxes.md): a
 * Sandbox's commands and files round-trip through `client.sandbox(...)`, a Sandbox not yet Running is retried as the
 * server asks (SandboxStarting), and a Job's log reads back through `client.job(...).logs()`. Needs bubblewrap, as
 * every local-backend test does.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { NodusClient, NotFoundError } from "../../src/client/index.ts"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"
import { failure } from "./Support.ts"

const project = "ts-live"
let server: TestServer
let client: NodusClient

const phaseOf = async (plural: string, name: string) =>
  (await request(server, "GET", `/apis/nodus.dev/v1/namespaces/${project}/${plural}/${name}`)).body?.status?.phase as
    | string
    | undefined

beforeAll(async () => {
  server = await startTestServer({ local: true })
  client = new NodusClient({ baseUrl: server.url, token: server.token, env: {} })
  assert.strictEqual(
    (await request(server, "POST", "/api/v1/namespaces", { body: { metadata: { name: project } } })).status,
    201
  )
})
afterAll(async () => {
  client?.close()
  await server?.stop()
})

describe("a Sandbox through the TypeScript client", () => {
  beforeAll(async () => {
    const made = await client.create("sandboxes", project, {
      kind: "Sandbox",
      metadata: { name: "box" },
      spec: { image: "debian:12" }
    })
    assert.strictEqual(made["metadata"].name, "box")
    await eventually("box is Running", async () => (await phaseOf("sandboxes", "box")) === "Running", {
      timeoutMs: 30_000
    })
  })

  it("exec: argv, stdin, env and working directory; exit code, stdout and stderr", async () => {
    const result = await client.sandbox(project, "box").exec(
      ["sh", "-c", "read line; echo got $line in $(pwd) as $WHO; echo warn >&2; exit 3"],
      { stdin: "hello\n", env: { WHO: "ts" }, workingDir: "/tmp", timeout: 30 }
    )
    assert.deepInclude(result, { exitCode: 3, stdout: "got hello in /tmp as ts\n", stderr: "warn\n", timedOut: false })
    assert.match(result.id ?? "", /^cmd-/u)
  })

  it("a command past its timeout is killed and says so", async () => {
    const result = await client.sandbox(project, "box").exec(["sleep", "30"], { timeout: 0.5 })
    assert.deepStrictEqual([result.timedOut, result.signal], [true, "SIGKILL"])
  })

  it("writeFile and readFile round-trip bytes; a command sees the file; a missing one is NotFoundError", async () => {
    const box = client.sandbox(project, "box")
    const data = new Uint8Array(1024).map((_, index) => index % 256)
    await box.writeFile("/workspace/sub/data.bin", data)
    assert.strictEqual((await box.exec(["sh", "-c", "wc -c < /workspace/sub/data.bin"])).stdout.trim(), "1024")
    assert.deepStrictEqual(Buffer.from(await box.readFile("/workspace/sub/data.bin")), Buffer.from(data))
    await box.writeFile("notes.txt", "written as text")
    assert.strictEqual(Buffer.from(await box.readFile("/workspace/notes.txt")).toString("utf8"), "written as text")
    await box.deleteFile("/workspace/notes.txt")
    const missing = await failure(box.readFile("/workspace/notes.txt"))
    assert.instanceOf(missing, NotFoundError)
    assert.deepStrictEqual([missing.statusCode, missing.code], [404, "NotFound"])
  })

  it("a Sandbox that is not Running yet: SandboxStarting is retried, then raised as the class the registry gives it", async () => {
    const once = new NodusClient({ baseUrl: server.url, token: server.token, env: {}, maxRetries: 1 })
    await once.create("sandboxes", project, {
      kind: "Sandbox",
      metadata: { name: "waiting" },
      spec: { image: "debian:12", resources: { cpu: "512" } }
    })
    const error = await failure(once.sandbox(project, "waiting").exec(["true"]))
    once.close()
    assert.deepStrictEqual([error._tag, error.statusCode, error.code, error.retryAfter], [
      "APIError",
      409,
      "SandboxStarting",
      1
    ])
  })
})

describe("a Job's log through the TypeScript client", () => {
  it("reads the log of index 0 once the Job ran", async () => {
    await client.create("jobs", project, {
      kind: "Job",
      metadata: { name: "hello" },
      spec: {
        image: "debian:12",
        command: ["sh", "-c", "echo hello from the ts client; echo on stderr >&2"],
        backoffLimit: 0
      }
    })
    await eventually(
      "hello ended",
      async () => ["Succeeded", "Failed"].includes((await phaseOf("jobs", "hello")) ?? ""),
      { timeoutMs: 20_000 }
    )
    assert.strictEqual(await phaseOf("jobs", "hello"), "Succeeded")
    const job = client.job(project, "hello")
    const whole = await job.logs()
    assert.include(whole, "hello from the ts client")
    assert.include(whole, "on stderr")
    assert.strictEqual(await job.logs({ index: 0, tailLines: 1 }), "on stderr\n")
  })
})
