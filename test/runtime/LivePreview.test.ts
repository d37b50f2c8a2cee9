/**
 * The placement preview reads live capacity (docs/billing.md, "Estimates"): in sim mode a Job's estimate is placed on
 * what the sim backend has free at the request, so a Job whose cheapest variant is taken previews the next one, and
 * one whose every variant is taken warns NoCapacityNow; without a sim backend the preview sees the fleet free.
 */
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { createProject, jobsPath, v1 } from "../apiserver/api/Support.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

// Two single-GPU H100 offerings in the us; the first is the cheaper.
const cheap = "h100-pcie-80gb-1x-us-41651579"
const dear = "h100-sxm-80gb-1x-us-13c99b9f"

const job = (name: string, offerings: ReadonlyArray<string>, duration = "30m") => ({
  apiVersion: "nodus.dev/v1",
  kind: "Job",
  metadata: { name, annotations: { "sim.nodus.dev/duration": duration } },
  spec: {
    image: "ghcr.io/acme/train:1",
    resources: { gpu: { type: ["H100"], count: 1 } },
    placement: { offerings },
    expectedDuration: "30m"
  }
})

const preview = async (server: TestServer, project: string) => {
  const reply = await request(server, "POST", `${jobsPath(project)}?dryRun=All`, { body: job("train", [cheap, dear]) })
  assert.strictEqual(reply.status, 201, reply.text)
  const estimate = reply.body.status.estimate
  return {
    offering: estimate.placementPreview.offering as string,
    rate: estimate.rateUSDPerHour as string,
    warnings: (estimate.warnings as ReadonlyArray<{ code: string }>).map((warning) => warning.code)
  }
}

/** A Job that holds the one host of `offering` for ten hours, placed before this returns. */
const occupy = async (server: TestServer, project: string, name: string, offering: string) => {
  const created = await request(server, "POST", jobsPath(project), { body: job(name, [offering], "10h") })
  assert.strictEqual(created.status, 201, created.text)
  // The test clock reads the store first: the Job is placed, and its host taken, when it answers.
  const moved = await request(server, "POST", `${v1}/simulation/clock`, { body: { advance: "1s" } })
  assert.strictEqual(moved.status, 200, moved.text)
}

describe("the placement preview in sim mode", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer({ sim: { speed: 1, hostsPerVariant: 1 } })
    await createProject(server, "live")
  })
  afterAll(() => server.stop())

  it("moves to the next variant when the cheapest is taken, and warns NoCapacityNow when every one is", async () => {
    const free = await preview(server, "live")
    assert.deepStrictEqual({ offering: free.offering, rate: free.rate }, { offering: cheap, rate: "2.49" })
    assert.notInclude(free.warnings, "NoCapacityNow")

    await occupy(server, "live", "first", cheap)
    const next = await preview(server, "live")
    assert.deepStrictEqual({ offering: next.offering, rate: next.rate }, { offering: dear, rate: "3.29" })
    assert.notInclude(next.warnings, "NoCapacityNow")

    await occupy(server, "live", "second", dear)
    const none = await preview(server, "live")
    // The Job would queue for the best match.
    assert.include(none.warnings, "NoCapacityNow")
    assert.strictEqual(none.offering, cheap)
  })
})

describe("the placement preview without a sim backend", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, "fleet")
  })
  afterAll(() => server.stop())

  it("sees the fleet's hosts free, whatever was created", async () => {
    for (const name of ["first", "second"]) {
      const created = await request(server, "POST", jobsPath("fleet"), { body: job(name, [cheap], "10h") })
      assert.strictEqual(created.status, 201, created.text)
    }
    const free = await preview(server, "fleet")
    assert.deepStrictEqual({ offering: free.offering, rate: free.rate }, { offering: cheap, rate: "2.49" })
    assert.notInclude(free.warnings, "NoCapacityNow")
  })
})
