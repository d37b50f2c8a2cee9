/**
 * Functions on the local backend (docs/functions.md): a Function's code archive uploaded as a blob, its warm Python
 * worker in a bubblewrap box on this host, and calls made through both client libraries — `.remote()`, `.spawn()` and
 * `.get()`, `.map()` in order, a raised exception as RemoteError with its type — and through the API (a class method
 * named by the call's annotation). Needs bubblewrap and python3, as every local-backend test does.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { NodusClient, RemoteError } from "../../src/client/index.ts"
import { py } from "../clients/Python.ts"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

const project = "fn-live"
const functions = `/apis/nodus.dev/v1/namespaces/${project}/functions`
let server: TestServer
let client: NodusClient

const source = `
import os

def double(x):
    return 2 * x

def fail(message):
    raise ValueError(message)

def where():
    return {"cwd_writable": os.access("/platform/work", os.W_OK), "pid": os.getpid()}

raised = []

def flaky(x):
    # Raises on this worker's first call only: a retry on the same worker succeeds.
    if not raised:
        raised.append(x)
        raise RuntimeError("first call fails")
    return x

def sleepy(seconds):
    import time
    time.sleep(seconds)
    return seconds

def die():
    # The worker process ends under the call, as a crash or an OOM kill would end it.
    os._exit(3)

class Counter:
    def __init__(self):
        self.count = 0

    def bump(self, by=1):
        self.count += by
        return self.count
`

/** A tar.gz of one module, app.py, made with the host's tar. */
const archive = (): Buffer => {
  const dir = mkdtempSync(join(tmpdir(), "nodus-fn-"))
  writeFileSync(join(dir, "app.py"), source)
  execFileSync("tar", ["-czf", join(dir, "code.tar.gz"), "-C", dir, "app.py"])
  return readFileSync(join(dir, "code.tar.gz"))
}

const createFunction = async (
  name: string,
  code: Record<string, unknown>,
  scaling: Record<string, unknown> = { minWorkers: 1 },
  spec: Record<string, unknown> = {}
) => {
  const reply = await request(server, "POST", functions, {
    body: {
      apiVersion: "nodus.dev/v1",
      kind: "Function",
      metadata: { name },
      spec: { image: "debian:12", code, scaling, ...spec }
    }
  })
  assert.strictEqual(reply.status, 201, reply.text)
  if (scaling["minWorkers"] === 0) return
  await eventually(
    `${name} has a ready worker`,
    async () => (await request(server, "GET", `${functions}/${name}`)).body?.status?.workers?.ready >= 1,
    { timeoutMs: 20_000 }
  ).catch(async (error) => {
    throw new Error(
      `${String(error)}: ${JSON.stringify((await request(server, "GET", `${functions}/${name}`)).body.status)}`
    )
  })
}

let blob: string

const readCall = async (name: string) =>
  (await request(server, "GET", `/apis/nodus.dev/v1/namespaces/${project}/functioncalls/${name}`)).body

const callBody = (fn: string, args: ReadonlyArray<unknown>, spec: Record<string, unknown> = {}) => ({
  apiVersion: "nodus.dev/v1",
  kind: "FunctionCall",
  metadata: { generateName: `${fn}-` },
  spec: {
    function: fn,
    input: { encoding: "JSON", inline: Buffer.from(JSON.stringify({ args, kwargs: {} })).toString("base64") },
    ...spec
  }
})

beforeAll(async () => {
  server = await startTestServer({ local: true })
  client = new NodusClient({ baseUrl: server.url, token: server.token, env: {} })
  assert.strictEqual(
    (await request(server, "POST", "/api/v1/namespaces", { body: { metadata: { name: project } } })).status,
    201
  )
  blob = await client.uploadBlob(archive(), project)
  // One worker running calls on 8 threads: a map does not take the host's other slot.
  await createFunction("double", { module: "app", qualname: "double", blob }, {
    minWorkers: 1,
    maxWorkers: 1,
    targetConcurrency: 8
  })
  // This host has few slots: a Function called now and then starts a worker per call and lets it go at once.
  await createFunction("fail", { module: "app", qualname: "fail", blob }, { minWorkers: 0, scaledownWindow: "0s" })
}, 120_000)
afterAll(async () => {
  client?.close()
  await server?.stop()
})

