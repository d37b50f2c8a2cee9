/**
 * The Python client (clients/python, docs/clients.md) in a real python3 against a real nodus server over TLS: where it
 * finds the server (arguments, environment, the kubeconfig `nodus kubeconfig` prints), each client error class mapped
 * from a Status the server really answers (401, 404, 422, 409, 402, 429), generic resource calls, blob upload, and a
 * Function's `.spawn()` (the FunctionCall it stores). Classes the server cannot be made to answer on demand are in
 * PythonRetries.test.ts, fed recorded Status bodies by a stub.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { errorCodes } from "../../src/core/meta/ErrorCodes.ts"
import { api } from "../acceptance/Clients.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"
import { py } from "./Python.ts"

const project = "py-client"
let server: TestServer
/** The environment that points a client at the server with the admin key. */
let admin: Record<string, string>

const v1 = "/apis/nodus.dev/v1"

/** A client error as the prelude reports it: its class (and that it derives from NodusError), status, code, ids. */
const assertError = (
  report: any,
  expected: { readonly error: string; readonly status: number; readonly code: string }
) => {
  assert.strictEqual(report.error, expected.error, JSON.stringify(report))
  assert.include(report.bases, "NodusError")
  assert.strictEqual(report.status_code, expected.status)
  assert.strictEqual(report.code, expected.code)
  assert.strictEqual(report.payload_reason, expected.code)
  // The request id is the server's (header and body agree), for support.
  assert.match(report.request_id, /.+/u)
  assert.strictEqual(report.request_id, report.body_request_id)
  assert.isString(report.fix)
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
  admin = { NODUS_URL: server.url, NODUS_TOKEN: server.token, NODUS_CA: server.caPath! }
  const created = await api(server, "POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: project } }
  })
  assert.strictEqual(created.status, 201, created.text)
})
afterAll(() => server?.stop())

describe("configuration", () => {
  it("reads server, key and CA from the kubeconfig nodus prints, and its context's namespace", async () => {
    const withNamespace = join(server.directory, "kubeconfig-ns")
    const text = readFileSync(server.kubeconfigPath, "utf8")
    writeFileSync(
      withNamespace,
      text.replace("    user: nodus-admin\n", `    user: nodus-admin\n    namespace: ${project}\n`)
    )
    const report = await py(
      `
c = nodus.Client()
c.create("jobs", "${project}", ${JSON.stringify(job("from-kubeconfig"))})
report(lambda: {"url": c.base_url, "project": c.default_project, "names": [j["metadata"]["name"] for j in c.list("jobs", "${project}")]})
`,
      { KUBECONFIG: withNamespace }
    )
    assert.deepStrictEqual(report.ok, { url: server.url, project, names: ["from-kubeconfig"] })
  })

  it("ConfigurationError when nothing names a server, the kubeconfig is broken, or the CA cannot be read", async () => {
    const nothing = await py(`report(lambda: nodus.Client())`)
    assert.strictEqual(nothing.error, "ConfigurationError")
    assert.include(nothing.bases, "NodusError")
    assert.isNull(nothing.status_code)
    assert.include(nothing.message, "NODUS_URL")
    const broken = join(server.directory, "kubeconfig-broken")
    writeFileSync(broken, "apiVersion: v1\nkind: Config\ncurrent-context: elsewhere\ncontexts: []\n")
    const named = await py(`report(lambda: nodus.Client())`, { KUBECONFIG: broken })
    assert.strictEqual(named.error, "ConfigurationError")
    assert.include(named.message, "'elsewhere'")
    const noCa = await py(`report(lambda: nodus.Client())`, {
      ...admin,
      NODUS_CA: join(server.directory, "absent-ca.crt")
    })
    assert.strictEqual(noCa.error, "ConfigurationError")
    assert.include(noCa.message, "absent-ca.crt")
    const badCa = await py(
      `report(lambda: nodus.Client(ca="-----BEGIN CERTIFICATE-----\\nnot a certificate\\n-----END CERTIFICATE-----\\n"))`,
      admin
    )
    assert.strictEqual(badCa.error, "ConfigurationError")
  })

  it("arguments win over the environment", async () => {
    const report = await py(
      `report(lambda: nodus.Client("${server.url}", "${server.token}", ${
        JSON.stringify(server.ca)
      }).get("jobs", "${project}", "from-kubeconfig")["metadata"]["name"])`,
      {
        NODUS_URL: "http://127.0.0.1:9",
        NODUS_TOKEN: "nds_wrong"
      }
    )
    assert.strictEqual(report.ok, "from-kubeconfig")
  })
})

