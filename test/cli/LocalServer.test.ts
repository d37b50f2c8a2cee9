/**
 * A `nodus serve` process on the local backend (docs/live.md), with real programs:
 * - the CLI reads what Jobs leave: `nodus logs`, `nodus output` (its digest checked), `nodus nodes`; it moves a
 *   Volume's files (`nodus volume put|get`);
 * - crash safety: killed with SIGKILL while a Job runs, the server's programs die with it (the boxes die with their
 *   parent), so nothing is left running unaccounted; restarted on the same data directory, it ends the lost run
 *   NodeLost at the restart and recovers the Job on its Node;
 * - reattaching: a run on another host (a `nodus agent` process) goes on while the server is killed and restarted; the
 *   agent says hello again holding it, and the restarted server keeps it — the same process, the same Attempt.
 */
import { afterAll, afterEach, assert, describe, it } from "@effect/vitest"
import {
  type ChildProcess,
  type ChildProcessWithoutNullStreams,
  execFile,
  execFileSync,
  spawn
} from "node:child_process"
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { eventually } from "../support/Eventually.ts"
import { removeTree } from "../support/RemoveTree.ts"
import { callAs, printedBy } from "../support/ServerProcess.ts"

const root = join(import.meta.dirname, "..", "..")
const node = join(root, "node_modules", ".bin", "node")
const cli = join(root, "bin", "nodus.js")
const token = "nds_crash-test-token-0123456789abcdefghijklmnopqrstu"
const dataDir = mkdtempSync(join(tmpdir(), "nodus-crash-"))
const marker = `crash-marker-${process.pid}`
const children: Array<ChildProcess> = []

/** A server on the data directory, plain HTTP, the embedded store: resolves with its URL. */
const serve = async (addr = "127.0.0.1:0"): Promise<{ url: string; child: ChildProcess }> => {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith("NODUS_") && name !== "DATABASE_URL")
  )
  const child = spawn(node, [cli, "serve", "--data-dir", dataDir, "--addr", addr], {
    env: { ...env, NODUS_TLS: "off", NODUS_BOOTSTRAP_TOKEN: token }
  })
  children.push(child)
  return { url: await printedBy(child).first(/nodus serving (http:\/\/\S+)/u, 60_000), child }
}

const running = () => children.filter((child) => child.exitCode === null && child.signalCode === null)

// A test that fails halfway leaves its server holding the data directory: the next test must not inherit it.
afterEach(async () => {
  await Promise.all(
    running().map((child) =>
      new Promise((resolve) => {
        child.once("exit", resolve)
        child.kill("SIGKILL")
      })
    )
  )
})

afterAll(async () => {
  for (const child of running()) child.kill("SIGKILL")
  await removeTree(dataDir)
})

const call = callAs(token)

/** Whether a process whose command line holds the marker runs (the Job's program). */
const programRuns = () => {
  try {
    execFileSync("pgrep", ["-f", marker])
    return true
  } catch {
    return false
  }
}

/** The nodus CLI against the server of the data directory (plain HTTP), as the admin. */
const nodus = (url: string, args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      node,
      [cli, ...args],
      { env: cliEnv(url), timeout: 30_000 },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
    )
  })

