/**
 * The TypeScript client (src/client, docs/clients.md) against a real nodus server over TLS with its own CA: where it
 * finds the server (options, environment, the kubeconfig `nodus kubeconfig` prints), each client error class mapped
 * from a Status the server really answers (401, 404, 422, 409, 402, 429), resource calls, blobs and a Function's
 * `spawn` (the FunctionCall it stores), through both the `Client` Effect service and the Promise-friendly NodusClient.
 * The answers a server cannot give on demand are in Retries.test.ts, from a recording stub.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import {
  AuthenticationError,
  Client,
  type ClientOptions,
  ConfigurationError,
  NodusClient,
  NodusError,
  NotFoundError,
  RemoteError,
  ValidationError
} from "../../src/client/index.ts"
import { errorCodes } from "../../src/core/meta/ErrorCodes.ts"
import { api } from "../acceptance/Clients.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"
import { failure } from "./Support.ts"

const project = "ts-client"
const v1 = "/apis/nodus.dev/v1"
let server: TestServer
/** Options that point a client at the server with the admin key, and nothing from the test's own environment. */
let admin: ClientOptions
const noEnv = { KUBECONFIG: "/nonexistent/kubeconfig" }
const clients: Array<NodusClient> = []

const connect = (options: ClientOptions = admin) => {
  const client = new NodusClient(options)
  clients.push(client)
  return client
}

/** A client error as the spec gives it: its class and tag, HTTP status, code, the server's request id and fix. */
const assertError = (
  error: NodusError,
  expected: { readonly error: string; readonly status: number; readonly code: string }
) => {
  assert.strictEqual(error._tag, expected.error, String(error))
  assert.strictEqual(error.name, expected.error)
  assert.strictEqual(error.statusCode, expected.status)
  assert.strictEqual(error.code, expected.code)
  assert.strictEqual((error.payload as { reason?: string }).reason, expected.code)
  // The request id is the server's (header and body agree), for support.
  assert.match(error.requestId ?? "", /.+/u)
  assert.strictEqual(error.requestId, (error.payload as { requestId?: string }).requestId)
  assert.isString(error.fix)
  // Every error the client raises for a registered code is the class the registry gives it.
  assert.strictEqual(errorCodes[expected.code as keyof typeof errorCodes].clientError, expected.error)
}

const job = (name: string, spec: Record<string, unknown> = {}) => ({
  kind: "Job",
  metadata: { name },
  spec: { image: "python:3.12", command: ["true"], ...spec }
})

beforeAll(async () => {
  server = await startTestServer({ tls: true })
  admin = { env: { ...noEnv, NODUS_URL: server.url, NODUS_TOKEN: server.token, NODUS_CA: server.caPath! } }
  const created = await api(server, "POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: project } }
  })
  assert.strictEqual(created.status, 201, created.text)
})
afterAll(async () => {
  for (const client of clients) client.close()
  await server?.stop()
})

