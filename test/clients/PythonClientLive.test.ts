/**
 * The Python client (clients/python) against a server with the local backend (docs/live.md, docs/sandboxes.md): a
 * Sandbox's commands and files round-trip through `client.sandbox(...)`, a Sandbox not yet Running is retried as the
 * server asks (SandboxStarting), and a Job's log reads back through `client.job(...).logs()`. Needs bubblewrap, as
 * every local-backend test does.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"
import { py } from "./Python.ts"

const project = "py-live"
let server: TestServer
let env: Record<string, string>

const phaseOf = async (plural: string, name: string) =>
  (await request(server, "GET", `/apis/nodus.dev/v1/namespaces/${project}/${plural}/${name}`)).body?.status?.phase as
    | string
    | undefined

beforeAll(async () => {
  server = await startTestServer({ local: true })
  env = { NODUS_URL: server.url, NODUS_TOKEN: server.token }
  assert.strictEqual(
    (await request(server, "POST", "/api/v1/namespaces", { body: { metadata: { name: project } } })).status,
    201
  )
})
afterAll(() => server?.stop())

describe("a Sandbox through the Python client", () => {
  beforeAll(async () => {
    const report = await py(
      `report(lambda: nodus.Client().create("sandboxes", "${project}", {"kind": "Sandbox", "metadata": {"name": "box"}, "spec": {"image": "debian:12"}})["metadata"]["name"])`,
      env
    )
    assert.strictEqual(report.ok, "box", JSON.stringify(report))
    await eventually("box is Running", async () => (await phaseOf("sandboxes", "box")) === "Running", {
      timeoutMs: 30_000
    })
  })

  it("exec: argv, stdin, env and working directory; exit code, stdout and stderr", async () => {
    const report = await py(
      `
box = nodus.Client().sandbox("${project}", "box")
r = box.exec(["sh", "-c", "read line; echo got $line in $(pwd) as $WHO; echo warn >&2; exit 3"], stdin="hello\\n", env={"WHO": "py"}, working_dir="/tmp", timeout=30)
report(lambda: {"exit": r.exit_code, "stdout": r.stdout, "stderr": r.stderr, "timed_out": r.timed_out, "id": r.id})
`,
      env
    )
    assert.deepInclude(report.ok, { exit: 3, stdout: "got hello in /tmp as py\n", stderr: "warn\n", timed_out: false })
    assert.match(report.ok.id, /^cmd-/u)
  })

  it("a command past its timeout is killed and says so", async () => {
    const report = await py(
      `r = nodus.Client().sandbox("${project}", "box").exec(["sleep", "30"], timeout=0.5)\nreport(lambda: [r.timed_out, r.signal])`,
      env
    )
    assert.deepStrictEqual(report.ok, [true, "SIGKILL"])
  })

  it("write_file and read_file round-trip bytes; a command sees the file; a missing one is NotFoundError", async () => {
    const report = await py(
      `
box = nodus.Client().sandbox("${project}", "box")
data = bytes(range(256)) * 4
box.write_file("/workspace/sub/data.bin", data)
seen = box.exec(["sh", "-c", "wc -c < /workspace/sub/data.bin"]).stdout.strip()
box.write_file("notes.txt", "written as text")
def missing():
    try:
        box.read_file("/workspace/absent")
    except nodus.NotFoundError as e:
        return [e.status_code, e.code]
report(lambda: {"same": box.read_file("/workspace/sub/data.bin") == data, "size": seen, "text": box.read_file("/workspace/notes.txt").decode(), "missing": missing()})
`,
      env
    )
    assert.deepStrictEqual(report.ok, { same: true, size: "1024", text: "written as text", missing: [404, "NotFound"] })
  })

  it("a Sandbox that is not Running yet: SandboxStarting is retried, then raised as the class the registry gives it", async () => {
    const report = await py(
      `
c = nodus.Client(max_retries=1)
c.create("sandboxes", "${project}", {"kind": "Sandbox", "metadata": {"name": "waiting"}, "spec": {"image": "debian:12", "resources": {"cpu": "512"}}})
report(lambda: c.sandbox("${project}", "waiting").exec(["true"]))
`,
      env
    )
    assert.strictEqual(report.error, "APIError")
    assert.strictEqual(report.status_code, 409)
    assert.strictEqual(report.code, "SandboxStarting")
    assert.strictEqual(report.retry_after, 1)
  })
})

describe("a Job's log through the Python client", () => {
  it("reads the log of index 0 once the Job ran", async () => {
    const created = await py(
      `report(lambda: nodus.Client().create("jobs", "${project}", {"kind": "Job", "metadata": {"name": "hello"}, "spec": {"image": "debian:12", "command": ["sh", "-c", "echo hello from the python client; echo on stderr >&2"], "backoffLimit": 0}})["metadata"]["name"])`,
      env
    )
    assert.strictEqual(created.ok, "hello", JSON.stringify(created))
    await eventually(
      "hello ended",
      async () => ["Succeeded", "Failed"].includes((await phaseOf("jobs", "hello")) ?? ""),
      { timeoutMs: 20_000 }
    )
    assert.strictEqual(await phaseOf("jobs", "hello"), "Succeeded")
    const report = await py(
      `c = nodus.Client()\nreport(lambda: [c.job("${project}", "hello").logs(), c.job("${project}", "hello").logs(index=0, tail_lines=1)])`,
      env
    )
    assert.include(report.ok[0], "hello from the python client")
    assert.include(report.ok[0], "on stderr")
    assert.strictEqual(report.ok[1], "on stderr\n")
  })
})