describe("the CLI on a Job's log, outputs and the Nodes", () => {
  it("prints the log, downloads an output with its digest checked, and lists Nodes", async () => {
    const server = await serve()
    assert.strictEqual(
      (await call(server.url, "POST", "/api/v1/namespaces", {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "cli" }
      })).status,
      201
    )
    const created = await call(server.url, "POST", "/apis/nodus.dev/v1/namespaces/cli/jobs", {
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      metadata: { name: "talker" },
      spec: {
        image: "debian:12",
        command: ["sh", "-c", "echo one; echo two; echo 42 > /platform/work/answer"],
        outputs: [{ name: "answer", path: "/platform/work/answer" }]
      }
    })
    assert.strictEqual(created.status, 201)
    await eventually(
      "talker succeeds",
      async () =>
        (await call(server.url, "GET", "/apis/nodus.dev/v1/namespaces/cli/jobs/talker")).body.status?.phase ===
          "Succeeded",
      { timeoutMs: 30_000 }
    )
    const log = await nodus(server.url, ["logs", "job/talker", "-n", "cli"])
    assert.strictEqual(log.code, 0, log.stderr)
    assert.strictEqual(log.stdout, "one\ntwo\n")
    const tail = await nodus(server.url, ["logs", "job/talker", "-n", "cli", "--tail", "1"])
    assert.strictEqual(tail.stdout, "two\n")
    const file = join(dataDir, "answer.out")
    const output = await nodus(server.url, ["output", "job/talker", "answer", "-n", "cli", "-o", file])
    assert.strictEqual(output.code, 0, output.stderr)
    assert.strictEqual(readFileSync(file, "utf8"), "42\n")
    const missing = await nodus(server.url, ["output", "job/talker", "nothing", "-n", "cli"])
    assert.strictEqual(missing.code, 1)
    assert.include(missing.stderr, "NotFound")
    const nodes = await nodus(server.url, ["nodes"])
    assert.strictEqual(nodes.code, 0, nodes.stderr)
    assert.match(nodes.stdout, /^PROJECT\s+NAME\s+POOL\s+PHASE/u)
    server.child.kill("SIGTERM")
    await new Promise((resolve) => server.child.once("exit", resolve))
  })
})

describe("the CLI on a Volume's files", () => {
  it("commits a directory as a revision (nodus volume put), a Job reads it, and it unpacks back (nodus volume get)", async () => {
    const server = await serve()
    assert.strictEqual(
      (await call(server.url, "POST", "/api/v1/namespaces", {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "vols" }
      })).status,
      201
    )
    const volume = await call(server.url, "POST", "/apis/nodus.dev/v1/namespaces/vols/volumes", {
      apiVersion: "nodus.dev/v1",
      kind: "Volume",
      metadata: { name: "weights" },
      spec: { size: "1Gi" }
    })
    assert.strictEqual(volume.status, 201)
    const source = mkdtempSync(join(tmpdir(), "nodus-volume-src-"))
    mkdirSync(join(source, "layer"))
    writeFileSync(join(source, "layer", "w.txt"), "0.5 0.25\n")
    const none = await nodus(server.url, ["volume", "get", "weights", join(dataDir, "none"), "-n", "vols"])
    assert.strictEqual(none.code, 1)
    assert.include(none.stderr, "no committed revision yet")
    const put = await nodus(server.url, ["volume", "put", "weights", source, "-n", "vols"])
    assert.strictEqual(put.code, 0, put.stderr)
    assert.match(put.stdout, /^volume\/weights revision 1 committed: \d+ bytes, sha256 [0-9a-f]{64}\n$/u)
    const created = await call(server.url, "POST", "/apis/nodus.dev/v1/namespaces/vols/jobs", {
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      metadata: { name: "loader" },
      spec: {
        image: "debian:12",
        command: ["cat", "/platform/inputs/weights/layer/w.txt"],
        inputs: [{ name: "weights", volume: { name: "weights" } }]
      }
    })
    assert.strictEqual(created.status, 201)
    await eventually(
      "loader succeeds",
      async () =>
        (await call(server.url, "GET", "/apis/nodus.dev/v1/namespaces/vols/jobs/loader")).body.status?.phase ===
          "Succeeded",
      { timeoutMs: 30_000 }
    )
    assert.strictEqual((await nodus(server.url, ["logs", "job/loader", "-n", "vols"])).stdout, "0.5 0.25\n")
    const target = join(dataDir, "unpacked")
    const get = await nodus(server.url, ["volume", "get", "weights", target, "-n", "vols", "--revision", "1"])
    assert.strictEqual(get.code, 0, get.stderr)
    assert.strictEqual(readFileSync(join(target, "layer", "w.txt"), "utf8"), "0.5 0.25\n")
    const unknown = await nodus(server.url, ["volume", "get", "weights", target, "-n", "vols", "--revision", "9"])
    assert.strictEqual(unknown.code, 1)
    assert.include(unknown.stderr, "has no revision 9")
    rmSync(source, { recursive: true, force: true })
    server.child.kill("SIGTERM")
    await new Promise((resolve) => server.child.once("exit", resolve))
  })
})

