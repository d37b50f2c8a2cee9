/**
 * Acceptance: the official Python Kubernetes client (python3-kubernetes 22.6.0, DynamicClient) against a whole nodus
 * server over TLS with the server's CA. `python/dynamic_client.py` runs every step (a project, then create, get,
 * list with selectors, merge patch, status patch, replace, dry-run create, delete and a watch of nodus.dev/v1 Job)
 * and prints one JSON report; each step is asserted here, and the end state is checked again through raw HTTPS.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { join } from "node:path"
import { errorCodes } from "../../src/core/meta/ErrorCodes.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"
import { api, python, requirePythonClient, show } from "./Clients.ts"

const script = join(import.meta.dirname, "python", "dynamic_client.py")

describe("Python DynamicClient", () => {
  let server: TestServer
  let report: any

  beforeAll(async () => {
    await requirePythonClient()
    server = await startTestServer({ tls: true })
    const result = await python(script, [
      server.url,
      server.token,
      server.caPath!,
      join(server.directory, "python-discovery.json")
    ])
    assert.strictEqual(result.code, 0, show(result))
    report = JSON.parse(result.stdout)
  })
  afterAll(() => server?.stop())

  it("creates a project through the core v1 Namespace resource", () => {
    assert.deepStrictEqual(report.namespace, { created: "py-demo", fetched: "py-demo", phase: "Active" })
  })

  it("creates and gets a job", () => {
    assert.strictEqual(report.create.name, "py-job")
    assert.strictEqual(report.create.namespace, "py-demo")
    assert.isString(report.create.resourceVersion)
    assert.deepStrictEqual(report.get, {
      name: "py-job",
      uid: report.create.uid,
      image: "python:3.12",
      kind: "Job",
      apiVersion: "nodus.dev/v1"
    })
  })

  it("a duplicate create raises ConflictError 409 with reason AlreadyExists", () => {
    assert.deepStrictEqual(report.duplicate, {
      status: 409,
      type: "ConflictError",
      reason: "AlreadyExists",
      message: `jobs.nodus.dev "py-job" already exists; fix: ${errorCodes.AlreadyExists.fix}`,
      kind: "Status"
    })
  })

  it("lists with label and field selectors", () => {
    assert.strictEqual(report.list.kind, "JobList")
    assert.deepStrictEqual(report.list.names, ["py-job", "py-other"])
    assert.deepStrictEqual(report.list.labelSelected, ["py-other"])
    assert.deepStrictEqual(report.list.fieldSelected, ["py-job"])
    assert.deepStrictEqual(report.list.bothSelected, [])
    assert.deepStrictEqual(report.list.allProjects, ["py-demo/py-job", "py-demo/py-other"])
  })

  it("merge-patches spec and labels", () => {
    assert.deepStrictEqual(report.patch, {
      backoffLimit: 2,
      labels: { team: "a", stage: "patched" },
      fetchedBackoffLimit: 2,
      fetchedImage: "python:3.12",
      generation: 2
    })
  })

  it("patches the status subresource, which ignores spec", () => {
    assert.deepStrictEqual(report.statusPatch, {
      phase: "Running",
      fetchedPhase: "Running",
      fetchedImage: "python:3.12",
      fetchedBackoffLimit: 2,
      generation: 2
    })
  })

  it("replaces with the fetched object, and a stale resourceVersion conflicts", () => {
    assert.strictEqual(report.replace.backoffLimit, 5)
    assert.strictEqual(report.replace.fetchedBackoffLimit, 5)
    assert.isTrue(report.replace.resourceVersionChanged)
    assert.strictEqual(report.replace.stale.status, 409)
    assert.strictEqual(report.replace.stale.type, "ConflictError")
    assert.strictEqual(report.replace.stale.reason, "Conflict")
  })

  it("a dry-run create answers with the object and persists nothing", () => {
    assert.strictEqual(report.dryRun.name, "py-dry")
    assert.strictEqual(report.dryRun.image, "python:3.12")
    assert.strictEqual(report.dryRun.after.status, 404)
    assert.strictEqual(report.dryRun.after.type, "NotFoundError")
    assert.strictEqual(report.dryRun.after.reason, "NotFound")
  })

  it("deletes, and a second delete or a get raises NotFoundError 404", () => {
    assert.deepStrictEqual(report.delete.after, {
      status: 404,
      type: "NotFoundError",
      reason: "NotFound",
      message: `jobs.nodus.dev "py-other" not found; fix: ${errorCodes.NotFound.fix}`,
      kind: "Status"
    })
    assert.strictEqual(report.delete.again.status, 404)
    assert.strictEqual(report.delete.again.reason, "NotFound")
    assert.deepStrictEqual(report.delete.remaining, ["py-job"])
  })

  it("watches ADDED, MODIFIED and DELETED in order", () => {
    assert.isTrue(report.watch.finished)
    assert.deepStrictEqual(report.watch.events, [
      { type: "ADDED", name: "py-watched", image: "python:3.12", backoffLimit: null },
      { type: "MODIFIED", name: "py-watched", image: "python:3.12", backoffLimit: 3 },
      { type: "DELETED", name: "py-watched", image: "python:3.12", backoffLimit: 3 }
    ])
  })

  it("leaves the server in the state the script reported", async () => {
    const list = await api(server, "GET", "/apis/nodus.dev/v1/namespaces/py-demo/jobs")
    assert.strictEqual(list.status, 200, list.text)
    const items = list.body.items
    assert.deepStrictEqual(items.map((item: any) => item.metadata.name), ["py-job"])
    assert.strictEqual(items[0].spec.image, "python:3.12")
    assert.strictEqual(items[0].spec.backoffLimit, 5)
    assert.strictEqual(items[0].status.phase, "Running")
    assert.strictEqual(items[0].metadata.labels.stage, "patched")
  })
})
