/**
 * A Function's warm Python worker (src/backends/live/PythonWorker.ts) with the host's real python3: the module imported
 * once, JSON and Pickle calls, a raised exception as {type, message, traceback} scrubbed of secrets, prints that cannot
 * corrupt the protocol, a class's methods, calls on several threads, a module that does not import, and the same worker
 * in a real bubblewrap box with its code read-only under /platform/inputs.
 */
import { spawn, spawnSync } from "node:child_process"
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { detectIsolation, runIsolated } from "../../../src/backends/live/Isolation.ts"
import {
  workerArgv,
  type WorkerCall,
  WorkerConnection,
  workerEnv,
  WorkerLost,
  type WorkerTarget
} from "../../../src/backends/live/PythonWorker.ts"

const code = String.raw`
import os, threading, time

loads = globals().setdefault("loads", 0) + 1
barrier = threading.Barrier(4, timeout=2)

def add(a, b=0):
    print("a print that is not an answer")
    return a + b

def boom(secret_echo=False):
    raise ValueError("bad input " + (os.environ.get("API_TOKEN", "") if secret_echo else ""))

def together():
    barrier.wait()
    return "met"

def loaded():
    return loads

def reads():
    return input()

def not_a_number():
    return float("nan")

def hang():
    threading.Event().wait()

def large(n):
    return "x" * n

class Model:
    def __init__(self):
        self.scale = 10
    def predict(self, x):
        return x * self.scale
`

let root = ""
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "nodus-worker-"))
  chmodSync(root, 0o711)
  mkdirSync(join(root, "code", "app"), { recursive: true })
  writeFileSync(join(root, "code", "app", "__init__.py"), "")
  writeFileSync(join(root, "code", "app", "handlers.py"), code)
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

const json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64")
const parsed = (base64: string) => JSON.parse(Buffer.from(base64, "base64").toString())

/** A worker as a plain child process of this test (the box comes last). */
const direct = (target: Partial<WorkerTarget>, secrets: Record<string, string> = {}, lineBytesMax?: number) => {
  const full: WorkerTarget = { codeDir: join(root, "code"), module: "app.handlers", concurrency: 1, ...target }
  const [command, ...args] = workerArgv("python3")
  const child = spawn(command!, args, {
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...workerEnv(full), ...secrets },
    stdio: ["pipe", "pipe", "pipe"]
  })
  let stderr = ""
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const connection = new WorkerConnection(child.stdin, child.stdout, Object.values(secrets), lineBytesMax)
  return { connection, stderr: () => stderr, done: () => connection.close(), kill: () => child.kill("SIGKILL") }
}

let calls = 0
const call = (fields: Partial<WorkerCall>): WorkerCall => ({
  id: `call-${++calls}`,
  encoding: "JSON",
  input: json({}),
  ...fields
})

