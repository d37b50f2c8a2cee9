/**
 * A Sandbox's box against what its own user does (issue 29, item 3), with a real in-process agent and real bubblewrap:
 * an output flood does not kill the supervisor (it waits for the agent to read instead of failing a write), and when
 * the supervisor dies all the same (the box's user can kill it: it has the same rights), the box's /workspace stays
 * on its host and the Sandbox's next box there starts from it (KeptWorkspaces.ts).
 */
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { chmodSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Agent } from "../../../src/backends/live/Agent.ts"
import { type SupervisorRequest, supervisorScript } from "../../../src/backends/live/BoxSupervisor.ts"
import type { LiveCapacity } from "../../../src/backends/live/LiveCapacity.ts"
import type { BoxReply, BoxRequest, ProgramRequest, WorkloadProgram } from "../../../src/core/capacity/Capacity.ts"
import { variantsOf } from "../../../src/core/capacity/Offering.ts"
import { execRequest } from "../../support/BoxRequests.ts"
import { eventually } from "../../support/Eventually.ts"
import { removeTree } from "../../support/RemoveTree.ts"
import { makeLiveHost } from "./LiveHost.ts"

const GiB = 1024 ** 3
const owner = "survivor-uid"

const workload: WorkloadProgram = {
  image: "tools",
  argv: [],
  workingDir: "/workspace",
  env: [],
  secrets: [],
  egress: "Deny",
  memoryBytes: undefined,
  init: undefined,
  checkpoint: { paths: ["/workspace"], maxBytes: GiB },
  sandbox: true,
  keepWorkspace: true
}

let dir: string
let capacity: LiveCapacity
let agent: Agent

const facts = (attempt: string) => Effect.runSync(capacity.port.facts(owner, attempt))!

const start = async (attempt: string, number: number) => {
  const variant = variantsOf(capacity.catalog("demo")[0]!)[0]!
  const program: ProgramRequest = {
    restoreFromSeq: undefined,
    resumeFromUnits: undefined,
    checkpointIntervalMs: undefined,
    keepWarmMs: 0,
    env: {},
    annotations: {},
    workload,
    service: true
  }
  Effect.runSync(
    capacity.port.acquire({ owner, namespace: "demo", attempt, index: 0, number, variant, recovery: number > 1 })
  )
  Effect.runSync(capacity.port.start(owner, attempt, program))
  await eventually(`${attempt} running`, () => facts(attempt).phase === "Running", { timeoutMs: 30_000 })
}

let commands = 0
const exec = (attempt: string, argv: ReadonlyArray<string>, background = false) =>
  Effect.runPromise(
    capacity.port.box!(
      owner,
      attempt,
      {
        _tag: "Exec",
        command: `c${++commands}`,
        argv,
        env: {},
        workingDir: undefined,
        stdin: undefined,
        keepStdin: false,
        timeoutMs: 60_000,
        background
      } satisfies BoxRequest
    )
  )

const stdoutOf = (reply: BoxReply) => {
  if (reply._tag !== "Command") throw new Error(`expected a command, got ${JSON.stringify(reply)}`)
  return Buffer.from(reply.state.stdout ?? "", "base64").toString("utf8")
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "nodus-box-survival-"))
  chmodSync(dir, 0o711)
  ;({ capacity, agent } = await makeLiveHost({ dir, node: "node-s", cpus: 4, now: () => Date.now() }))
  await agent.connect()
})

afterAll(async () => {
  await agent.stop()
  await removeTree(dir)
})

describe("the supervisor under an output flood", () => {
  // The reproduction of issue 29: 48 commands each writing 16 MiB at once. The supervisor runs as the agent runs it
  // (node, its stdout a socket the reader drains as fast as it can); it once died of "write ENOBUFS".
  it("says every byte and every exit, and still answers, after 48 commands each wrote 16 MiB", async () => {
    const child = spawn(process.execPath, ["-e", supervisorScript(false)], { stdio: ["pipe", "pipe", "pipe"] })
    let stderr = ""
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
    const exits = new Set<string>()
    let decoded = 0
    let pending = ""
    let answered = false
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      pending += chunk
      for (let at = pending.indexOf("\n"); at >= 0; at = pending.indexOf("\n")) {
        const message = JSON.parse(pending.slice(0, at))
        pending = pending.slice(at + 1)
        if (message.ev === "out") decoded += Buffer.byteLength(message.data, "base64")
        if (message.ev === "exit") exits.add(message.id)
        if (message.rid === 1) answered = message.ok === true && Array.isArray(message.entries)
      }
    })
    const send = (request: SupervisorRequest) => child.stdin.write(`${JSON.stringify(request)}\n`)
    const count = 48
    const bytes = 16 * 1024 * 1024
    for (let index = 0; index < count; index++) {
      send(execRequest(`f${index}`, ["head", "-c", String(bytes), "/dev/zero"], { background: true }))
    }
    try {
      await eventually("every command's exit", () => exits.size === count || child.exitCode !== null, {
        timeoutMs: 240_000
      })
      expect(child.exitCode, stderr).toBeNull()
      expect(decoded).toBe(count * bytes)
      send({ op: "read", rid: 1, path: "/", max: 1024 })
      await eventually("the supervisor's answer", () => answered || child.exitCode !== null, { timeoutMs: 30_000 })
      expect(answered, stderr).toBe(true)
    } finally {
      child.kill("SIGKILL")
    }
  }, 300_000)
})

describe("the supervisor killed by the box's user", () => {
  it("ends the box, and the Sandbox's next box on this host starts from the /workspace it left", async () => {
    await start("kill-1", 1)
    expect(stdoutOf(await exec("kill-1", ["sh", "-c", "echo written > /workspace/written.txt; echo ok"]))).toBe("ok\n")
    void exec("kill-1", ["sh", "-c", "kill -9 2"])
    await eventually("kill-1 ended", () => facts("kill-1").phase === "Ended", { timeoutMs: 30_000 })
    await start("kill-2", 2)
    expect(stdoutOf(await exec("kill-2", ["sh", "-c", "cat /workspace/written.txt"]))).toBe("written\n")
  }, 60_000)
})