describe("each client error from a Status the server answers", () => {
  it("AuthenticationError: 401 Unauthorized for a key the server does not know", async () => {
    const report = await py(`report(lambda: nodus.Client().list("jobs", "${project}"))`, {
      ...admin,
      NODUS_TOKEN: "nds_not-a-key"
    })
    assertError(report, { error: "AuthenticationError", status: 401, code: "Unauthorized" })
  })

  it("NotFoundError: 404 NotFound for an object that does not exist", async () => {
    const report = await py(`report(lambda: nodus.Client().get("jobs", "${project}", "nope"))`, admin)
    assertError(report, { error: "NotFoundError", status: 404, code: "NotFound" })
  })

  it("ValidationError: 422 Invalid, with the field it names", async () => {
    const report = await py(
      `report(lambda: nodus.Client().create("jobs", "${project}", ${JSON.stringify(job("bad", { completions: 0 }))}))`,
      admin
    )
    assertError(report, { error: "ValidationError", status: 422, code: "Invalid" })
    assert.include(report.causes.map((cause: { field: string }) => cause.field), "spec.completions")
  })

  it("IdempotencyConflictError: 409 IdempotencyKeyReused for one key with another payload; the same payload replays", async () => {
    const report = await py(
      `
c = nodus.Client()
first = c.create("jobs", "${project}", ${JSON.stringify(job("keyed"))}, idempotency_key="py-key-1")
again = c.create("jobs", "${project}", ${JSON.stringify(job("keyed"))}, idempotency_key="py-key-1")
assert again["metadata"]["uid"] == first["metadata"]["uid"], (first, again)
report(lambda: c.create("jobs", "${project}", ${JSON.stringify(job("keyed-other"))}, idempotency_key="py-key-1"))
`,
      admin
    )
    assertError(report, { error: "IdempotencyConflictError", status: 409, code: "IdempotencyKeyReused" })
  })

  it("BudgetExceededError: 402 BudgetExceeded for a hold above the Job's maxCostUSD", async () => {
    const capped = job("capped", {
      resources: { gpu: { type: ["H100"], count: 8 } },
      expectedDuration: "6h",
      maxCostUSD: "1.00"
    })
    const report = await py(
      `report(lambda: nodus.Client().create("jobs", "${project}", ${JSON.stringify(capped)}))`,
      admin
    )
    assertError(report, { error: "BudgetExceededError", status: 402, code: "BudgetExceeded" })
    assert.include(report.message, "maxCostUSD")
  })

  it("RateLimitError: 429 TooManyRequests, raised at once when the server asks for a wait beyond the client's bound", async () => {
    // A key without secrets:read may have 1,000 distinct literal env values compared per hour (docs/secrets.md).
    const report = await py(
      `
c = nodus.Client()
c.create("serviceaccounts", "${project}", {"kind": "ServiceAccount", "metadata": {"name": "guesser"}, "spec": {"scopes": ["jobs:write"]}})
token = c.request("POST", c.path("serviceaccounts", "${project}", "guesser") + "/tokens", json_body={}).json()["status"]["token"]
guesser = nodus.Client(token=token)
probe = lambda values: {"kind": "Job", "metadata": {"name": "probe"}, "spec": {"image": "python:3.12", "env": [{"name": "V%d" % i, "value": v} for i, v in enumerate(values)]}}
guesser.create("jobs", "${project}", probe(["g-%d" % i for i in range(1000)]), dry_run=True)
report(lambda: guesser.create("jobs", "${project}", probe(["one-more"]), dry_run=True))
`,
      admin
    )
    assertError(report, { error: "RateLimitError", status: 429, code: "TooManyRequests" })
    assert.isAbove(report.retry_after, 30)
  })

  it("APIError: 409 AlreadyExists, which the spec's table leaves to the generic class", async () => {
    const report = await py(
      `report(lambda: nodus.Client().create("jobs", "${project}", ${JSON.stringify(job("keyed"))}))`,
      admin
    )
    assertError(report, { error: "APIError", status: 409, code: "AlreadyExists" })
  })

  it("every class the registry names exists in the package and derives from NodusError", async () => {
    const names = [
      ...new Set(Object.values(errorCodes).map((info) => info.clientError)),
      "ConfigurationError",
      "SignatureError",
      "APIConnectionError",
      "APITimeoutError"
    ]
    const report = await py(
      `report(lambda: {n: getattr(nodus, n, None) is not None and issubclass(getattr(nodus, n), nodus.NodusError) for n in ${
        JSON.stringify(names)
      }})`
    )
    assert.deepStrictEqual(report.ok, Object.fromEntries(names.map((name) => [name, true])))
  })
})

