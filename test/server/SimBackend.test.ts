// The sim backend behind the API server (docs/simulator.md, "The sim backend"): Jobs created over HTTP go through
// their phases on simulated capacity; the test clock moves simulated time; Attempts, core/v1 Events, the internal
// event stream and the Offering catalog are written through the ordinary API machinery.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Layer } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { defaultFeedOptions } from "../../src/store/ChangeFeed.ts"
import * as SqlStore from "../../src/store/SqlStore.ts"
import {
  assertStatus,
  causeFields,
  createJob,
  createProject,
  jobPath,
  mergePatch,
  sleep,
  v1
} from "../apiserver/api/Support.ts"
import { eventually } from "../support/Eventually.ts"
import { type Reply, request, startTestServer, type TestServer } from "../support/TestServer.ts"

const clockPath = `${v1}/simulation/clock`

const advance = async (server: TestServer, body: unknown, token?: string): Promise<Reply> =>
  request(server, "POST", clockPath, { body, ...(token === undefined ? {} : { token }) })

const advanced = async (server: TestServer, by: string): Promise<any> => {
  const reply = await advance(server, { advance: by })
  assert.strictEqual(reply.status, 200, reply.text)
  return reply.body
}

const readJob = async (server: TestServer, project: string, name: string): Promise<any> => {
  const reply = await request(server, "GET", jobPath(project, name))
  assert.strictEqual(reply.status, 200, reply.text)
  return reply.body
}

const attemptsOf = async (server: TestServer, project: string, job: any): Promise<ReadonlyArray<any>> => {
  const reply = await request(server, "GET", `${v1}/namespaces/${project}/attempts`)
  assert.strictEqual(reply.status, 200, reply.text)
  return (reply.body.items as ReadonlyArray<any>).filter((attempt) =>
    attempt.metadata.ownerReferences?.some((owner: any) => owner.uid === job.metadata.uid)
  )
}

/** The Job's events as `kubectl describe` finds them: by field selector on the involved object. */
const eventsOf = async (server: TestServer, project: string, job: any): Promise<ReadonlyArray<any>> => {
  const selector =
    `involvedObject.kind=Job,involvedObject.name=${job.metadata.name},involvedObject.namespace=${project},involvedObject.uid=${job.metadata.uid}`
  const reply = await request(
    server,
    "GET",
    `/api/v1/namespaces/${project}/events?fieldSelector=${encodeURIComponent(selector)}`
  )
  assert.strictEqual(reply.status, 200, reply.text)
  assert.strictEqual(reply.body.kind, "EventList")
  return reply.body.items
}

const annotated = (annotations: Record<string, string>) => ({ annotations })