/** The CLI's environment: the server of the data directory (plain HTTP), as the admin. */
const cliEnv = (url: string) => ({
  ...process.env,
  NODUS_TLS: "off",
  NODUS_BOOTSTRAP_TOKEN: token,
  NODUS_DATA_DIR: dataDir,
  NODUS_ADDR: new URL(url).host
})

/** A started CLI's exit code and output, with `input` written to its stdin (ended, unless `keepOpen`). */
const finished = (child: ChildProcessWithoutNullStreams, input: string, keepOpen: boolean) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
    child.on("exit", (code) => {
      clearTimeout(timer)
      resolve({ code: code ?? 1, stdout, stderr })
    })
    if (keepOpen) child.stdin.write(input)
    else child.stdin.end(input)
  })

/**
 * The nodus CLI on a pseudo-terminal of util-linux `script` sized 0×0, `input` typed into it; its output and the
 * terminal's echo come back together on stdout. Its stdin stays open until it exits (an end would hang up the shell).
 */
const nodusOnTerminal = (url: string, args: ReadonlyArray<string>, input: string) => {
  const line = ["stty rows 0 cols 0;", "exec", node, cli, ...args].map((
    word
  ) => (word.endsWith(";") ? word : `'${word}'`)).join(" ")
  return finished(spawn("script", ["-qec", line, "/dev/null"], { env: cliEnv(url) }), input, true)
}

/** The nodus CLI with `input` on its stdin (a pipe, not a terminal). */
const nodusWithInput = (url: string, args: ReadonlyArray<string>, input: string) =>
  finished(spawn(node, [cli, ...args], { env: cliEnv(url) }), input, false)

describe("the CLI on a Sandbox", () => {
  it("runs commands (nodus sandbox exec), copies files both ways (cp), and opens a terminal (shell)", async () => {
    const server = await serve()
    assert.strictEqual(
      (await call(server.url, "POST", "/api/v1/namespaces", {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "boxes" }
      })).status,
      201
    )
    const created = await call(server.url, "POST", "/apis/nodus.dev/v1/namespaces/boxes/sandboxes", {
      apiVersion: "nodus.dev/v1",
      kind: "Sandbox",
      metadata: { name: "desk" },
      spec: { image: "debian:12" }
    })
    assert.strictEqual(created.status, 201)
    await eventually(
      "desk runs",
      async () =>
        (await call(server.url, "GET", "/apis/nodus.dev/v1/namespaces/boxes/sandboxes/desk")).body.status?.phase ===
          "Running",
      { timeoutMs: 30_000 }
    )

    const exec = await nodus(server.url, [
      "sandbox",
      "exec",
      "desk",
      "-n",
      "boxes",
      "-e",
      "WHO=cli",
      "--",
      "sh",
      "-c",
      "echo hello $WHO; echo oops >&2; exit 7"
    ])
    assert.strictEqual(exec.code, 7)
    assert.strictEqual(exec.stdout, "hello cli\n")
    assert.strictEqual(exec.stderr, "oops\n")
    const piped = await nodusWithInput(server.url, [
      "sandbox",
      "exec",
      "desk",
      "-n",
      "boxes",
      "-i",
      "--",
      "tr",
      "a-z",
      "A-Z"
    ], "shout\n")
    assert.strictEqual(piped.stdout, "SHOUT\n")

    const local = join(dataDir, "upload.txt")
    writeFileSync(local, "from the host\n")
    const up = await nodus(server.url, ["sandbox", "cp", local, "desk:/workspace/in.txt", "-n", "boxes"])
    assert.strictEqual(up.code, 0, up.stderr)
    const down = await nodus(server.url, ["sandbox", "cp", "desk:in.txt", "-", "-n", "boxes"])
    assert.strictEqual(down.stdout, "from the host\n")
    const missing = await nodus(server.url, ["sandbox", "cp", "desk:/workspace/none", "-", "-n", "boxes"])
    assert.strictEqual(missing.code, 1)
    assert.include(missing.stderr, "NotFound")

    // On a terminal that says it is 0×0 (as a pty nobody sized is), the shell gets 80×24.
    const shell = await nodusOnTerminal(
      server.url,
      ["sandbox", "shell", "desk", "-n", "boxes", "--shell", "/bin/sh"],
      "stty size; echo marker-$((40+2)); exit 5\n"
    )
    assert.strictEqual(shell.code, 5, shell.stdout)
    assert.include(shell.stdout, "24 80")
    assert.include(shell.stdout, "marker-42")
    assert.notInclude(shell.stdout, "invalid value for cols")
    // Without a terminal it says so at once, and points to exec.
    const withoutTerminal = await nodusWithInput(server.url, ["sandbox", "shell", "desk", "-n", "boxes"], "exit 5\n")
    assert.strictEqual(withoutTerminal.code, 2)
    assert.include(withoutTerminal.stderr, "nodus sandbox exec")
    server.child.kill("SIGTERM")
    await new Promise((resolve) => server.child.once("exit", resolve))
  })
})