describe("a Function on this host", () => {
  it("the TypeScript client's remote() returns what the worker's function returned", async () => {
    assert.strictEqual(await client.function(project, "double").remote([21]), 42)
    assert.deepStrictEqual(await client.function(project, "double").remote(["ab"]), "abab")
  })

  it("spawn() then get(); the call shows its worker, epoch and cost", async () => {
    const call = await client.function(project, "double").spawn([5])
    assert.strictEqual(await call.get(30), 10)
    const stored =
      (await request(server, "GET", `/apis/nodus.dev/v1/namespaces/${project}/functioncalls/${call.name}`)).body
    assert.strictEqual(stored.status.phase, "Succeeded")
    assert.strictEqual(stored.status.worker.epoch, 1)
    assert.match(stored.status.worker.attempt, /^double-\d+$/u)
    assert.match(stored.status.costUSD, /^\d+(\.\d+)?$/u)
  })

  it("map() gives every result in input order", async () => {
    const results: Array<unknown> = []
    for await (const value of client.function(project, "double").map([1, 2, 3, 4, 5, 6, 7, 8])) results.push(value)
    assert.deepStrictEqual(results, [2, 4, 6, 8, 10, 12, 14, 16])
  })

  it("a raised exception is a RemoteError with its type; the call is Failed RemoteError with the traceback", async () => {
    const call = await client.function(project, "fail").spawn(["no good"])
    const error = await call.get(15).then(() => undefined, async (caught: unknown) => {
      if (caught instanceof RemoteError) return caught
      const seen = await request(server, "GET", `/apis/nodus.dev/v1/namespaces/${project}/functioncalls/${call.name}`)
      const fn = await request(server, "GET", `${functions}/fail`)
      throw new Error(`${String(caught)}: ${JSON.stringify(seen.body.status)} ${JSON.stringify(fn.body.status)}`)
    })
    assert.instanceOf(error, RemoteError)
    const remote = error as RemoteError
    assert.strictEqual(remote.remoteType, "ValueError")
    assert.include(remote.message, "no good")
    assert.include(remote.remoteTraceback ?? "", "app.py")
  })

  it("the Python client's remote() and map() reach the same worker", async () => {
    const report = await py(
      `
f = nodus.Client().function("${project}", "double")
report(lambda: {"one": f.remote(4), "many": list(f.map([1, 2, 3]))})
`,
      { NODUS_URL: server.url, NODUS_TOKEN: server.token }
    )
    assert.deepStrictEqual(report.ok, { one: 8, many: [2, 4, 6] })
  })

  it("a raise with retries left is retried after the backoff, and the retry's answer is the call's", async () => {
    // The worker stays through the backoff (scaledownWindow > initialDelay): the retry finds the same worker.
    await createFunction("flaky", { module: "app", qualname: "flaky", blob }, {
      minWorkers: 0,
      maxWorkers: 1,
      scaledownWindow: "5s"
    }, { retries: { maxRetries: 2, initialDelay: "1s" } })
    const call = await client.function(project, "flaky").spawn(["second time"])
    assert.strictEqual(await call.get(30), "second time")
    const stored = await readCall(call.name)
    assert.deepStrictEqual([stored.status.retries, stored.status.worker.epoch], [1, 2])
  })

  it("a call past its timeout fails DeadlineExceeded", async () => {
    await createFunction("sleepy", { module: "app", qualname: "sleepy", blob }, {
      minWorkers: 0,
      maxWorkers: 1,
      scaledownWindow: "0s"
    })
    const made = await request(server, "POST", `/apis/nodus.dev/v1/namespaces/${project}/functioncalls`, {
      body: callBody("sleepy", [5], { timeout: "1s" })
    })
    assert.strictEqual(made.status, 201, made.text)
    const error = await client.functionCall(project, made.body.metadata.name).get(30).then(
      () => undefined,
      (caught: unknown) => caught
    )
    assert.instanceOf(error, RemoteError)
    const stored = await readCall(made.body.metadata.name)
    assert.deepStrictEqual([stored.status.phase, stored.status.reason], ["Failed", "DeadlineExceeded"])
  })

  it("a worker that dies under its call: the call is recovered on a new worker, until the recovery limit (RecoveryLimitExceeded)", async () => {
    await createFunction("die", { module: "app", qualname: "die", blob }, {
      minWorkers: 0,
      maxWorkers: 1,
      scaledownWindow: "0s"
    }, { recovery: { maxAttempts: 1 } })
    const call = await client.function(project, "die").spawn([])
    const error = await call.get(60).then(() => undefined, (caught: unknown) => caught)
    assert.instanceOf(error, RemoteError)
    const stored = await readCall(call.name)
    assert.deepStrictEqual([
      stored.status.phase,
      stored.status.reason,
      stored.status.recoveries,
      stored.status.worker.epoch
    ], ["Failed", "RecoveryLimitExceeded", 1, 2])
  })

  it("a class's method, named by the call, runs on the one instance its worker made", async () => {
    await createFunction("counter", { module: "app", cls: { name: "Counter", methods: ["bump"] }, blob }, {
      minWorkers: 1,
      maxWorkers: 1
    })
    const body = (by: number) => ({
      apiVersion: "nodus.dev/v1",
      kind: "FunctionCall",
      metadata: { generateName: "counter-", annotations: { "nodus.dev/method": "bump" } },
      spec: {
        function: "counter",
        input: { encoding: "JSON", inline: Buffer.from(JSON.stringify({ args: [by], kwargs: {} })).toString("base64") }
      }
    })
    const values: Array<unknown> = []
    for (const by of [1, 2, 3]) {
      const made = await request(server, "POST", `/apis/nodus.dev/v1/namespaces/${project}/functioncalls`, {
        body: body(by)
      })
      assert.strictEqual(made.status, 201, made.text)
      values.push(
        await client.functionCall(project, made.body.metadata.name).get(20).catch(async (error) => {
          const seen = await request(
            server,
            "GET",
            `/apis/nodus.dev/v1/namespaces/${project}/functioncalls/${made.body.metadata.name}`
          )
          const fn = await request(server, "GET", `${functions}/counter`)
          throw new Error(`${String(error)}: ${JSON.stringify(seen.body.status)} ${JSON.stringify(fn.body.status)}`)
        })
      )
    }
    assert.deepStrictEqual(values, [1, 3, 6])
  })
})
