/**
 * Admission on live hosts (docs/jobs.md, "Admission"; issue 29, item 14): what could only fail at every start is
 * refused at create, with the field and a fix — a Job with no command (programs run on the host's userland, where an
 * image's default command is not known) and a memory floor no host could ever hold — while the simulator, whose
 * images run as simulated, takes a Job without command.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { assertStatus, causeFields, createProject, jobBody, jobsPath } from "../apiserver/api/Support.ts"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

const project = "admitted"
let live: TestServer

beforeAll(async () => {
  live = await startTestServer({ local: true })
  await createProject(live, project)
}, 60_000)

afterAll(() => live?.stop())

const create = (server: TestServer, name: string, spec: Record<string, unknown>) =>
  request(server, "POST", jobsPath(project), { body: jobBody(name, {}, spec) })

describe("a Job a live host could never run is refused at create", () => {
  it("no command: 422 at spec.command, saying what to set; nothing is stored", async () => {
    const body = assertStatus(live, await create(live, "nocommand", {}), 422, "Invalid")
    assert.deepStrictEqual(causeFields(body), ["spec.command"])
    assert.include(body.details.causes[0].message, "[\"python\", \"train.py\"]")
    assert.strictEqual((await request(live, "GET", `${jobsPath(project)}/nocommand`)).status, 404)
    // Arguments alone are a command line too.
    const args = await create(live, "args", { args: ["true"] })
    assert.strictEqual(args.status, 201, args.text)
  })

  it("a memory floor beyond any host: 422 at spec.resources.memory, naming this host's memory", async () => {
    // The server's own host joins as a Node: then the largest available is its offering.
    const offered = async () =>
      (await request(live, "POST", `${jobsPath(project)}?dryRun=All`, {
        body: jobBody("probe", {}, { command: ["true"] })
      })).body?.status?.estimate?.placementPreview?.offering
    await eventually("an offering of the local Node", offered, {
      until: (offering) => offering !== undefined,
      timeoutMs: 20_000
    })
    const body = assertStatus(
      live,
      await create(live, "huge", { command: ["true"], resources: { memory: "99999999999999999999Ei" } }),
      422,
      "Invalid"
    )
    assert.deepStrictEqual(causeFields(body), ["spec.resources.memory"])
    assert.match(
      body.details.causes[0].message,
      /no offering could ever hold it; the largest available has \d+Gi memory/u
    )
    assert.include(body.fix, "spec.resources.memory at most")
  })
})

describe("under the simulator", () => {
  it("a Job without command is admitted: a simulated image's default command runs", async () => {
    const simulated = await startTestServer({ sim: { speed: 1 } })
    try {
      await createProject(simulated, project)
      const reply = await create(simulated, "nocommand", {})
      assert.strictEqual(reply.status, 201, reply.text)
    } finally {
      await simulated.stop()
    }
  })
})
