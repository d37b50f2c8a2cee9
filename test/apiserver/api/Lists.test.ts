// Lists over real HTTP (spec: Generic operations, List envelope; kubectl-compat §4): the full label-selector syntax,
// field selectors and their "field label not supported" error, paging with limit/continue/remainingItemCount, the list
// envelope (kind, resourceVersion), all-projects lists, missing projects, cluster-scoped kinds, resourceVersion checks,
// and lists longer than a page (streamed without a limit, capped at a page with one).
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { listPageSize } from "../../../src/apiserver/Resources.ts"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { assertStatus, createJob, createProject, jobPath, jobsPath, mergePatch, namesOf, rv, v1 } from "./Support.ts"

const selectorProject = "lists-labels"

/** The labelled objects every selector case runs against. */
const labelled: ReadonlyArray<{ readonly name: string; readonly labels: Record<string, string> }> = [
  { name: "a", labels: { team: "a", tier: "gold", n: "1" } },
  { name: "b", labels: { team: "b", tier: "silver", n: "2" } },
  { name: "c", labels: { team: "a", n: "3" } },
  { name: "d", labels: { team: "c", gone: "yes", n: "10" } },
  { name: "e", labels: {} }
]

const selectorCases: ReadonlyArray<{ readonly selector: string; readonly names: ReadonlyArray<string> }> = [
  { selector: "", names: ["a", "b", "c", "d", "e"] },
  { selector: "team=a", names: ["a", "c"] },
  { selector: "team==a", names: ["a", "c"] },
  { selector: "team!=a", names: ["b", "d", "e"] },
  { selector: "team in (a,b)", names: ["a", "b", "c"] },
  { selector: "team in (a, b)", names: ["a", "b", "c"] },
  { selector: "team notin (a,b)", names: ["d", "e"] },
  { selector: "tier", names: ["a", "b"] },
  { selector: "!tier", names: ["c", "d", "e"] },
  { selector: "n>1", names: ["b", "c", "d"] },
  { selector: "n<3", names: ["a", "b"] },
  { selector: "n>2,n<11", names: ["c", "d"] },
  { selector: "team=a,tier=gold", names: ["a"] },
  { selector: "team in (a),!tier", names: ["c"] },
  { selector: "team,!gone", names: ["a", "b", "c"] },
  { selector: "team=zzz", names: [] },
  { selector: "team=", names: [] },
  { selector: "team!=,tier", names: ["a", "b"] }
]

const invalidSelectors: ReadonlyArray<string> = ["team in (a", "team=a=b", "!", "n>x", "bad key!=1", "team notin a"]