describe("sim backend", () => {
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer({ sim: { speed: 1 } })
    await createProject(server, "sim")
  })
  afterAll(() => server.stop())

  describe("test clock", () => {
    it("reads the simulated time, which starts at the wall clock", async () => {
      const reply = await request(server, "GET", clockPath)
      assert.strictEqual(reply.status, 200, reply.text)
      assert.strictEqual(reply.body.kind, "SimulationClock")
      assert.strictEqual(reply.body.apiVersion, "nodus.dev/v1")
      assert.strictEqual(reply.body.speed, 1)
      assert.isAtLeast(Date.parse(reply.body.now), Date.now() - 60_000)
    })

    it("moves forward by a duration or to an instant, and the server's own times follow", async () => {
      const before = Date.parse((await request(server, "GET", clockPath)).body.now)
      const by = await advanced(server, "1h")
      assert.isAtLeast(Date.parse(by.now), before + 3_600_000)
      const target = new Date(Date.parse(by.now) + 90 * 60_000).toISOString()
      const to = await advance(server, { to: target })
      assert.strictEqual(to.status, 200, to.text)
      assert.isAtLeast(Date.parse(to.body.now), Date.parse(target))
      // metadata.creationTimestamp comes from the same clock (second precision).
      const job = await createJob(server, "sim", "after-advance", annotated({ "sim.nodus.dev/duration": "1m" }))
      assert.isAtLeast(Date.parse(job.metadata.creationTimestamp), Date.parse(target) - 1_000)
    })

    it("refuses bad requests with Invalid and the field at fault", async () => {
      const now = Date.parse((await request(server, "GET", clockPath)).body.now)
      const rows: ReadonlyArray<readonly [unknown, ReadonlyArray<string>]> = [
        [{}, ["advance"]],
        [{ advance: "soon" }, ["advance"]],
        [{ advance: -5 }, ["advance"]],
        [{ advance: "-5m" }, ["advance"]],
        [{ advance: "9000h" }, ["advance"]],
        [{ to: "yesterday" }, ["to"]],
        [{ to: new Date(now - 3_600_000).toISOString() }, ["to"]],
        [{ advance: "1m", to: new Date(now + 60_000).toISOString() }, ["to"]],
        [{ advance: "1m", speed: 2 }, ["speed"]],
        [[], [""]]
      ]
      for (const [body, fields] of rows) {
        const reply = await advance(server, body)
        const status = assertStatus(server, reply, 422, "Invalid")
        assert.deepStrictEqual(causeFields(status), fields, JSON.stringify(body))
        assert.include(status.fix, "advance", JSON.stringify(body))
      }
      assertStatus(
        server,
        await request(server, "POST", clockPath, { raw: "{", contentType: "application/json" }),
        400,
        "BadRequest"
      )
      assertStatus(
        server,
        await request(server, "PUT", clockPath, { body: { advance: "1m" } }),
        405,
        "MethodNotAllowed"
      )
      assertStatus(server, await request(server, "GET", `/apis/nodus.dev/v1beta1/simulation/clock`), 404, "NotFound")
      assertStatus(server, await request(server, "GET", clockPath, { token: null }), 401, "Unauthorized")
    })

    it("is described in the v1 OpenAPI document", async () => {
      const reply = await request(server, "GET", "/openapi/v3/apis/nodus.dev/v1")
      assert.strictEqual(reply.status, 200, reply.text)
      const item = reply.body.paths["/apis/nodus.dev/v1/simulation/clock"]
      assert.deepStrictEqual(Object.keys(item).sort(), ["get", "post"])
      assert.deepStrictEqual(item.post.requestBody.content["application/json"].schema, {
        $ref: "#/components/schemas/SimulationClockRequest"
      })
      assert.deepStrictEqual(Object.keys(reply.body.components.schemas.SimulationClockRequest.properties), [
        "advance",
        "to"
      ])
    })

    it("is moved by admins only; any key reads it", async () => {
      const account = await request(server, "POST", `${v1}/namespaces/sim/serviceaccounts`, {
        body: {
          apiVersion: "nodus.dev/v1",
          kind: "ServiceAccount",
          metadata: { name: "ci" },
          spec: { scopes: ["*:write"] }
        }
      })
      assert.strictEqual(account.status, 201, account.text)
      const issued = await request(server, "POST", `${v1}/namespaces/sim/serviceaccounts/ci/tokens`, { body: {} })
      assert.strictEqual(issued.status, 201, issued.text)
      const token = issued.body.status.token as string
      assert.strictEqual((await request(server, "GET", clockPath, { token })).status, 200)
      const refused = assertStatus(server, await advance(server, { advance: "1m" }, token), 403, "Forbidden")
      assert.include(refused.message, "admin")
    })
  })

  describe("a Job's life", () => {
    it("runs to Succeeded with an Attempt, its placement explanation, Events and job.succeeded on the stream", async () => {
      const created = await createJob(server, "sim", "train", annotated({ "sim.nodus.dev/duration": "10m" }))
      await eventually(
        "the Job to be picked up",
        () => readJob(server, "sim", "train"),
        { until: (job) => job.status?.phase !== undefined }
      )
      await advanced(server, "15m")
      const job = await readJob(server, "sim", "train")
      assert.strictEqual(job.status.phase, "Succeeded", JSON.stringify(job.status))
      assert.strictEqual(job.status.reason, "Completed")
      assert.strictEqual(job.status.succeeded, 1)
      assert.strictEqual(job.status.completedIndexes, "0")
      assert.strictEqual(job.status.observedGeneration, 1)
      const started = Date.parse(job.status.startTime)
      const completed = Date.parse(job.status.completionTime)
      assert.strictEqual(completed - started, 10 * 60_000, "the program ran for its 10m of work")
      assert.isAtLeast(started, Date.parse(created.metadata.creationTimestamp))

      const attempts = await attemptsOf(server, "sim", job)
      assert.lengthOf(attempts, 1)
      const [attempt] = attempts
      assert.strictEqual(attempt.metadata.name, "train-0-1")
      assert.deepStrictEqual(attempt.spec, {
        workload: { kind: "Job", name: "train", uid: job.metadata.uid },
        index: 0,
        epoch: 1
      })
      assert.strictEqual(attempt.metadata.labels["nodus.dev/job"], "train")
      assert.strictEqual(attempt.status.phase, "Succeeded")
      assert.strictEqual(attempt.status.exitCode, 0)
      assert.strictEqual(attempt.status.offering, job.status.placement.offering)
      assert.strictEqual(attempt.status.rateUSDPerHour, job.status.placement.rateUSDPerHour)
      assert.strictEqual(attempt.status.placement.chosen.offering, job.status.placement.offering)
      assert.isTrue(
        attempt.status.placement.candidates.some((candidate: any) =>
          candidate.verdict === "Chosen" && candidate.offering === attempt.status.offering
        )
      )
      assert.strictEqual(attempt.status.endTime, job.status.completionTime)

      const events = await eventsOf(server, "sim", job)
      assert.includeMembers(events.map((event) => event.reason), ["Provisioning", "Running", "Completed"])
      for (const event of events) {
        assert.strictEqual(event.apiVersion, "v1")
        assert.strictEqual(event.kind, "Event")
        assert.deepStrictEqual(event.involvedObject, {
          apiVersion: "nodus.dev/v1",
          kind: "Job",
          name: "train",
          namespace: "sim",
          uid: job.metadata.uid
        })
        assert.strictEqual(event.type, "Normal")
        assert.strictEqual(event.count, 1)
        assert.strictEqual(event.source.component, "nodus-runtime")
        assert.strictEqual(event.reportingComponent, "nodus-runtime")
        assert.isString(event.eventTime)
      }
      const completedEvent = events.find((event) => event.reason === "Completed")
      assert.strictEqual(Date.parse(completedEvent.lastTimestamp), Math.floor(completed / 1000) * 1000)

      const streamed = (await server.streamed()).filter((entry) => entry.data.object.metadata.uid === job.metadata.uid)
      assert.deepStrictEqual(streamed.map((entry) => entry.type), ["job.succeeded"])
      const [succeeded] = streamed
      assert.strictEqual(succeeded!.timestamp, job.status.completionTime)
      assert.deepStrictEqual(succeeded!.data.object.metadata, {
        name: "train",
        namespace: "sim",
        uid: job.metadata.uid
      })
      assert.strictEqual(succeeded!.data.object.status["phase"], "Succeeded")
      assert.deepStrictEqual(succeeded!.data.event, {
        reason: "Completed",
        message: "All 1 indexes succeeded.",
        count: 1
      })

      // The backend's own status writes never feed back into the simulation: a finished Job stays put.
      await sleep(400)
      assert.strictEqual((await readJob(server, "sim", "train")).metadata.resourceVersion, job.metadata.resourceVersion)
    })

    it("fails a Job whose program exits 1 with backoffLimit 0 (BackoffLimitExceeded), with a Warning event and job.failed", async () => {
      await createJob(
        server,
        "sim",
        "broken",
        annotated({ "sim.nodus.dev/duration": "2m", "sim.nodus.dev/exit-code": "1" }),
        { backoffLimit: 0 }
      )
      await advanced(server, "15m")
      const job = await readJob(server, "sim", "broken")
      assert.strictEqual(job.status.phase, "Failed", JSON.stringify(job.status))
      assert.strictEqual(job.status.reason, "BackoffLimitExceeded")
      assert.strictEqual(job.status.failed, 1)
      const [attempt] = await attemptsOf(server, "sim", job)
      assert.strictEqual(attempt.status.phase, "Failed")
      assert.strictEqual(attempt.status.reason, "Error")
      assert.strictEqual(attempt.status.exitCode, 1)
      const failed = (await eventsOf(server, "sim", job)).find((event) => event.reason === "BackoffLimitExceeded")
      assert.strictEqual(failed?.type, "Warning")
      assert.isTrue(
        (await server.streamed()).some((entry) =>
          entry.type === "job.failed" && entry.data.object.metadata.uid === job.metadata.uid
        )
      )
    })

    it("suspends on spec.state Suspended and resumes on Running", async () => {
      await createJob(server, "sim", "long", annotated({ "sim.nodus.dev/duration": "2h" }))
      await advanced(server, "10m")
      assert.strictEqual((await readJob(server, "sim", "long")).status.phase, "Running")
      const suspend = await mergePatch(server, jobPath("sim", "long"), { spec: { state: "Suspended" } })
      assert.strictEqual(suspend.status, 200, suspend.text)
      await advanced(server, "5m")
      const suspended = await readJob(server, "sim", "long")
      assert.strictEqual(suspended.status.phase, "Suspended", JSON.stringify(suspended.status))
      assert.strictEqual(suspended.status.observedGeneration, suspended.metadata.generation)
      assert.strictEqual(suspended.status.active, 0)
      const resume = await mergePatch(server, jobPath("sim", "long"), { spec: { state: "Running" } })
      assert.strictEqual(resume.status, 200, resume.text)
      await advanced(server, "10m")
      const resumed = await readJob(server, "sim", "long")
      assert.strictEqual(resumed.status.phase, "Running", JSON.stringify(resumed.status))
      assert.isString(resumed.status.suspendedDuration)
      await advanced(server, "3h")
      const done = await readJob(server, "sim", "long")
      assert.strictEqual(done.status.phase, "Succeeded", JSON.stringify(done.status))
      const reasons = (await eventsOf(server, "sim", done)).map((event) => event.reason)
      assert.includeMembers(reasons, ["Provisioning", "Running", "Suspending", "Suspended", "Completed"])
      const attempts = await attemptsOf(server, "sim", done)
      assert.isAtLeast(attempts.length, 2)
      assert.isTrue(
        attempts.some((attempt) => attempt.status.phase === "Interrupted" && attempt.status.reason === "Stopped")
      )
    })

    it("shows the phases as they happen at speed 1, without moving the clock", async () => {
      await createJob(server, "sim", "watched", annotated({ "sim.nodus.dev/duration": "1m" }))
      const job = await eventually(
        "the Job to be provisioned",
        () => readJob(server, "sim", "watched"),
        { until: (read) => read.status?.phase === "Provisioning" }
      )
      assert.strictEqual(job.status.observedGeneration, 1)
    })

    it("deletes a finished Job after ttlSecondsAfterFinished, and its Attempts and Events with it", async () => {
      const job = await createJob(server, "sim", "ephemeral", annotated({ "sim.nodus.dev/duration": "1m" }), {
        ttlSecondsAfterFinished: 60
      })
      await advanced(server, "15m")
      assertStatus(server, await request(server, "GET", jobPath("sim", "ephemeral")), 404, "NotFound")
      await eventually(
        "the Attempts and Events to be collected",
        async () => [...await attemptsOf(server, "sim", job), ...await eventsOf(server, "sim", job)],
        { until: (left) => left.length === 0 }
      )
    })
  })

  describe("events", () => {
    it("lists as kubectl asks: a Table with Kubernetes' event columns, and all projects at /api/v1/events", async () => {
      const reply = await request(server, "GET", "/api/v1/namespaces/sim/events", {
        headers: { accept: "application/json;as=Table;v=v1;g=meta.k8s.io" }
      })
      assert.strictEqual(reply.status, 200, reply.text)
      assert.deepStrictEqual(
        reply.body.columnDefinitions.filter((column: any) => column.priority === 0).map((column: any) => column.name),
        ["Last Seen", "Type", "Reason", "Object", "Message"]
      )
      assert.isTrue(reply.body.rows.some((row: any) => row.cells[3] === "job/train" && row.cells[2] === "Completed"))
      const all = await request(server, "GET", "/api/v1/events")
      assert.strictEqual(all.status, 200, all.text)
      assert.isAbove(all.body.items.length, 0)
    })

    it("are read-only, and an unknown field selector is refused", async () => {
      const event = (await request(server, "GET", "/api/v1/namespaces/sim/events")).body.items[0]
      assert.strictEqual(
        (await request(server, "GET", `/api/v1/namespaces/sim/events/${event.metadata.name}`)).status,
        200
      )
      assertStatus(
        server,
        await request(server, "POST", "/api/v1/namespaces/sim/events", { body: event }),
        405,
        "MethodNotAllowed"
      )
      assertStatus(
        server,
        await request(server, "DELETE", `/api/v1/namespaces/sim/events/${event.metadata.name}`),
        405,
        "MethodNotAllowed"
      )
      assertStatus(
        server,
        await request(server, "GET", "/api/v1/namespaces/sim/events?fieldSelector=spec.x%3Dy"),
        400,
        "BadRequest"
      )
    })
  })

  describe("offerings", () => {
    it("lists the catalog with availability and the pricebook, without provider names", async () => {
      const reply = await request(server, "GET", `${v1}/offerings`)
      assert.strictEqual(reply.status, 200, reply.text)
      const items = reply.body.items as ReadonlyArray<any>
      assert.isAbove(items.length, 50)
      for (const offering of items) {
        assert.isBoolean(offering.status.available, offering.metadata.name)
        assert.isString(offering.status.pricebookVersion)
        assert.strictEqual(offering.spec.providerClass, "Datacenter")
        assert.notMatch(JSON.stringify(offering), /lambda|aws/iu)
      }
      assertStatus(
        server,
        await request(server, "POST", `${v1}/offerings`, { body: items[0] }),
        405,
        "MethodNotAllowed"
      )
    })
  })
})

