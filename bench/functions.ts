/**
 * Functions, the part that runs today: a warm Python worker (backends/live/PythonWorker.ts) on this host's python3,
 * beside the floor it cannot beat, in one run:
 *
 * 1. the floor: a bare Node ↔ Python pipe round trip (a line out, the same line back), `--calls` (1,000) times;
 * 2. a warm worker's call round trip (JSON in, the return value out), as a plain child process;
 * 3. the same worker in nodus's bubblewrap box (egress Deny, its code read-only under /platform/inputs);
 * 4. cold start: spawn → the worker's `ready` (its module imported), `--starts` (20) times, plain and boxed.
 *
 * Not measured yet (the Function and FunctionCall machines are not built, so no call goes through the API):
 * `.remote()` through the Python and TypeScript clients, and `.map` of 1,000 inputs. Goals (the Functions issue): warm
 * round trip p50 ≤ 15 ms, p99 ≤ 50 ms; `.map` ≥ 1,000 calls/s. A call that fails makes the bench exit 1.
 *
 *   npm run bench:functions -- [--calls 1000] [--starts 20]
 */
import { spawn } from "node:child_process"
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createInterface } from "node:readline"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { detectIsolation, runIsolated } from "../src/backends/live/Isolation.ts"
import { WorkerConnection, type WorkerTarget, workerArgv, workerEnv } from "../src/backends/live/PythonWorker.ts"
import { argument } from "./Arguments.ts"
import { show } from "./Measure.ts"

const calls = Number(argument("calls", "1000"))
const starts = Number(argument("starts", "20"))
let failures = 0

const root = mkdtempSync(join(tmpdir(), "nodus-bench-functions-"))
chmodSync(root, 0o711)
mkdirSync(join(root, "code", "app"), { recursive: true })
writeFileSync(join(root, "code", "app", "__init__.py"), "")
writeFileSync(join(root, "code", "app", "handlers.py"), "def embed(text):\n    return [len(text), text.count(' ')]\n")
const support = detectIsolation()
// One interpreter for every measure: the userland's own, as a box finds it (a PATH shim such as pyenv's costs more).
const python = existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3"
const target = (codeDir: string): WorkerTarget => ({ codeDir, module: "app.handlers", qualname: "embed", concurrency: 1 })
const input = Buffer.from(JSON.stringify({ args: ["the quick brown fox jumps over the lazy dog"] })).toString("base64")

/** The floor: python echoes each line back. */
const floor = async () => {
  const child = spawn(python, ["-u", "-c", "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()"], { stdio: ["pipe", "pipe", "inherit"] })
  const lines = createInterface({ input: child.stdout })
  const waiting: Array<() => void> = []
  lines.on("line", () => waiting.shift()?.())
  const times: Array<number> = []
  for (let index = 0; index < calls; index++) {
    const started = performance.now()
    await new Promise<void>((resolve) => {
      waiting.push(resolve)
      child.stdin.write(`{"id":"call-${index}","input":"${input}"}\n`)
    })
    times.push(performance.now() - started)
  }
  child.stdin.end()
  return times
}

/** A worker's round trips once it is ready. */
const roundTrips = async (connection: WorkerConnection) => {
  await connection.ready
  const times: Array<number> = []
  for (let index = 0; index < calls; index++) {
    const started = performance.now()
    const outcome = await connection.call({ id: `call-${index}`, encoding: "JSON", input })
    times.push(performance.now() - started)
    if (!outcome.ok) {
      failures++
      console.error(`call ${index} failed: ${outcome.error.type}: ${outcome.error.message}`)
    }
  }
  return times
}

const plainWorker = () => {
  const [command, ...args] = workerArgv(python)
  const child = spawn(command!, args, { env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...workerEnv(target(join(root, "code"))) }, stdio: ["pipe", "pipe", "inherit"] })
  return new WorkerConnection(child.stdin, child.stdout, [])
}

let boxes = 0
const boxedWorker = () => {
  const area = join(root, `box-${++boxes}`)
  mkdirSync(join(area, "inputs"), { recursive: true })
  cpSync(join(root, "code"), join(area, "inputs", "code"), { recursive: true })
  const running = runIsolated({
    argv: workerArgv(python), env: workerEnv(target("/platform/inputs/code")), workingDir: undefined, secretFiles: [], egress: "Deny",
    memoryBytes: undefined, area, logPath: join(area, "worker.log"), pipes: true
  }, { support, hidden: [] })
  return new WorkerConnection(running.control!.input, running.control!.output, [])
}

const coldStarts = async (make: () => WorkerConnection) => {
  const times: Array<number> = []
  for (let index = 0; index < starts; index++) {
    const started = performance.now()
    const connection = make()
    await connection.ready.catch((error: Error) => {
      failures++
      console.error(`a worker did not start: ${error.message}`)
    })
    times.push(performance.now() - started)
    connection.close()
  }
  return times
}

try {
  console.log(`Functions on this host (${python}, ${calls} calls, ${starts} cold starts each)`)
  show("floor: bare Node ↔ Python pipe round trip", await floor())
  const plain = plainWorker()
  show("warm worker call round trip (plain process)", await roundTrips(plain))
  plain.close()
  const boxed = boxedWorker()
  show("warm worker call round trip (bubblewrap box)", await roundTrips(boxed))
  boxed.close()
  show("cold start → ready (plain process)", await coldStarts(plainWorker))
  show("cold start → ready (bubblewrap box)", await coldStarts(boxedWorker))
  console.log("not measured yet: .remote() through the clients and .map of 1,000 (no Function machine runs calls)")
} finally {
  rmSync(root, { recursive: true, force: true })
}
if (failures > 0) {
  console.error(`${failures} failures`)
  process.exit(1)
}