describe("lists", () => {
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, selectorProject)
    for (const object of labelled) await createJob(server, selectorProject, object.name, { labels: object.labels })
  })
  afterAll(() => server.stop())

  describe("labelSelector", () => {
    for (const testCase of selectorCases) {
      it(`"${testCase.selector}" selects [${testCase.names.join(", ")}]`, async () => {
        const reply = await request(
          server,
          "GET",
          `${jobsPath(selectorProject)}?labelSelector=${encodeURIComponent(testCase.selector)}`
        )
        assert.deepStrictEqual(namesOf(reply), testCase.names, reply.text)
      })
    }

    for (const selector of invalidSelectors) {
      it(`"${selector}" is a BadRequest`, async () => {
        const reply = await request(
          server,
          "GET",
          `${jobsPath(selectorProject)}?labelSelector=${encodeURIComponent(selector)}`
        )
        assertStatus(server, reply, 400, "BadRequest")
      })
    }

    it("selectors work on all-projects lists with paging too", async () => {
      const first = await request(
        server,
        "GET",
        `${v1}/jobs?labelSelector=${encodeURIComponent("team in (a,b)")}&limit=2`
      )
      assert.deepStrictEqual(namesOf(first), ["a", "b"])
      assert.isString(first.body.metadata.continue)
      const second = await request(
        server,
        "GET",
        `${v1}/jobs?labelSelector=${encodeURIComponent("team in (a,b)")}&limit=2&continue=${
          encodeURIComponent(first.body.metadata.continue)
        }`
      )
      assert.deepStrictEqual(namesOf(second), ["c"])
      assert.isUndefined(second.body.metadata.continue)
    })
  })

  describe("fieldSelector", () => {
    it("metadata.name selects one object, != excludes it", async () => {
      assert.deepStrictEqual(
        namesOf(await request(server, "GET", `${jobsPath(selectorProject)}?fieldSelector=metadata.name%3Db`)),
        ["b"]
      )
      assert.deepStrictEqual(
        namesOf(await request(server, "GET", `${jobsPath(selectorProject)}?fieldSelector=metadata.name%3D%3Db`)),
        ["b"]
      )
      assert.deepStrictEqual(
        namesOf(await request(server, "GET", `${jobsPath(selectorProject)}?fieldSelector=metadata.name!%3Db`)),
        ["a", "c", "d", "e"]
      )
      assert.deepStrictEqual(
        namesOf(await request(server, "GET", `${jobsPath(selectorProject)}?fieldSelector=metadata.name%3Dnone`)),
        []
      )
    })

    it("field and label selectors combine", async () => {
      const reply = await request(
        server,
        "GET",
        `${jobsPath(selectorProject)}?fieldSelector=metadata.name!%3Da&labelSelector=team%3Da`
      )
      assert.deepStrictEqual(namesOf(reply), ["c"])
    })

    it("metadata.namespace narrows an all-projects list", async () => {
      await createProject(server, "lists-ns-one")
      await createProject(server, "lists-ns-two")
      await createJob(server, "lists-ns-one", "x")
      await createJob(server, "lists-ns-two", "y")
      const reply = await request(server, "GET", `${v1}/jobs?fieldSelector=metadata.namespace%3Dlists-ns-two`)
      assert.deepStrictEqual(namesOf(reply), ["y"])
      assert.strictEqual(reply.body.items[0].metadata.namespace, "lists-ns-two")
      const excluded = await request(server, "GET", `${v1}/jobs?fieldSelector=metadata.namespace!%3Dlists-ns-two`)
      const namespaces = new Set(excluded.body.items.map((item: any) => item.metadata.namespace))
      assert.isTrue(namespaces.has("lists-ns-one"))
      assert.isFalse(namespaces.has("lists-ns-two"))
    })

    it("status.phase selects on the written status", async () => {
      await createProject(server, "lists-phase")
      for (const name of ["p", "q", "r"]) await createJob(server, "lists-phase", name)
      for (const [name, phase] of [["p", "Running"], ["q", "Succeeded"], ["r", "Running"]] as const) {
        const written = await mergePatch(server, `${jobPath("lists-phase", name)}/status`, { status: { phase } })
        assert.strictEqual(written.status, 200, written.text)
      }
      assert.deepStrictEqual(
        namesOf(await request(server, "GET", `${jobsPath("lists-phase")}?fieldSelector=status.phase%3DRunning`)),
        ["p", "r"]
      )
      assert.deepStrictEqual(
        namesOf(await request(server, "GET", `${jobsPath("lists-phase")}?fieldSelector=status.phase!%3DRunning`)),
        ["q"]
      )
    })

    it("an unsupported field label is a BadRequest with the message kubectl prints", async () => {
      const reply = await request(server, "GET", `${jobsPath(selectorProject)}?fieldSelector=spec.image%3Dx`)
      const body = assertStatus(server, reply, 400, "BadRequest")
      assert.include(body.message, "field label not supported: spec.image")
    })

    it("a malformed field selector is a BadRequest", async () => {
      assertStatus(
        server,
        await request(server, "GET", `${jobsPath(selectorProject)}?fieldSelector=metadata.name`),
        400,
        "BadRequest"
      )
    })
  })

  describe("paging", () => {
    it("limit=2 with continue pages through 5 objects in name order", async () => {
      await createProject(server, "lists-paging")
      const names = ["p-e", "p-c", "p-a", "p-d", "p-b"]
      for (const name of names) await createJob(server, "lists-paging", name)
      const pages: Array<ReadonlyArray<string>> = []
      const remaining: Array<number | undefined> = []
      let token: string | undefined
      let listVersion: string | undefined
      for (let page = 0; page < 10; page++) {
        const reply = await request(
          server,
          "GET",
          `${jobsPath("lists-paging")}?limit=2${token === undefined ? "" : `&continue=${encodeURIComponent(token)}`}`
        )
        pages.push(namesOf(reply))
        remaining.push(reply.body.metadata.remainingItemCount)
        listVersion ??= reply.body.metadata.resourceVersion
        token = reply.body.metadata.continue
        if (token === undefined) break
        assert.isString(token)
        assert.isAbove(token.length, 0)
      }
      assert.deepStrictEqual(pages, [["p-a", "p-b"], ["p-c", "p-d"], ["p-e"]])
      assert.deepStrictEqual(remaining, [3, 1, undefined])
      const union = pages.flat()
      assert.strictEqual(new Set(union).size, union.length)
      assert.deepStrictEqual([...union].sort(), [...names].sort())
      assert.isString(listVersion)
    })

    it("an object created between pages does not disturb the pages already served", async () => {
      await createProject(server, "lists-paging-live")
      for (const name of ["a", "c", "e"]) await createJob(server, "lists-paging-live", name)
      const first = await request(server, "GET", `${jobsPath("lists-paging-live")}?limit=2`)
      assert.deepStrictEqual(namesOf(first), ["a", "c"])
      await createJob(server, "lists-paging-live", "b")
      const second = await request(
        server,
        "GET",
        `${jobsPath("lists-paging-live")}?limit=2&continue=${encodeURIComponent(first.body.metadata.continue)}`
      )
      const seen = [...namesOf(first), ...namesOf(second)]
      assert.include(seen, "e")
      assert.strictEqual(new Set(seen).size, seen.length)
    })

    it("limit larger than the list returns everything without continue", async () => {
      const reply = await request(server, "GET", `${jobsPath(selectorProject)}?limit=500`)
      assert.deepStrictEqual(namesOf(reply), ["a", "b", "c", "d", "e"])
      assert.isUndefined(reply.body.metadata.continue)
      assert.isUndefined(reply.body.metadata.remainingItemCount)
    })

    /** A continue token as the server makes one (base64url of [resourceVersion, project, name]), with any version. */
    const forgedToken = (resourceVersion: string) =>
      Buffer.from(JSON.stringify([resourceVersion, selectorProject, "a"])).toString("base64url")
    const badParameters: ReadonlyArray<string> = [
      "continue=not-a-token",
      "continue=%25%25%25",
      "limit=abc",
      "resourceVersion=abc",
      "resourceVersion=-1",
      // 2^64: one past the largest uint64 Kubernetes parses.
      "resourceVersion=18446744073709551616",
      "resourceVersion=99999999999999999999999",
      `continue=${forgedToken("99999999999999999999999")}`,
      `continue=${forgedToken("1")}&resourceVersion=1`
    ]
    for (const parameter of badParameters) {
      it(`${parameter} is a BadRequest`, async () => {
        assertStatus(
          server,
          await request(server, "GET", `${jobsPath(selectorProject)}?${parameter}`),
          400,
          "BadRequest"
        )
      })
    }

    it("a resourceVersion up to 2^64 - 1 is accepted (the latest state is never older than it asks)", async () => {
      for (const resourceVersion of ["0", "1", "18446744073709551615"]) {
        assert.deepStrictEqual(
          namesOf(await request(server, "GET", `${jobsPath(selectorProject)}?resourceVersion=${resourceVersion}`)),
          ["a", "b", "c", "d", "e"]
        )
      }
    })
  })

  describe("envelope", () => {
    it("kind is JobList, apiVersion the group version, resourceVersion a string at least every item's", async () => {
      const reply = await request(server, "GET", jobsPath(selectorProject))
      assert.strictEqual(reply.status, 200, reply.text)
      assert.strictEqual(reply.body.kind, "JobList")
      assert.strictEqual(reply.body.apiVersion, "nodus.dev/v1")
      const listVersion = reply.body.metadata.resourceVersion
      assert.isString(listVersion)
      assert.match(listVersion, /^[0-9]+$/u)
      const items = reply.body.items as ReadonlyArray<any>
      assert.strictEqual(items.length, labelled.length)
      for (const item of items) {
        assert.isAtLeast(Number(listVersion), rv(item))
        assert.strictEqual(item.kind, "Job")
        assert.strictEqual(item.apiVersion, "nodus.dev/v1")
      }
    })

    it("the list resourceVersion moves past a later write", async () => {
      await createProject(server, "lists-rv")
      const before = await request(server, "GET", jobsPath("lists-rv"))
      const created = await createJob(server, "lists-rv", "j")
      const after = await request(server, "GET", jobsPath("lists-rv"))
      assert.isAbove(Number(after.body.metadata.resourceVersion), Number(before.body.metadata.resourceVersion))
      assert.isAtLeast(Number(after.body.metadata.resourceVersion), rv(created))
    })

    it("an empty list still has kind, items [] and a resourceVersion", async () => {
      await createProject(server, "lists-empty")
      const reply = await request(server, "GET", jobsPath("lists-empty"))
      assert.strictEqual(reply.status, 200, reply.text)
      assert.strictEqual(reply.body.kind, "JobList")
      assert.deepStrictEqual(reply.body.items, [])
      assert.isString(reply.body.metadata.resourceVersion)
    })
  })

  describe("scope", () => {
    it("the all-projects list spans projects", async () => {
      await createProject(server, "lists-all-one")
      await createProject(server, "lists-all-two")
      await createJob(server, "lists-all-one", "first")
      await createJob(server, "lists-all-two", "second")
      const reply = await request(server, "GET", `${v1}/jobs`)
      assert.strictEqual(reply.status, 200, reply.text)
      assert.strictEqual(reply.body.kind, "JobList")
      const keys = (reply.body.items as ReadonlyArray<any>).map((item) =>
        `${item.metadata.namespace}/${item.metadata.name}`
      )
      assert.include(keys, "lists-all-one/first")
      assert.include(keys, "lists-all-two/second")
      assert.include(keys, `${selectorProject}/a`)
    })

    it("a list in a missing project is NotFound", async () => {
      const body = assertStatus(
        server,
        await request(server, "GET", jobsPath("lists-no-such-project")),
        404,
        "NotFound"
      )
      assert.include(body.message, "lists-no-such-project")
    })

    it("cluster-scoped budgets list and create without a project segment", async () => {
      const created = await request(server, "POST", `${v1}/budgets`, {
        body: {
          apiVersion: "nodus.dev/v1",
          kind: "Budget",
          metadata: { name: "lists-budget" },
          spec: { amountUSD: "100", period: "Monthly" }
        }
      })
      assert.strictEqual(created.status, 201, created.text)
      assert.isUndefined(created.body.metadata.namespace)
      const read = await request(server, "GET", `${v1}/budgets/lists-budget`)
      assert.strictEqual(read.status, 200, read.text)
      const list = await request(server, "GET", `${v1}/budgets`)
      assert.strictEqual(list.body.kind, "BudgetList")
      assert.include(namesOf(list), "lists-budget")
    })

    const projectSegmentOnCluster: ReadonlyArray<{ readonly method: string; readonly path: string }> = [
      { method: "GET", path: `${v1}/namespaces/x/budgets` },
      { method: "GET", path: `${v1}/namespaces/x/budgets/lists-budget` },
      { method: "POST", path: `${v1}/namespaces/x/budgets` }
    ]
    for (const testCase of projectSegmentOnCluster) {
      it(`${testCase.method} ${testCase.path} is NotFound`, async () => {
        const reply = await request(
          server,
          testCase.method,
          testCase.path,
          testCase.method === "POST"
            ? { body: { apiVersion: "nodus.dev/v1", kind: "Budget", metadata: { name: "nested" }, spec: {} } }
            : {}
        )
        assertStatus(server, reply, 404, "NotFound")
      })
    }

    it("a namespaced item without a project segment is NotFound", async () => {
      assertStatus(server, await request(server, "GET", `${v1}/jobs/a`), 404, "NotFound")
    })
  })
})