describe("server without the sim backend", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer()
  })
  afterAll(() => server.stop())

  it("has no test clock", async () => {
    const body = assertStatus(server, await request(server, "GET", clockPath), 404, "NotFound")
    assert.include(body.fix, "--backend sim")
  })
})

describe("sim backend behind a change feed it falls behind", () => {
  let server: TestServer
  beforeAll(async () => {
    // A follower more than 4 changes behind loses its place (the server's own writes of an advance are many more).
    server = await startTestServer({ sim: { speed: 1 }, feed: { ...defaultFeedOptions, subscriberLag: 4 } })
    await createProject(server, "lag")
  })
  afterAll(() => server.stop())

  it("reads every Job again and keeps simulating", async () => {
    for (const name of ["a", "b", "c"]) {
      await createJob(server, "lag", name, annotated({ "sim.nodus.dev/duration": "5m" }))
    }
    await advanced(server, "10m")
    await createJob(server, "lag", "late", annotated({ "sim.nodus.dev/duration": "5m" }))
    await eventually(
      "the late Job to be picked up",
      () => readJob(server, "lag", "late"),
      { until: (job) => job.status?.phase !== undefined, timeoutMs: 10_000 }
    )
    await advanced(server, "10m")
    for (const name of ["a", "b", "c", "late"]) {
      assert.strictEqual((await readJob(server, "lag", name)).status.phase, "Succeeded", name)
    }
  })
})