const jobs = "/apis/nodus.dev/v1/namespaces/crash/jobs"
const attempts = "/apis/nodus.dev/v1/namespaces/crash/attempts"

describe("a server killed while a Job runs", () => {
  it("leaves no program behind, and recovers the Job when it comes back", async () => {
    const first = await serve()
    assert.strictEqual(
      (await call(first.url, "POST", "/api/v1/namespaces", {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "crash" }
      })).status,
      201
    )
    const created = await call(first.url, "POST", jobs, {
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      metadata: { name: "long" },
      spec: {
        image: "debian:12",
        command: ["sh", "-c", `echo ${marker}; sleep 600`],
        recovery: { continuity: "Restartable" }
      }
    })
    assert.strictEqual(created.status, 201)
    await eventually(
      "the Job runs",
      async () => (await call(first.url, "GET", `${jobs}/long`)).body.status?.phase === "Running",
      { timeoutMs: 30_000 }
    )
    assert.isTrue(programRuns())
    const killedAt = Date.now()
    first.child.kill("SIGKILL")
    await new Promise((resolve) => first.child.once("exit", resolve))
    await eventually("the program is gone with its server", () => !programRuns(), { timeoutMs: 10_000 })

    const second = await serve()
    await eventually(
      "the lost run ended NodeLost",
      async () => (await call(second.url, "GET", `${attempts}/long-0-1`)).body.status?.reason === "NodeLost",
      { timeoutMs: 30_000 }
    )
    // It ended, and is charged, up to when it was last known alive (its Node's last recorded lease renewal, before the
    // kill), not through the downtime until the restarted server noticed (issue 29, item 11).
    const lost = (await call(second.url, "GET", `${attempts}/long-0-1`)).body.status
    assert.isAtMost(Date.parse(lost.endTime), killedAt, JSON.stringify(lost))
    await eventually(
      "a replacement runs",
      async () => (await call(second.url, "GET", `${attempts}/long-0-2`)).body.status?.phase === "Running",
      { timeoutMs: 30_000 }
    )
    assert.isTrue(programRuns())
    const job = (await call(second.url, "GET", `${jobs}/long`)).body
    assert.strictEqual(job.status.phase, "Running")
    assert.strictEqual(job.status.attempts.total, 2)
    const removed = await call(second.url, "DELETE", `${jobs}/long`)
    assert.strictEqual(removed.status, 200)
    await eventually("the replacement's program stops with its Job", () => !programRuns(), { timeoutMs: 30_000 })
    second.child.kill("SIGTERM")
    await new Promise((resolve) => second.child.once("exit", resolve))
  })
})

/** A port free now (the restarted server must come back where its agent looks for it). */
const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    })
  })

/** The pids of processes whose command line holds `text`. */
const pidsOf = (text: string): ReadonlyArray<string> => {
  try {
    return execFileSync("pgrep", ["-f", text], { encoding: "utf8" }).trim().split("\n").filter((line) => line !== "")
  } catch {
    return []
  }
}

/**
 * A directory whose `bwrap` starts each box a second late, then runs the real one: a loaded host, where a box's own
 * program comes well after its Job is reported Running (which happens once bwrap is spawned).
 */