describe("configuration", () => {
  it("reads server, key and CA from the kubeconfig nodus prints, and its context's namespace", async () => {
    const withNamespace = join(server.directory, "kubeconfig-ns")
    const text = readFileSync(server.kubeconfigPath, "utf8")
    writeFileSync(
      withNamespace,
      text.replace("    user: nodus-admin\n", `    user: nodus-admin\n    namespace: ${project}\n`)
    )
    const client = connect({ env: { KUBECONFIG: withNamespace } })
    await client.create("jobs", project, job("from-kubeconfig"))
    assert.strictEqual(client.config.baseUrl, server.url)
    assert.strictEqual(client.defaultProject, project)
    assert.deepStrictEqual((await client.list("jobs", project)).map((item) => item["metadata"].name), [
      "from-kubeconfig"
    ])
    // The same file named as an option.
    assert.strictEqual(connect({ kubeconfig: withNamespace, env: {} }).defaultProject, project)
  })

  it("ConfigurationError when nothing names a server, the kubeconfig is broken, or the CA cannot be read", () => {
    const thrown = (options: ClientOptions) => {
      try {
        connect(options)
      } catch (error) {
        assert.instanceOf(error, ConfigurationError)
        assert.isUndefined((error as ConfigurationError).statusCode)
        return (error as ConfigurationError).message
      }
      return assert.fail("expected ConfigurationError")
    }
    assert.include(thrown({ env: noEnv }), "NODUS_URL")
    const broken = join(server.directory, "kubeconfig-broken")
    writeFileSync(broken, "apiVersion: v1\nkind: Config\ncurrent-context: elsewhere\ncontexts: []\n")
    assert.include(thrown({ env: { KUBECONFIG: broken } }), "'elsewhere'")
    assert.include(
      thrown({ env: { ...admin.env, NODUS_CA: join(server.directory, "absent-ca.crt") } }),
      "absent-ca.crt"
    )
    assert.include(
      thrown({ ...admin, ca: "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n" }),
      "PEM text"
    )
    assert.include(thrown({ env: noEnv, baseUrl: "127.0.0.1:8443", token: "nds_x" }), "http(s)://")
  })

  it("options win over the environment; the CA may be PEM text", async () => {
    const client = connect({
      baseUrl: server.url,
      token: server.token,
      ca: server.ca!,
      env: { NODUS_URL: "http://127.0.0.1:9", NODUS_TOKEN: "nds_wrong" }
    })
    assert.strictEqual((await client.get("jobs", project, "from-kubeconfig"))["metadata"].name, "from-kubeconfig")
  })

  it("the Client service from its layer: yield* client.get(...)", async () => {
    const program = Effect.gen(function*() {
      const client = yield* Client
      return (yield* client.get("jobs", project, "from-kubeconfig"))["metadata"].name as string
    })
    assert.strictEqual(await Effect.runPromise(program.pipe(Effect.provide(Client.layer(admin)))), "from-kubeconfig")
    // Building the layer without a server is the ConfigurationError, in the error channel.
    const missing = await Effect.runPromise(Effect.flip(program.pipe(Effect.provide(Client.layer({ env: noEnv })))))
    assert.strictEqual(missing._tag, "ConfigurationError")
  })
})

describe("each client error from a Status the server answers", () => {
  it("AuthenticationError: 401 Unauthorized for a key the server does not know", async () => {
    const error = await failure(connect({ env: { ...admin.env, NODUS_TOKEN: "nds_not-a-key" } }).list("jobs", project))
    assert.instanceOf(error, AuthenticationError)
    assertError(error, { error: "AuthenticationError", status: 401, code: "Unauthorized" })
  })

  it("NotFoundError: 404 NotFound for an object that does not exist, caught by its tag in Effect", async () => {
    const error = await failure(connect().get("jobs", project, "nope"))
    assert.instanceOf(error, NotFoundError)
    assertError(error, { error: "NotFoundError", status: 404, code: "NotFound" })
    const caught = await Effect.runPromise(
      Effect.gen(function*() {
        const client = yield* Client
        return yield* client.get("jobs", project, "nope").pipe(
          Effect.as("found"),
          Effect.catchTag("NotFoundError", (error) => Effect.succeed(`missing: ${error.code}`))
        )
      }).pipe(Effect.provide(Client.layer(admin)))
    )
    assert.strictEqual(caught, "missing: NotFound")
  })

  it("ValidationError: 422 Invalid, with the field it names", async () => {
    const error = await failure(connect().create("jobs", project, job("bad", { completions: 0 })))
    assert.instanceOf(error, ValidationError)
    assertError(error, { error: "ValidationError", status: 422, code: "Invalid" })
    assert.include(error.causes.map((cause) => cause.field), "spec.completions")
  })

  it("IdempotencyConflictError: 409 IdempotencyKeyReused for one key with another payload; the same payload replays", async () => {
    const client = connect()
    const first = await client.create("jobs", project, job("keyed"), { idempotencyKey: "ts-key-1" })
    const again = await client.create("jobs", project, job("keyed"), { idempotencyKey: "ts-key-1" })
    assert.strictEqual(again["metadata"].uid, first["metadata"].uid)
    const error = await failure(client.create("jobs", project, job("keyed-other"), { idempotencyKey: "ts-key-1" }))
    assertError(error, { error: "IdempotencyConflictError", status: 409, code: "IdempotencyKeyReused" })
  })

  it("BudgetExceededError: 402 BudgetExceeded for a hold above the Job's maxCostUSD", async () => {
    const capped = job("capped", {
      resources: { gpu: { type: ["H100"], count: 8 } },
      expectedDuration: "6h",
      maxCostUSD: "1.00"
    })
    const error = await failure(connect().create("jobs", project, capped))
    assertError(error, { error: "BudgetExceededError", status: 402, code: "BudgetExceeded" })
    assert.include(error.message, "maxCostUSD")
    // The Status message ends with the fix for kubectl; the client shows the fix once, on its own.
    assert.isString(error.fix)
    assert.notInclude(error.message, error.fix!)
    assert.strictEqual(String(error).split(error.fix!).length, 2, String(error))
  })

  it("RateLimitError: 429 TooManyRequests, raised at once when the server asks for a wait beyond the client's bound", async () => {
    // A key without secrets:read may have 1,000 distinct literal env values compared per hour (docs/secrets.md).
    const client = connect()
    await client.create("serviceaccounts", project, {
      kind: "ServiceAccount",
      metadata: { name: "guesser" },
      spec: { scopes: ["jobs:write"] }
    })
    const minted = await client.request("POST", `${client.path("serviceaccounts", project, "guesser")}/tokens`, {
      json: {}
    })
    const token = JSON.parse(Buffer.from(minted.body).toString("utf8")).status.token as string
    const guesser = connect({ ...admin, token })
    const probe = (values: ReadonlyArray<string>) => ({
      kind: "Job",
      metadata: { name: "probe" },
      spec: { image: "python:3.12", env: values.map((value, index) => ({ name: `V${index}`, value })) }
    })
    await guesser.create("jobs", project, probe(Array.from({ length: 1000 }, (_, index) => `g-${index}`)), {
      dryRun: true
    })
    const error = await failure(guesser.create("jobs", project, probe(["one-more"]), { dryRun: true }))
    assertError(error, { error: "RateLimitError", status: 429, code: "TooManyRequests" })
    assert.isAbove(error.retryAfter ?? 0, 30)
  })

  it("APIError: 409 AlreadyExists, which the spec's table leaves to the generic class", async () => {
    const error = await failure(connect().create("jobs", project, job("keyed")))
    assertError(error, { error: "APIError", status: 409, code: "AlreadyExists" })
  })
})