describe("sim backend across a restart", () => {
  it(
    "resumes simulated time where it was, recovers a Job whose run was lost with the process, and leaves finished Jobs be",
    async () => {
      const directory = join(mkdtempSync(join(tmpdir(), "nodus-sim-restart-")), "pglite")
      const start = () => startTestServer({ sim: { speed: 1 }, store: Layer.fresh(SqlStore.layerPglite(directory)) })
      const first = await start()
      let before: number
      let finished: any
      try {
        await createProject(first, "restart")
        await createJob(first, "restart", "survivor", annotated({ "sim.nodus.dev/duration": "30m" }))
        await createJob(first, "restart", "done", annotated({ "sim.nodus.dev/duration": "3m" }), {
          recovery: { checkpoint: { interval: "1m" } }
        })
        before = Date.parse((await advanced(first, "10m")).now)
        assert.strictEqual((await readJob(first, "restart", "survivor")).status.phase, "Running")
        finished = await readJob(first, "restart", "done")
        assert.strictEqual(finished.status.phase, "Succeeded")
        assert.isAbove(finished.status.checkpoint.seq, 0)
      } finally {
        await first.stop()
      }
      const second = await start()
      try {
        const clock = await request(second, "GET", clockPath)
        assert.isAtLeast(Date.parse(clock.body.now), before!)
        await advanced(second, "1h")
        const job = await readJob(second, "restart", "survivor")
        assert.strictEqual(job.status.phase, "Succeeded", JSON.stringify(job.status))
        const attempts = await attemptsOf(second, "restart", job)
        const lost = attempts.find((attempt) => attempt.metadata.name === "survivor-0-1")
        assert.strictEqual(lost?.status.phase, "Interrupted")
        assert.strictEqual(lost?.status.reason, "NodeLost")
        assert.isTrue(
          attempts.some((attempt) => attempt.metadata.name === "survivor-0-2" && attempt.status.phase === "Succeeded")
        )
        const still = await readJob(second, "restart", "done")
        assert.deepStrictEqual(still.status, finished.status)
        assert.strictEqual(still.metadata.resourceVersion, finished.metadata.resourceVersion)
      } finally {
        await second.stop()
      }
    },
    60_000
  )
})