const slowBwrap = (): string => {
  const real = execFileSync("sh", ["-c", "command -v bwrap"], { encoding: "utf8" }).trim()
  const dir = mkdtempSync(join(tmpdir(), "nodus-slow-bwrap-"))
  writeFileSync(join(dir, "bwrap"), `#!/bin/sh\nsleep 1\nexec ${real} "$@"\n`, { mode: 0o755 })
  chmodSync(dir, 0o755)
  return dir
}

describe("a run on another host while its server is killed and restarted", () => {
  it("goes on, and the restarted server keeps it: the same program, the same Attempt", async () => {
    const addr = `127.0.0.1:${await freePort()}`
    const first = await serve(addr)
    assert.strictEqual(
      (await call(first.url, "POST", "/api/v1/namespaces", {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "far" }
      })).status,
      201
    )
    const token = await call(first.url, "POST", "/apis/nodus.dev/v1/namespaces/far/enrollmenttokens", {
      apiVersion: "nodus.dev/v1",
      kind: "EnrollmentToken",
      metadata: { name: "edge" },
      spec: { pool: "edge" }
    })
    assert.strictEqual(token.status, 201)
    const agentDir = join(dataDir, "..", `${marker}-agent`)
    const agent = spawn(node, [
      cli,
      "agent",
      "--server",
      first.url,
      "--token",
      token.body.status.token,
      "--data-dir",
      agentDir,
      "--name",
      "edge"
    ], { stdio: "ignore", env: { ...process.env, PATH: `${slowBwrap()}:${process.env["PATH"]}` } })
    children.push(agent)
    const far = "/apis/nodus.dev/v1/namespaces/far"
    await eventually(
      "the agent's Node is Ready",
      async () => (await call(first.url, "GET", `${far}/nodes/edge`)).body.status?.phase === "Ready",
      { timeoutMs: 30_000 }
    )
    const program = `${marker}-far`
    const created = await call(first.url, "POST", `${far}/jobs`, {
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      metadata: { name: "far" },
      spec: {
        image: "debian:12",
        command: ["sh", "-c", `echo ${program}; sleep 600`],
        placement: { offerings: ["edge"] }
      }
    })
    assert.strictEqual(created.status, 201)
    await eventually(
      "the Job runs on the agent's host",
      async () => (await call(first.url, "GET", `${far}/jobs/far`)).body.status?.phase === "Running",
      { timeoutMs: 30_000 }
    )
    // Running is reported once bwrap is spawned; the box's own program (`sh`, forked by bwrap's pid 1 once the box is
    // set up) comes later, later still on a loaded host. The processes are counted once it is there: bwrap, bwrap's
    // pid 1 and the program (issue 29 #20: counted at Running, the program's pid was sometimes missing from the first
    // count and present in the second).
    await eventually("the program runs in its box", () => pidsOf(`^sh -c echo ${program}`).length === 1, {
      timeoutMs: 30_000
    })
    const running = pidsOf(program)
    assert.isNotEmpty(running)
    first.child.kill("SIGKILL")
    await new Promise((resolve) => first.child.once("exit", resolve))
    const second = await serve(addr)
    await eventually(
      "the agent's Node is Ready again",
      async () => (await call(second.url, "GET", `${far}/nodes/edge`)).body.status?.phase === "Ready",
      { timeoutMs: 30_000 }
    )
    // A lease's length and more: the run was kept, not lost.
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    const attempt = (await call(second.url, "GET", `${far}/attempts/far-0-1`)).body
    assert.strictEqual(attempt.status.phase, "Running", JSON.stringify(attempt.status))
    assert.strictEqual((await call(second.url, "GET", `${far}/attempts/far-0-2`)).status, 404)
    assert.deepStrictEqual(pidsOf(program), running)
    assert.strictEqual((await call(second.url, "DELETE", `${far}/jobs/far`)).status, 200)
    await eventually("the program stops with its Job", () => pidsOf(program).length === 0, { timeoutMs: 30_000 })
    agent.kill("SIGTERM")
    second.child.kill("SIGTERM")
    await new Promise((resolve) => second.child.once("exit", resolve))
  }, 90_000)
})
