/**
 * The box's supervisor script (BoxSupervisor.ts), run by node outside any box: a command to start is the box request
 * itself (core/SandboxBox.ts ExecRequest), and the supervisor answers with the command's output and exit.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { supervisorScript } from "../../../src/backends/live/BoxSupervisor.ts"
import type { ExecRequest } from "../../../src/core/SandboxBox.ts"
import { execRequest as exec } from "../../support/BoxRequests.ts"
import { eventually } from "../../support/Eventually.ts"

/** Starts the script with `main` as the Sandbox's main process; its messages, and a way to send it requests. */
const supervisor = (main: ReadonlyArray<string> = []) => {
  const child = spawn(process.execPath, ["-e", supervisorScript(false), "--", ...main], {
    cwd: mkdtempSync(join(tmpdir(), "nodus-supervisor-")),
    stdio: ["pipe", "pipe", "inherit"]
  })
  const messages: Array<Record<string, unknown>> = []
  let pending = ""
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    pending += chunk
    for (let at = pending.indexOf("\n"); at >= 0; at = pending.indexOf("\n")) {
      messages.push(JSON.parse(pending.slice(0, at)) as Record<string, unknown>)
      pending = pending.slice(at + 1)
    }
  })
  const exitOf = (id: string) =>
    eventually(`the exit of ${id}`, () => messages.find((message) => message["ev"] === "exit" && message["id"] === id))
  const outputOf = (id: string, fd: 1 | 2) =>
    Buffer.concat(
      messages.filter((message) => message["ev"] === "out" && message["id"] === id && message["fd"] === fd)
        .map((message) => Buffer.from(message["data"] as string, "base64"))
    ).toString()
  return {
    send: (request: ExecRequest) => child.stdin.write(`${JSON.stringify(request)}\n`),
    exitOf,
    stdoutOf: (id: string) => outputOf(id, 1),
    stderrOf: (id: string) => outputOf(id, 2),
    stop: () => child.stdin.end()
  }
}

describe("the box's supervisor", () => {
  it("starts a command from the box request: argv, env, stdin (then closed), its output and exit", async () => {
    const box = supervisor()
    box.send(exec("c1", ["sh", "-c", "cat; echo \"$GREETING\"; echo oops >&2; exit 3"], {
      env: { GREETING: "hello" },
      stdin: Buffer.from("from stdin\n").toString("base64")
    }))
    const exit = await box.exitOf("c1")
    assert.strictEqual(exit["code"], 3)
    assert.strictEqual(box.stdoutOf("c1"), "from stdin\nhello\n")
    assert.strictEqual(box.stderrOf("c1"), "oops\n")
    box.stop()
  })

  it("runs in the request's working directory, and refuses one that does not exist with 126", async () => {
    const box = supervisor()
    box.send(exec("here", ["pwd"], { workingDir: "/" }))
    assert.strictEqual((await box.exitOf("here"))["code"], 0)
    assert.strictEqual(box.stdoutOf("here"), "/\n")
    box.send(exec("nowhere", ["pwd"], { workingDir: "/no/such/directory" }))
    assert.strictEqual((await box.exitOf("nowhere"))["code"], 126)
    assert.include(box.stderrOf("nowhere"), "no such working directory")
    box.stop()
  })

  it("kills a command past the request's timeoutMs, and starts the Sandbox's main process as command main", async () => {
    const box = supervisor(["sh", "-c", "echo main ran"])
    assert.strictEqual((await box.exitOf("main"))["code"], 0)
    assert.strictEqual(box.stdoutOf("main"), "main ran\n")
    box.send(exec("slow", ["sleep", "30"], { timeoutMs: 200 }))
    const exit = await box.exitOf("slow")
    assert.strictEqual(exit["timedOut"], true)
    assert.strictEqual(exit["signal"], "SIGKILL")
    box.stop()
  })
})
