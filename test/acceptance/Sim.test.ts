/**
 * Acceptance: the real kubectl against a server with the sim backend (docs/simulator.md, "The sim backend"), as the
 * README's Quick start uses it. A Job applied with a duration annotation runs when the test clock moves
 * (`kubectl create --raw`), and `get`, `describe`, `get events`, `get attempts` and `get offerings` show it.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { eventually } from "../support/Eventually.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"
import { api, kubectl, parseTable, requireKubectl, show, startKubectl } from "./Clients.ts"

let server: TestServer

beforeAll(async () => {
  requireKubectl()
  server = await startTestServer({ tls: true, sim: { speed: 1 } })
})
afterAll(() => server?.stop())

const file = (name: string, text: string): string => {
  const path = join(server.directory, name)
  writeFileSync(path, text)
  return path
}

const jobManifest = [
  "apiVersion: nodus.dev/v1",
  "kind: Job",
  "metadata:",
  "  name: train-1",
  "  namespace: demo",
  "  annotations:",
  "    sim.nodus.dev/duration: 10m",
  "spec:",
  "  image: python:3.12",
  "  command: [python, -c, \"print(42)\"]",
  ""
].join("\n")

const ok = async (args: ReadonlyArray<string>) => {
  const result = await kubectl(server, args)
  assert.strictEqual(result.code, 0, show(result))
  return result
}

describe("the sim backend through kubectl", () => {
  it("runs an applied Job to Succeeded when the clock moves, with its events, attempts and the offerings", async () => {
    await ok(["create", "namespace", "demo"])
    const applied = await ok(["apply", "-f", file("job.yaml", jobManifest)])
    assert.include(applied.stdout, "job.nodus.dev/train-1 created")

    const clock = await ok(["get", "--raw", "/apis/nodus.dev/v1/simulation/clock"])
    assert.strictEqual(JSON.parse(clock.stdout).kind, "SimulationClock")
    const moved = await ok([
      "create",
      "--raw",
      "/apis/nodus.dev/v1/simulation/clock",
      "-f",
      file("advance.json", JSON.stringify({ advance: "15m" }))
    ])
    assert.isAtLeast(Date.parse(JSON.parse(moved.stdout).now), Date.parse(JSON.parse(clock.stdout).now) + 15 * 60_000)

    const jobs = parseTable((await ok(["get", "jobs.nodus.dev", "-n", "demo"])).stdout)
    assert.deepStrictEqual(jobs.map((row) => [row["NAME"], row["PHASE"], row["SUCCEEDED"]]), [[
      "train-1",
      "Succeeded",
      "1"
    ]])

    const events = parseTable((await ok(["get", "events", "-n", "demo"])).stdout)
    const ofJob = events.filter((row) => row["OBJECT"] === "job/train-1")
    assert.includeMembers(
      ofJob.map((row) => row["REASON"]),
      ["Provisioning", "Running", "Completed"],
      JSON.stringify(events)
    )
    assert.isTrue(ofJob.every((row) => row["TYPE"] === "Normal"))

    const described = await ok(["describe", "jobs.nodus.dev", "train-1", "-n", "demo"])
    assert.match(described.stdout, /Events:[\s\S]*Completed[\s\S]*All 1 indexes succeeded/u)
    assert.include(described.stdout, "nodus-runtime")

    const attempts = parseTable((await ok(["get", "attempts", "-n", "demo"])).stdout)
    assert.deepStrictEqual(attempts.map((row) => [row["NAME"], row["PHASE"]]), [["train-1-0-1", "Succeeded"]])
    const attempt = JSON.parse((await ok(["get", "attempts", "train-1-0-1", "-n", "demo", "-o", "json"])).stdout)
    assert.strictEqual(attempt.status.placement.chosen.offering, attempt.status.offering)

    const offerings = parseTable((await ok(["get", "offerings"])).stdout)
    assert.isTrue(offerings.some((row) => row["NAME"] === attempt.status.offering), "the chosen offering is listed")

    // The same state, read past kubectl.
    const reply = await api(server, "GET", "/apis/nodus.dev/v1/namespaces/demo/jobs/train-1")
    assert.strictEqual(reply.body.status.phase, "Succeeded", reply.text)
  })

  it("shows every phase to `get -w` while the clock moves", async () => {
    await ok(["apply", "-f", file("watched.yaml", jobManifest.replace("train-1", "watched").replace("10m", "20m"))])
    const watcher = startKubectl(server, [
      "get",
      "jobs.nodus.dev",
      "watched",
      "-n",
      "demo",
      "-w",
      "-o",
      "custom-columns=NAME:.metadata.name,PHASE:.status.phase"
    ])
    try {
      await eventually("the initial row", () => /^watched\s/mu.test(watcher.stdout()), { timeoutMs: 15_000 })
      await ok([
        "create",
        "--raw",
        "/apis/nodus.dev/v1/simulation/clock",
        "-f",
        file("advance-30m.json", JSON.stringify({ advance: "30m" }))
      ])
      await eventually("the Succeeded row", () => /Succeeded/u.test(watcher.stdout()), { timeoutMs: 15_000 })
    } finally {
      await watcher.stop()
    }
    const phases = parseTable(watcher.stdout()).map((row) => row["PHASE"])
    assert.includeMembers(phases, ["Provisioning", "Running", "Succeeded"], watcher.stdout())
    assert.strictEqual(phases.at(-1), "Succeeded")
  })

  it("refuses a bad clock request with the field at fault", async () => {
    const result = await kubectl(server, [
      "create",
      "--raw",
      "/apis/nodus.dev/v1/simulation/clock",
      "-f",
      file("bad.json", JSON.stringify({ advance: "soon" }))
    ])
    assert.notStrictEqual(result.code, 0, show(result))
    assert.include(result.stderr, "advance", show(result))
  })
})