describe("lists longer than a page", () => {
  let server: TestServer
  const project = "lists-streamed"
  const names = Array.from({ length: listPageSize + 1 }, (_, index) => `j${String(index).padStart(4, "0")}`)
  const table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, project)
    for (let start = 0; start < names.length; start += 25) {
      await Promise.all(names.slice(start, start + 25).map((name) => createJob(server, project, name)))
    }
  })
  afterAll(() => server.stop())

  it("an unpaged list is written as it is read, page after page, in the bytes JSON.stringify makes of the whole List", async () => {
    const reply = await request(server, "GET", jobsPath(project))
    assert.deepStrictEqual(namesOf(reply), names)
    assert.isNull(reply.headers.get("content-length"), "a streamed body has no Content-Length")
    assert.strictEqual(
      reply.text,
      JSON.stringify({
        apiVersion: "nodus.dev/v1",
        kind: "JobList",
        metadata: { resourceVersion: reply.body.metadata.resourceVersion },
        items: reply.body.items
      })
    )
  })

  it("an unpaged Table is written page after page too, one row per object", async () => {
    const reply = await request(server, "GET", jobsPath(project), { headers: { accept: table } })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.isNull(reply.headers.get("content-length"))
    assert.strictEqual(reply.body.kind, "Table")
    assert.deepStrictEqual((reply.body.rows as ReadonlyArray<any>).map((row) => row.cells[0]), names)
    assert.strictEqual(reply.text, JSON.stringify(reply.body))
  })

  it(`a limit above ${listPageSize} is served as ${listPageSize} with a continue token`, async () => {
    const first = await request(server, "GET", `${jobsPath(project)}?limit=${2 * listPageSize}`)
    assert.deepStrictEqual(namesOf(first), names.slice(0, listPageSize))
    assert.strictEqual(first.body.metadata.remainingItemCount, 1)
    const rest = await request(
      server,
      "GET",
      `${jobsPath(project)}?limit=${2 * listPageSize}&continue=${encodeURIComponent(first.body.metadata.continue)}`
    )
    assert.deepStrictEqual(namesOf(rest), names.slice(listPageSize))
    assert.isUndefined(rest.body.metadata.continue)
  })
})