describe("resource calls", () => {
  it("create, get, list with a selector, merge patch and delete a Job", async () => {
    const client = connect()
    const made = await client.create("jobs", project, {
      kind: "Job",
      metadata: { name: "crud", labels: { team: "a" } },
      spec: { image: "python:3.12", command: ["true"] }
    })
    assert.strictEqual(made["apiVersion"], "nodus.dev/v1")
    const patched = await client.patch("jobs", project, "crud", { metadata: { labels: { stage: "patched" } } })
    assert.deepStrictEqual(patched["metadata"].labels, { team: "a", stage: "patched" })
    assert.deepStrictEqual(
      (await client.list("jobs", project, { labelSelector: "stage=patched" })).map((item) => item["metadata"].name),
      ["crud"]
    )
    assert.strictEqual((await client.get("jobs", project, "crud"))["metadata"].uid, made["metadata"].uid)
    await client.delete("jobs", project, "crud")
    assert.instanceOf(await failure(client.get("jobs", project, "crud")), NotFoundError)
  })

  it("list follows continue pages", async () => {
    const client = connect()
    for (const name of ["page-a", "page-b", "page-c"]) {
      await client.create("jobs", project, { ...job(name), metadata: { name, labels: { paged: "yes" } } })
    }
    const names = (await client.list("jobs", project, { labelSelector: "paged=yes", limit: 1 })).map((item) =>
      item["metadata"].name
    )
    assert.deepStrictEqual(names, ["page-a", "page-b", "page-c"])
  })

  it("uploads a blob: its sha256 reference, and the bytes read back", async () => {
    const bytes = "blob bytes from typescript\n"
    const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`
    const client = connect()
    assert.strictEqual(await client.uploadBlob(bytes, project), digest)
    assert.strictEqual(Buffer.from(await client.readBlob(digest)).toString("utf8"), bytes)
    const read = await api(server, "GET", `/blobs/v1/${digest}`)
    assert.strictEqual(read.status, 200)
    assert.strictEqual(read.text, bytes)
  })
})

describe("Function calls", () => {
  /** The FunctionCall the server stored, and its input decoded (inline base64, or the blob it names). */
  const stored = async (name: string) => {
    const reply = await api(server, "GET", `${v1}/namespaces/${project}/functioncalls/${name}`)
    assert.strictEqual(reply.status, 200, reply.text)
    const { inline, blob } = reply.body.spec.input as { inline?: string; blob?: string }
    const raw = inline !== undefined
      ? Buffer.from(inline, "base64").toString("utf8")
      : (await api(server, "GET", `/blobs/v1/${blob}`)).text
    return { call: reply.body, input: JSON.parse(raw) }
  }

  beforeAll(async () => {
    const spec = {
      image: "python:3.12-slim",
      python: "3.12",
      code: { module: "app", qualname: "embed" },
      timeout: "60s"
    }
    await connect().create("functions", project, { kind: "Function", metadata: { name: "embed" }, spec })
  })

  it("spawn creates a FunctionCall: the Function, JSON input {args, kwargs} inline", async () => {
    const handle = await connect().function(project, "embed").spawn([1, "two"], { k: [3] })
    const { call, input } = await stored(handle.name)
    assert.deepInclude(call, { kind: "FunctionCall" })
    assert.match(call.metadata.name, /^embed-/u)
    assert.deepInclude(call.spec, { function: "embed", timeout: "60s" })
    assert.deepStrictEqual([call.spec.input.encoding, typeof call.spec.input.inline, input], ["JSON", "string", {
      args: [1, "two"],
      kwargs: { k: [3] }
    }])
    // The handle reads the stored call back.
    assert.strictEqual((await handle.object())["metadata"].uid, call.metadata.uid)
  })

  it("an input above 64 KiB goes as a blob the call names (through the Effect service)", async () => {
    const name = await Effect.runPromise(
      Effect.gen(function*() {
        const client = yield* Client
        return (yield* client.function(project, "embed").spawn(["x".repeat(70_000)])).name
      }).pipe(Effect.provide(Client.layer(admin)))
    )
    const { call, input } = await stored(name)
    assert.isUndefined(call.spec.input.inline)
    assert.match(call.spec.input.blob, /^sha256:[0-9a-f]{64}$/u)
    assert.deepStrictEqual(input, { args: ["x".repeat(70_000)], kwargs: {} })
  })

  it("get long-polls the result route: the value once the call succeeds, RemoteError once it fails, APITimeoutError past its timeout", async () => {
    const embed = connect().function(project, "embed")
    const writeStatus = async (name: string, status: Record<string, unknown>) => {
      const written = await api(server, "PATCH", `${v1}/namespaces/${project}/functioncalls/${name}/status`, {
        body: { status },
        contentType: "application/merge-patch+json"
      })
      assert.strictEqual(written.status, 200, written.text)
    }
    // The call's end is written by hand (no Function machine runs it yet), while the client waits on the route.
    const succeeding = await embed.spawn([20, 22])
    const waiting = succeeding.get(30)
    await writeStatus(succeeding.name, {
      phase: "Succeeded",
      result: { encoding: "JSON", inline: Buffer.from(JSON.stringify({ sum: 42 })).toString("base64") }
    })
    assert.deepStrictEqual(await waiting, { sum: 42 })
    assert.isTrue(await succeeding.done())
    const failing = await embed.spawn()
    await writeStatus(failing.name, {
      phase: "Failed",
      reason: "RemoteError",
      error: { type: "ValueError", message: "bad input", traceback: "Traceback ..." }
    })
    const failed = await failure(failing.get(30))
    assert.instanceOf(failed, RemoteError)
    assert.deepStrictEqual([failed.message, (failed as RemoteError).remoteType], ["bad input", "ValueError"])
    const unfinished = await embed.spawn()
    assert.strictEqual((await failure(unfinished.get(1)))._tag, "APITimeoutError")
    assert.isFalse(await unfinished.done())
  })

  it("a missing Function: NotFoundError with code FunctionNotFound", async () => {
    const error = await failure(connect().function(project, "absent").spawn([1]))
    assert.instanceOf(error, NotFoundError)
    assertError(error, { error: "NotFoundError", status: 404, code: "FunctionNotFound" })
  })
})