describe("python worker", () => {
  it("imports once, answers JSON calls with their return values, and keeps prints off the protocol", async () => {
    const worker = direct({ qualname: "add" })
    expect((await worker.connection.ready).python).toMatch(/^3\.\d+$/u)
    const first = await worker.connection.call(call({ input: json({ args: [2], kwargs: { b: 40 } }) }))
    expect(first.ok && parsed(first.result)).toBe(42)
    const second = await worker.connection.call(call({ input: json({ args: ["a", "b"] }) }))
    expect(second.ok && parsed(second.result)).toBe("ab")
    worker.done()
    expect(worker.stderr()).toContain("a print that is not an answer")
  })

  it("the module is imported once for every call", async () => {
    const worker = direct({ qualname: "loaded" })
    for (let index = 0; index < 3; index++) {
      const outcome = await worker.connection.call(call({}))
      expect(outcome.ok && parsed(outcome.result)).toBe(1)
    }
    worker.done()
  })

  it("a raised exception is {type, message, traceback}, scrubbed of the secrets the worker was given", async () => {
    const worker = direct({ qualname: "boom" }, { API_TOKEN: "tok-5e2a91c7" })
    const outcome = await worker.connection.call(call({ input: json({ kwargs: { secret_echo: true } }) }))
    expect(outcome.ok).toBe(false)
    if (outcome.ok) return
    expect(outcome.error.type).toBe("ValueError")
    expect(outcome.error.message).toBe("bad input [redacted]")
    expect(outcome.error.traceback).toContain("in boom")
    expect(JSON.stringify(outcome)).not.toContain("tok-5e2a91c7")
    // A call that asks for a function the worker cannot call (bad arguments) is an error too, not a crash.
    const bad = await worker.connection.call(call({ input: json({ kwargs: { nope: 1 } }) }))
    expect(!bad.ok && bad.error.type).toBe("TypeError")
    worker.done()
  })

  it("input() reads nothing (never the next call), and a result JSON cannot carry is the call's error", async () => {
    const reading = direct({ qualname: "reads" })
    const first = await reading.connection.call(call({}))
    expect(!first.ok && first.error.type).toBe("EOFError")
    const second = await reading.connection.call(call({}))
    expect(!second.ok && second.error.type).toBe("EOFError")
    reading.done()
    const nan = direct({ qualname: "not_a_number" })
    const outcome = await nan.connection.call(call({}))
    expect(!outcome.ok && outcome.error.type).toBe("ValueError")
    nan.done()
  })

  it("a line longer than the host takes ends the connection: the call and every later one are lost, nothing is held", async () => {
    const worker = direct({ qualname: "large" }, {}, 4_096)
    const small = await worker.connection.call(call({ input: json({ args: [100] }) }))
    expect(small.ok && parsed(small.result).length).toBe(100)
    // Lost, not an outcome: the call never finished on this worker.
    const huge = worker.connection.call(call({ input: json({ args: [100_000] }) }))
    await expect(huge).rejects.toBeInstanceOf(WorkerLost)
    await expect(huge).rejects.toThrow(/longer than 4096 bytes/u)
    await expect(worker.connection.call(call({ input: json({ args: [1] }) }))).rejects.toThrow(
      /longer than 4096 bytes/u
    )
    worker.kill()
  })

  it("Pickle: a pickled (args, kwargs) in, the pickled return value out", async () => {
    const pickled = spawnSync("python3", [
      "-c",
      "import base64,pickle;print(base64.b64encode(pickle.dumps(((20,), {'b': 22}))).decode())"
    ], { encoding: "utf8" }).stdout.trim()
    const worker = direct({ qualname: "add" })
    const outcome = await worker.connection.call(call({ encoding: "Pickle", input: pickled }))
    expect(outcome.ok).toBe(true)
    if (!outcome.ok) return
    const value = spawnSync("python3", [
      "-c",
      `import base64,pickle;print(pickle.loads(base64.b64decode("${outcome.result}")))`
    ], { encoding: "utf8" }).stdout.trim()
    expect(value).toBe("42")
    worker.done()
  })

  it("a class is made once and calls name its methods", async () => {
    const worker = direct({ cls: "Model" })
    const outcome = await worker.connection.call(call({ method: "predict", input: json({ args: [4] }) }))
    expect(outcome.ok && parsed(outcome.result)).toBe(40)
    worker.done()
  })

  it("calls run on up to targetConcurrency threads: four calls that wait for each other all return", async () => {
    const worker = direct({ qualname: "together", concurrency: 4 })
    const outcomes = await Promise.all(Array.from({ length: 4 }, () => worker.connection.call(call({}))))
    expect(outcomes.map((outcome) => outcome.ok && parsed(outcome.result))).toEqual(["met", "met", "met", "met"])
    worker.done()
    // One at a time, the first waits for company that never comes: the barrier breaks.
    const serial = direct({ qualname: "together", concurrency: 1 })
    const alone = await serial.connection.call(call({}))
    expect(!alone.ok && alone.error.type).toBe("threading.BrokenBarrierError")
    serial.done()
  })

  it("a module that does not import says why, and its calls fail as the worker lost", async () => {
    const worker = direct({ module: "app.missing", qualname: "f" })
    await expect(worker.connection.ready).rejects.toThrow(/ModuleNotFoundError: No module named 'app.missing'/u)
    await expect(worker.connection.call(call({}))).rejects.toBeInstanceOf(WorkerLost)
  })

  it("a worker killed under a call loses it (WorkerLost), never answers it as the function's outcome", async () => {
    const worker = direct({ qualname: "hang" })
    await worker.connection.ready
    const busy: Array<boolean> = []
    worker.connection.onBusy = (value) => busy.push(value)
    // A call that never returns: only the kill ends it.
    const waiting = worker.connection.call(call({ input: json({}) }))
    worker.kill()
    await expect(waiting).rejects.toBeInstanceOf(WorkerLost)
    expect(busy).toEqual([true, false])
  })

  it("extracts its code archive first: links that stay inside are kept, a hard link to a host file is refused", async () => {
    const make = (name: string, members: string) => {
      const path = join(root, name)
      const script = String.raw`
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w:gz") as bundle:
    for kind, name, value in ${members}:
        info = tarfile.TarInfo(name)
        if kind == "file":
            info.size = len(value.encode())
            bundle.addfile(info, io.BytesIO(value.encode()))
        else:
            info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
            info.linkname = value
            bundle.addfile(info)
`
      const made = spawnSync("python3", ["-c", script, path], { encoding: "utf8" })
      expect(made.stderr).toBe("")
      return path
    }
    const good = make(
      "good.tar.gz",
      `[("file", "pkg/__init__.py", ""), ("file", "pkg/handlers.py", "def f(x): return x + 1"), ("symlink", "alias", "pkg")]`
    )
    const extracted = direct({
      codeDir: join(root, "extracted"),
      archive: good,
      module: "alias.handlers",
      qualname: "f"
    })
    const outcome = await extracted.connection.call(call({ input: json({ args: [41] }) }))
    expect(outcome.ok && parsed(outcome.result)).toBe(42)
    extracted.done()
    const hard = make("hard.tar.gz", `[("file", "pkg/__init__.py", ""), ("hardlink", "pkg/passwd", "/etc/passwd")]`)
    const refused = direct({ codeDir: join(root, "refused"), archive: hard, module: "pkg", qualname: "f" })
    await expect(refused.connection.ready).rejects.toThrow(
      /ValueError: the code archive's member '\/etc\/passwd' leads out of its directory/u
    )
  })

  it("runs in a bubblewrap box, its code read-only under /platform/inputs/code", async () => {
    const area = join(root, "area")
    mkdirSync(join(area, "inputs"), { recursive: true })
    spawnSync("cp", ["-r", join(root, "code"), join(area, "inputs", "code")])
    const target: WorkerTarget = {
      codeDir: "/platform/inputs/code",
      module: "app.handlers",
      qualname: "add",
      concurrency: 1
    }
    const running = runIsolated({
      argv: workerArgv("python3"),
      env: workerEnv(target),
      workingDir: undefined,
      secretFiles: [],
      egress: "Deny",
      memoryBytes: undefined,
      area,
      logPath: join(root, "worker.log"),
      pipes: true
    }, { support: detectIsolation(), hidden: [] })
    const connection = new WorkerConnection(running.control!.input, running.control!.output, [])
    await connection.ready
    const outcome = await connection.call(call({ input: json({ args: [1, 2] }) }))
    expect(outcome.ok && parsed(outcome.result)).toBe(3)
    connection.close()
    expect((await running.exited).exitCode).toBe(0)
  })
})
