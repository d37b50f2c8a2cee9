// Secret values never come back through a Secret's metadata (docs/secrets.md, "Values are write-only"): kubectl's
// client-side apply copies the whole manifest into the last-applied annotation, so the server drops spec.data from it;
// a label or annotation holding a value the write carries is refused; server-side apply's managedFields name no
// value. Checked on every read path — the write's answer, GET, LIST, Table, watch — and in the store's change log.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { assertStatus, causeFields, createProject, openWatch, v1 } from "./Support.ts"

const secretsPath = (project: string) => `${v1}/namespaces/${project}/secrets`
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"
const value = "hunter2-5f0c9e1d"
const rotated = "rotated-8a7b6c5d"

/** The manifest as kubectl's client-side apply sends it: the annotation holds the manifest itself, values included. */
const applied = (name: string, data: Record<string, string>, metadata: Record<string, unknown> = {}) => {
  const manifest = {
    apiVersion: "nodus.dev/v1",
    kind: "Secret",
    metadata: { name, namespace: "sec-meta", ...metadata },
    spec: { data }
  }
  return {
    ...manifest,
    metadata: { ...manifest.metadata, annotations: { [lastApplied]: `${JSON.stringify(manifest)}\n` } }
  }
}

describe("secret values in metadata", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, "sec-meta")
  })
  afterAll(() => server.stop())

  /** Every way the API reads the Secrets of the project, and every change the store logged: none may hold a value. */
  const assertNowhere = async (...values: ReadonlyArray<string>) => {
    const path = secretsPath("sec-meta")
    const reads = [
      await request(server, "GET", `${path}/db`),
      await request(server, "GET", path),
      await request(server, "GET", path, { headers: { accept: tableAccept } }),
      await request(server, "GET", `${path}?includeObject=Object`, { headers: { accept: tableAccept } })
    ]
    const changes = await server.withStore((store) =>
      Effect.map(store.changes(0, 10_000), (page) => JSON.stringify(page.changes))
    )
    for (const text of [...reads.map((reply) => reply.text), changes]) {
      for (const secret of values) assert.notInclude(text, secret)
    }
  }

  it("drops spec.data from kubectl's last-applied annotation on create and update, keeping the rest of it", async () => {
    const watch = await openWatch(server, `${secretsPath("sec-meta")}?watch=true`)
    try {
      const created = await request(server, "POST", secretsPath("sec-meta"), {
        body: applied("db", { password: value }, { labels: { app: "web" } })
      })
      assert.strictEqual(created.status, 201, created.text)
      assert.notInclude(created.text, value)
      const annotation = created.body.metadata.annotations[lastApplied]
      assert.deepStrictEqual(JSON.parse(annotation), {
        apiVersion: "nodus.dev/v1",
        kind: "Secret",
        metadata: { name: "db", namespace: "sec-meta", labels: { app: "web" } },
        spec: {}
      })
      assert.isTrue(annotation.endsWith("\n"), "kubectl's trailing newline is kept")
      // The second apply: kubectl's merge patch carries the new values and the new annotation.
      const patched = await request(server, "PATCH", `${secretsPath("sec-meta")}/db`, {
        body: {
          metadata: {
            annotations: { [lastApplied]: applied("db", { password: rotated }).metadata.annotations[lastApplied] }
          },
          spec: { data: { password: rotated } }
        },
        contentType: "application/merge-patch+json"
      })
      assert.strictEqual(patched.status, 200, patched.text)
      assert.strictEqual(patched.body.status.latestVersion, 2)
      assert.notInclude(patched.text, rotated)
      const events = await watch.next(2)
      assert.deepStrictEqual(events.map((event) => event.type), ["ADDED", "MODIFIED"])
      for (const secret of [value, rotated]) assert.notInclude(JSON.stringify(events), secret)
    } finally {
      await watch.close()
    }
    await assertNowhere(value, rotated)
  })

  it("keeps of the annotation no field the schema drops: a Kubernetes Secret's data or stringData, under fieldValidation=Ignore", async () => {
    const manifest = {
      apiVersion: "nodus.dev/v1",
      kind: "Secret",
      metadata: { name: "ported" },
      data: { password: Buffer.from(value).toString("base64") },
      spec: { type: "Opaque", stringData: { token: rotated } }
    }
    const body = { ...manifest, metadata: { name: "ported", annotations: { [lastApplied]: JSON.stringify(manifest) } } }
    const created = await request(server, "POST", `${secretsPath("sec-meta")}?fieldValidation=Ignore`, { body })
    assert.strictEqual(created.status, 201, created.text)
    assert.deepStrictEqual(JSON.parse(created.body.metadata.annotations[lastApplied]), {
      apiVersion: "nodus.dev/v1",
      kind: "Secret",
      metadata: { name: "ported" },
      spec: { type: "Opaque" }
    })
    for (const secret of [rotated, Buffer.from(value).toString("base64")]) assert.notInclude(created.text, secret)
  })

  it("refuses a label or annotation that holds a value the write carries, without echoing it", async () => {
    const cases: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
      ["an annotation equal to a value", { annotations: { note: value } }, "metadata.annotations[note]"],
      ["a manifest kept by another tool", {
        annotations: { "tool.example.com/manifest": JSON.stringify({ spec: { data: { password: value } } }) }
      }, "metadata.annotations[tool.example.com/manifest]"],
      ["a label equal to a value", { labels: { leaked: "abc123" } }, "metadata.labels[leaked]"]
    ]
    for (const [label, metadata, field] of cases) {
      const body = { metadata: { name: "leaky", ...metadata }, spec: { data: { password: value, pin: "abc123" } } }
      const reply = await request(server, "POST", secretsPath("sec-meta"), { body })
      const status = assertStatus(server, reply, 422, "Invalid")
      assert.deepStrictEqual(causeFields(status), [field], label)
      for (const secret of [value, "abc123"]) assert.notInclude(reply.text, secret, label)
    }
    // An annotation that merely mentions a value's key, or holds another string, is fine.
    const fine = await request(server, "POST", secretsPath("sec-meta"), {
      body: {
        metadata: { name: "fine", annotations: { note: "password rotates monthly" } },
        spec: { data: { password: value } }
      }
    })
    assert.strictEqual(fine.status, 201, fine.text)
  })

  it("server-side apply records key names in managedFields at most, never a value", async () => {
    const path = `${secretsPath("sec-meta")}/ssa?fieldManager=deployer`
    const configuration =
      `apiVersion: nodus.dev/v1\nkind: Secret\nmetadata:\n  name: ssa\nspec:\n  data:\n    token: ${value}\n`
    const created = await request(server, "PATCH", path, {
      raw: configuration,
      contentType: "application/apply-patch+yaml"
    })
    assert.strictEqual(created.status, 201, created.text)
    assert.notInclude(created.text, value)
    const again = await request(server, "PATCH", path, {
      raw: configuration.replace(value, rotated),
      contentType: "application/apply-patch+yaml"
    })
    assert.strictEqual(again.status, 200, again.text)
    assert.strictEqual(again.body.status.latestVersion, 2)
    assert.notInclude(again.text, rotated)
    await assertNowhere(value, rotated)
  })
})
