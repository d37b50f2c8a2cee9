// Discovery, OpenAPI and Table output over real HTTP, as kubectl and the Python client ask for them (kubectl-compat
// §2, §3, §5): /version without credentials, legacy and aggregated /apis, the group-version resource lists, the
// OpenAPI v3 index and documents, the empty protobuf /openapi/v2, and server-side Tables for lists and items.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { assertStatus, createJob, createProject, jobPath, jobsPath, v1 } from "./Support.ts"

const aggregatedAccept =
  "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
const aggregatedContentType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
const tableAccept =
  "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

describe("discovery", () => {
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, "disc")
    await createJob(server, "disc", "beta")
    await createJob(server, "disc", "alpha", { labels: { team: "a" } })
  })
  afterAll(() => server.stop())

  it("/version answers without a token, with minor \"32\"", async () => {
    const reply = await request(server, "GET", "/version", { token: null })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.body.major, "1")
    assert.strictEqual(reply.body.minor, "32")
    assert.isString(reply.body.gitVersion)
    assert.isString(reply.body.platform)
  })

  const protectedPaths: ReadonlyArray<string> = [
    "/apis",
    "/api",
    "/api/v1",
    `${v1}`,
    "/openapi/v3",
    "/openapi/v3/apis/nodus.dev/v1"
  ]
  for (const path of protectedPaths) {
    it(`${path} without a token is Unauthorized`, async () => {
      assertStatus(server, await request(server, "GET", path, { token: null }), 401, "Unauthorized")
    })
  }

  it("/apis in the legacy form lists nodus.dev with its preferred version among its versions", async () => {
    const reply = await request(server, "GET", "/apis", { headers: { accept: "application/json" } })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.headers.get("content-type")?.split(";")[0], "application/json")
    assert.strictEqual(reply.body.kind, "APIGroupList")
    const group = (reply.body.groups as ReadonlyArray<any>).find((candidate) => candidate.name === "nodus.dev")
    assert.isObject(group, reply.text)
    assert.deepStrictEqual(group.preferredVersion, { groupVersion: "nodus.dev/v1", version: "v1" })
    assert.deepInclude(group.versions, group.preferredVersion)
    assert.deepInclude(group.versions, { groupVersion: "nodus.dev/v1beta1", version: "v1beta1" })
  })

  it("/apis with kubectl's aggregated Accept answers an APIGroupDiscoveryList with the exact Content-Type", async () => {
    const reply = await request(server, "GET", "/apis", { headers: { accept: aggregatedAccept } })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.headers.get("content-type"), aggregatedContentType)
    assert.strictEqual(reply.body.kind, "APIGroupDiscoveryList")
    assert.strictEqual(reply.body.apiVersion, "apidiscovery.k8s.io/v2")
    const group = (reply.body.items as ReadonlyArray<any>).find((item) => item.metadata?.name === "nodus.dev")
    assert.isObject(group, reply.text)
    assert.strictEqual(group.versions[0].version, "v1")
    const jobs = (group.versions[0].resources as ReadonlyArray<any>).find((resource) => resource.resource === "jobs")
    assert.strictEqual(jobs?.scope, "Namespaced")
    assert.deepStrictEqual(jobs?.responseKind, { group: "nodus.dev", version: "v1", kind: "Job" })
    assert.isTrue((jobs.subresources as ReadonlyArray<any>).some((subresource) => subresource.subresource === "status"))
    const budgets = (group.versions[0].resources as ReadonlyArray<any>).find((resource) =>
      resource.resource === "budgets"
    )
    assert.strictEqual(budgets?.scope, "Cluster")
  })

  it("/api with the aggregated Accept is aggregated too", async () => {
    const reply = await request(server, "GET", "/api", { headers: { accept: aggregatedAccept } })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.headers.get("content-type"), aggregatedContentType)
    assert.strictEqual(reply.body.kind, "APIGroupDiscoveryList")
  })

  it("/apis/nodus.dev/v1 lists jobs, jobs/status and cluster-scoped budgets, but no v1beta1 kinds", async () => {
    const reply = await request(server, "GET", v1)
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.body.kind, "APIResourceList")
    assert.strictEqual(reply.body.groupVersion, "nodus.dev/v1")
    const byName = new Map((reply.body.resources as ReadonlyArray<any>).map((resource) => [resource.name, resource]))
    const jobs = byName.get("jobs")
    assert.isObject(jobs)
    assert.strictEqual(jobs.kind, "Job")
    assert.isTrue(jobs.namespaced)
    assert.includeMembers(jobs.verbs, ["create", "delete", "get", "list", "patch", "update", "watch"])
    const status = byName.get("jobs/status")
    assert.isObject(status)
    assert.strictEqual(status.kind, "Job")
    assert.sameMembers(status.verbs, ["get", "patch", "update"])
    assert.isFalse(byName.get("budgets")?.namespaced)
    assert.isFalse(byName.has("trainingjobs"))
    // Read-only kinds advertise only what they allow.
    assert.sameMembers(byName.get("attempts")?.verbs ?? [], ["get", "list", "watch"])
  })

  it("/apis/nodus.dev/v1beta1 lists trainingjobs, and an unknown version is NotFound", async () => {
    const beta = await request(server, "GET", "/apis/nodus.dev/v1beta1")
    assert.strictEqual(beta.status, 200, beta.text)
    const names = (beta.body.resources as ReadonlyArray<any>).map((resource) => resource.name)
    assert.include(names, "trainingjobs")
    assert.notInclude(names, "jobs")
    assertStatus(server, await request(server, "GET", "/apis/nodus.dev/v2"), 404, "NotFound")
  })

  it("/api/v1 lists namespaces", async () => {
    const reply = await request(server, "GET", "/api/v1")
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.body.kind, "APIResourceList")
    assert.strictEqual(reply.body.groupVersion, "v1")
    const namespaces = (reply.body.resources as ReadonlyArray<any>).find((resource) => resource.name === "namespaces")
    assert.isObject(namespaces, reply.text)
    assert.strictEqual(namespaces.kind, "Namespace")
    assert.isFalse(namespaces.namespaced)
  })

  it("/openapi/v3 indexes one document per group version", async () => {
    const reply = await request(server, "GET", "/openapi/v3")
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.headers.get("content-type")?.split(";")[0], "application/json")
    assert.strictEqual(reply.body.paths?.["apis/nodus.dev/v1"]?.serverRelativeURL, "/openapi/v3/apis/nodus.dev/v1")
    assert.strictEqual(
      reply.body.paths?.["apis/nodus.dev/v1beta1"]?.serverRelativeURL,
      "/openapi/v3/apis/nodus.dev/v1beta1"
    )
  })

  for (const version of ["v1", "v1beta1"]) {
    it(`/openapi/v3/apis/nodus.dev/${version} is an OpenAPI 3.0.3 document`, async () => {
      const index = await request(server, "GET", "/openapi/v3")
      const relative = index.body.paths[`apis/nodus.dev/${version}`].serverRelativeURL as string
      const reply = await request(server, "GET", relative)
      assert.strictEqual(reply.status, 200, reply.text.slice(0, 500))
      assert.strictEqual(reply.headers.get("content-type")?.split(";")[0], "application/json")
      assert.strictEqual(reply.body.openapi, "3.0.3")
      assert.isObject(reply.body.info)
      assert.isAbove(Object.keys(reply.body.paths).length, 0)
    })
  }

  it("the v1 document's PATCH operations carry the GVK and a fieldValidation parameter, and no strategic merge", async () => {
    const reply = await request(server, "GET", "/openapi/v3/apis/nodus.dev/v1")
    const item = reply.body.paths["/apis/nodus.dev/v1/namespaces/{namespace}/jobs/{name}"]
    assert.isObject(item, Object.keys(reply.body.paths).slice(0, 10).join(", "))
    const gvk = item.patch?.["x-kubernetes-group-version-kind"]
    assert.deepStrictEqual(Array.isArray(gvk) ? gvk[0] : gvk, { group: "nodus.dev", version: "v1", kind: "Job" })
    const parameters = [...(item.parameters ?? []), ...(item.patch?.parameters ?? [])].map((parameter: any) =>
      parameter.name ?? parameter.$ref ?? ""
    )
    assert.isTrue(parameters.some((name: string) => name.includes("fieldValidation")), JSON.stringify(parameters))
    assert.notInclude(reply.text, "application/strategic-merge-patch+json")
  })

  it("/openapi/v2 answers 200 with an empty body", async () => {
    const reply = await request(server, "GET", "/openapi/v2", {
      headers: { accept: "application/com.github.proto-openapi.spec.v2@v1.0+protobuf" }
    })
    assert.strictEqual(reply.status, 200)
    assert.strictEqual(reply.text, "")
  })

  it("a Table Accept on a list answers a Table whose rows start with the names", async () => {
    const reply = await request(server, "GET", `${jobsPath("disc")}?limit=500`, { headers: { accept: tableAccept } })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.body.kind, "Table")
    assert.strictEqual(reply.body.apiVersion, "meta.k8s.io/v1")
    assert.strictEqual(reply.body.columnDefinitions[0].name, "Name")
    assert.strictEqual(reply.body.columnDefinitions[0].format, "name")
    const rows = reply.body.rows as ReadonlyArray<any>
    assert.strictEqual(rows.length, 2)
    assert.deepStrictEqual(rows.map((row) => row.cells[0]), ["alpha", "beta"])
    for (const row of rows) {
      assert.strictEqual(row.cells.length, reply.body.columnDefinitions.length)
      assert.strictEqual(row.object.kind, "PartialObjectMetadata")
      assert.strictEqual(row.object.apiVersion, "meta.k8s.io/v1")
      assert.strictEqual(row.object.metadata.namespace, "disc")
    }
    assert.deepStrictEqual(rows[0].object.metadata.labels, { team: "a" })
    assert.isString(reply.body.metadata.resourceVersion)
  })

  it("a Table Accept on an item answers a one-row Table", async () => {
    const reply = await request(server, "GET", jobPath("disc", "alpha"), { headers: { accept: tableAccept } })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.body.kind, "Table")
    assert.strictEqual(reply.body.rows.length, 1)
    assert.strictEqual(reply.body.rows[0].cells[0], "alpha")
  })

  it("includeObject=Object puts the whole object in each row; a bad value is a BadRequest", async () => {
    const reply = await request(server, "GET", `${jobsPath("disc")}?includeObject=Object`, {
      headers: { accept: tableAccept }
    })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.body.rows[0].object.kind, "Job")
    assert.strictEqual(reply.body.rows[0].object.spec.image, "python:3.12")
    assertStatus(
      server,
      await request(server, "GET", `${jobsPath("disc")}?includeObject=Everything`, {
        headers: { accept: tableAccept }
      }),
      400,
      "BadRequest"
    )
  })

  it("plain application/json gets the list, not a Table", async () => {
    const reply = await request(server, "GET", jobsPath("disc"), { headers: { accept: "application/json" } })
    assert.strictEqual(reply.body.kind, "JobList")
  })
})