describe("resource calls", () => {
  it("create, get, list with a selector, merge patch and delete a Job", async () => {
    const report = await py(
      `
c = nodus.Client()
made = c.create("jobs", "${project}", {"kind": "Job", "metadata": {"name": "crud", "labels": {"team": "a"}}, "spec": {"image": "python:3.12", "command": ["true"]}})
patched = c.patch("jobs", "${project}", "crud", {"metadata": {"labels": {"stage": "patched"}}})
listed = [j["metadata"]["name"] for j in c.list("jobs", "${project}", label_selector="stage=patched")]
got = c.get("jobs", "${project}", "crud")
c.delete("jobs", "${project}", "crud")
def gone():
    try:
        c.get("jobs", "${project}", "crud")
        return False
    except nodus.NotFoundError:
        return True
report(lambda: {"apiVersion": made["apiVersion"], "labels": patched["metadata"]["labels"], "listed": listed, "uid": got["metadata"]["uid"] == made["metadata"]["uid"], "gone": gone()})
`,
      admin
    )
    assert.deepStrictEqual(report.ok, {
      apiVersion: "nodus.dev/v1",
      labels: { team: "a", stage: "patched" },
      listed: ["crud"],
      uid: true,
      gone: true
    })
  })

  it("uploads a blob: its sha256 reference, and the bytes read back", async () => {
    const bytes = "blob bytes from python\n"
    const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`
    const report = await py(
      `report(lambda: nodus.Client().upload_blob(b${JSON.stringify(bytes)}, project="${project}"))`,
      admin
    )
    assert.strictEqual(report.ok, digest)
    const read = await api(server, "GET", `/blobs/v1/${digest}`)
    assert.strictEqual(read.status, 200)
    assert.strictEqual(read.text, bytes)
  })
})

describe("Function calls", () => {
  const callOf = async (name: string) => {
    const reply = await api(server, "GET", `${v1}/namespaces/${project}/functioncalls/${name}`)
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body
  }
  const inputOf = async (payload: { inline?: string; blob?: string }) =>
    JSON.parse(
      payload.inline !== undefined
        ? Buffer.from(payload.inline, "base64").toString("utf8")
        : (await api(server, "GET", `/blobs/v1/${payload.blob}`)).text
    )

  beforeAll(async () => {
    // The Function runs the caller's Python minor: calls from another minor are Invalid.
    const report = await py(
      `
from nodus.functions import python_minor
c = nodus.Client()
report(lambda: c.create("functions", "${project}", {"kind": "Function", "metadata": {"name": "embed"}, "spec": {"image": "python:3.12-slim", "python": python_minor(), "code": {"module": "app", "qualname": "embed"}, "timeout": "60s"}})["spec"]["python"])
`,
      admin
    )
    assert.match(report.ok, /^3\.\d+$/u)
  })

  it(".spawn() creates a FunctionCall: the Function, JSON input {args, kwargs}, the caller's Python minor", async () => {
    const report = await py(
      `
import sys
c = nodus.Client()
handle = c.function("${project}", "embed").spawn(1, "two", k=[3])
report(lambda: {"name": handle.name, "minor": "%d.%d" % sys.version_info[:2]})
`,
      admin
    )
    const call = await callOf(report.ok.name)
    assert.strictEqual(call.kind, "FunctionCall")
    assert.match(call.metadata.name, /^embed-/u)
    assert.strictEqual(call.metadata.annotations["nodus.dev/python"], report.ok.minor)
    assert.strictEqual(call.spec.function, "embed")
    assert.strictEqual(call.spec.timeout, "60s")
    assert.strictEqual(call.spec.input.encoding, "JSON")
    assert.deepStrictEqual(await inputOf(call.spec.input), { args: [1, "two"], kwargs: { k: [3] } })
  })

  it("an input above 64 KiB goes as a blob the call names", async () => {
    const report = await py(
      `report(lambda: nodus.Client().function("${project}", "embed").spawn("x" * 70000).name)`,
      admin
    )
    const call = await callOf(report.ok)
    assert.isUndefined(call.spec.input.inline)
    assert.match(call.spec.input.blob, /^sha256:[0-9a-f]{64}$/u)
    assert.deepStrictEqual(await inputOf(call.spec.input), { args: ["x".repeat(70_000)], kwargs: {} })
  })

  it(".get() long-polls the result route: the value once the call succeeds, RemoteError once it fails", async () => {
    const spawned = await py(`report(lambda: nodus.Client().function("${project}", "embed").spawn(20, 22).name)`, admin)
    const name = spawned.ok as string
    // The call's end is written by hand (no Function machine runs it yet), while the client waits on the route.
    const waiting = py(
      `
from nodus.functions import FunctionCall
report(lambda: FunctionCall(nodus.Client(), "${project}", "${name}").get(timeout=30))
`,
      admin
    )
    await new Promise((resolve) => setTimeout(resolve, 500))
    const written = await api(server, "PATCH", `${v1}/namespaces/${project}/functioncalls/${name}/status`, {
      body: {
        status: { phase: "Succeeded", result: { encoding: "JSON", inline: Buffer.from("42").toString("base64") } }
      },
      contentType: "application/merge-patch+json"
    })
    assert.strictEqual(written.status, 200, written.text)
    assert.strictEqual((await waiting).ok, 42)
    const failing = await py(`report(lambda: nodus.Client().function("${project}", "embed").spawn().name)`, admin)
    await api(server, "PATCH", `${v1}/namespaces/${project}/functioncalls/${failing.ok}/status`, {
      body: {
        status: {
          phase: "Failed",
          reason: "RemoteError",
          error: { type: "ValueError", message: "bad input", traceback: "Traceback ..." }
        }
      },
      contentType: "application/merge-patch+json"
    })
    const failed = await py(
      `
from nodus.functions import FunctionCall
report(lambda: FunctionCall(nodus.Client(), "${project}", "${failing.ok}").get(timeout=30))
`,
      admin
    )
    assert.strictEqual(failed.error, "RemoteError", JSON.stringify(failed))
  })

  it("a missing Function: NotFoundError with code FunctionNotFound", async () => {
    const report = await py(`report(lambda: nodus.Client().function("${project}", "absent").spawn(1))`, admin)
    assertError(report, { error: "NotFoundError", status: 404, code: "FunctionNotFound" })
  })

  it(".map()'s batch is one request to the map route: calls in input order, mapId, mapIndex, the map label, the caller's minor", async () => {
    const report = await py(
      `
import sys
f = nodus.Client().function("${project}", "embed")
calls = f._send_batch([f._input((value,), {}) for value in ("a", "b", "c")], "pymap", 7)
report(lambda: {"names": [call["metadata"]["name"] for call in calls], "minor": "%d.%d" % sys.version_info[:2]})
`,
      admin
    )
    assert.lengthOf(report.ok.names, 3, JSON.stringify(report))
    for (const [index, name] of (report.ok.names as ReadonlyArray<string>).entries()) {
      const call = await callOf(name)
      assert.strictEqual(call.spec.mapId, "pymap")
      assert.strictEqual(call.spec.mapIndex, 7 + index)
      assert.strictEqual(call.metadata.labels["nodus.dev/map"], "pymap")
      assert.strictEqual(call.metadata.annotations["nodus.dev/python"], report.ok.minor)
      assert.deepStrictEqual(await inputOf(call.spec.input), { args: [["a", "b", "c"][index]], kwargs: {} })
    }
  })

  it(".map() cuts its inputs into batches of at most 1,000 and 2 MiB, one mapId, indexes running on", async () => {
    const report = await py(
      `
f = nodus.Client().function("${project}", "embed")
sent = []
# Records each batch and creates nothing: every input is then given as a call gone before it ended (NotFoundError).
f._send_batch = lambda payloads, map_id, start: sent.append((len(payloads), start, map_id, sum(len(json.dumps(p)) for p in payloads))) or []
gone = list(f.map(range(2500), return_exceptions=True))
assert len(gone) == 2500 and all(isinstance(e, nodus.NotFoundError) for e in gone), gone[:3]
counted = [(n, start) for n, start, _, _ in sent]
maps = set(map_id for _, _, map_id, _ in sent)
sent.clear()
list(f.map(["9" * 40000] * 120, return_exceptions=True))
report(lambda: {"counted": counted, "maps": len(maps), "big": [(n, start, size) for n, start, _, size in sent]})
`,
      admin
    )
    assert.deepStrictEqual(report.ok.counted, [[1000, 0], [1000, 1000], [500, 2000]], JSON.stringify(report))
    assert.strictEqual(report.ok.maps, 1)
    const big: ReadonlyArray<[number, number, number]> = report.ok.big
    assert.isAbove(big.length, 1)
    assert.strictEqual(big.reduce((sum, [count]) => sum + count, 0), 120)
    for (const [, , size] of big) assert.isAtMost(size, 2 * 1024 * 1024)
  })
})
