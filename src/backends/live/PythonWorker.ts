/**
 * A Function's warm Python worker (spec: Function; docs/functions.md): a small script the box's python3 runs. It
 * extracts the code archive (tar or zip, when it is given one) into its code directory, puts that directory first on
 * sys.path, imports the Function's module once (and makes its class, once), says `ready`, then serves calls from its
 * stdin, one JSON object per line, answering each on its stdout:
 *
 *   in:  {"id": "<call>", "encoding": "JSON" | "Pickle", "input": "<base64>", "method": "<name>"?}
 *   out: {"ready": true, "python": "3.12"} once, or {"ready": false, "error": {...}} and an exit
 *        {"id": "<call>", "ok": true, "encoding": "...", "result": "<base64>"}
 *        {"id": "<call>", "ok": false, "error": {"type": "<module.Class>", "message": "...", "traceback": "..."}}
 *
 * A JSON input is `{"args": [...], "kwargs": {...}}` and a JSON result the return value (spec: Payload); a Pickle input
 * is a pickled `(args, kwargs)`, its result the pickled return value (a JSON result of NaN or Infinity is an error: no
 * JSON can carry it). What the function prints goes to stderr (the worker's log), and what it reads from stdin is
 * empty: the protocol keeps both pipes to itself, so no print can forge an answer and no `input()` can take a call.
 * Calls run on up to `NODUS_CONCURRENCY` threads (the Function's targetConcurrency).
 *
 * The host's side (the agent) checks every line against `WorkerMessageSchema`, since the code in the box can write
 * to the worker's real stdout too, and scrubs errors of the secret values the worker was given (Scrub.ts).
 */
import { Exit, Schema } from "effect"
import type { Readable, Writable } from "node:stream"
import { scrub } from "./Scrub.ts"

/** A call as the host sends it. */
export interface WorkerCall {
  readonly id: string
  readonly encoding: "JSON" | "Pickle"
  /** base64 */
  readonly input: string
  readonly method?: string | undefined
}

const base64 = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9+/]*={0,2}$/u))

export const WorkerErrorSchema = Schema.Struct({
  type: Schema.String,
  message: Schema.String,
  traceback: Schema.String
})
export type WorkerError = typeof WorkerErrorSchema.Type

/** What the host takes from a worker's stdout. */
export const WorkerMessageSchema = Schema.Union([
  Schema.Struct({ ready: Schema.Literal(true), python: Schema.String }),
  Schema.Struct({ ready: Schema.Literal(false), error: WorkerErrorSchema }),
  Schema.Struct({
    id: Schema.String,
    ok: Schema.Literal(true),
    encoding: Schema.Literals(["JSON", "Pickle"]),
    result: base64
  }),
  Schema.Struct({ id: Schema.String, ok: Schema.Literal(false), error: WorkerErrorSchema })
])
export type WorkerMessage = typeof WorkerMessageSchema.Type

/** The line a call is sent as. */
export const callLine = (call: WorkerCall): string => `${JSON.stringify(call)}\n`

/** What the worker must be told: where the code is and what to run (spec: Function.code). */
export interface WorkerTarget {
  /** The directory the code is imported from, inside the box (first on sys.path). */
  readonly codeDir: string
  /**
   * The code archive (a tar, possibly compressed, or a zip), inside the box: the worker extracts it into `codeDir`
   * before it imports anything, refusing members that lead out of it (absolute paths, `..`, links). Absent: the code is
   * in `codeDir` already.
   */
  readonly archive?: string | undefined
  readonly module: string
  /** A function's qualified name in the module, or a class whose methods calls name. */
  readonly qualname?: string | undefined
  readonly cls?: string | undefined
  readonly concurrency: number
}

/** The worker's environment: what it runs, beside the Function's own env. */
export const workerEnv = (target: WorkerTarget): Readonly<Record<string, string>> => ({
  NODUS_CODE_DIR: target.codeDir,
  ...(target.archive === undefined ? {} : { NODUS_CODE_ARCHIVE: target.archive }),
  NODUS_MODULE: target.module,
  ...(target.qualname === undefined ? {} : { NODUS_QUALNAME: target.qualname }),
  ...(target.cls === undefined ? {} : { NODUS_CLASS: target.cls }),
  NODUS_CONCURRENCY: String(target.concurrency),
  PYTHONUNBUFFERED: "1",
  PYTHONDONTWRITEBYTECODE: "1"
})

/** The argv that starts a worker: the script, with `python` (e.g. python3.12, or python3) of the host's userland. */
export const workerArgv = (python: string): ReadonlyArray<string> => [python, "-c", workerScript]

/** The worker itself (Python 3.10+, standard library only). */
export const workerScript = String.raw`
import base64, importlib, json, os, pickle, shutil, stat, sys, tarfile, threading, traceback, zipfile
from concurrent.futures import ThreadPoolExecutor

out = os.fdopen(os.dup(1), "w", buffering=1)
calls = os.fdopen(os.dup(0), "r")
os.dup2(2, 1)
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
sys.stdout = sys.stderr
sys.stdin = open(os.devnull)
lock = threading.Lock()

def say(message):
    line = json.dumps(message, separators=(",", ":"), allow_nan=False)
    with lock:
        out.write(line + "\n")

def describe(error):
    kind = type(error)
    name = kind.__qualname__ if kind.__module__ == "builtins" else kind.__module__ + "." + kind.__qualname__
    return {"type": name, "message": str(error)[:4096], "traceback": "".join(traceback.format_exception(error))[-16384:]}

def resolve(root, dotted):
    for part in dotted.split("."):
        root = getattr(root, part)
    return root

def inside(root, name):
    # A member's path under root, or None for root itself. The box bounds what a hostile archive can touch; these
    # checks make one that tries fail with a clear error instead of writing where it should not.
    parts = [part for part in name.replace("\\", "/").split("/") if part not in ("", ".")]
    if name.startswith("/") or ".." in parts:
        raise ValueError("the code archive's member %r leads out of its directory" % name)
    return os.path.join(root, *parts) if parts else None

def link(root, path, name, target):
    # A link's target must stay below it without climbing: with no "..", and no absolute target, nothing resolves out.
    if target.startswith("/") or ".." in target.replace("\\", "/").split("/"):
        raise ValueError("the code archive's link %r -> %r leads out of its directory" % (name, target))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)

def write(path, data, executable):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as file:
        shutil.copyfileobj(data, file)
    os.chmod(path, 0o755 if executable else 0o644)

def extract(archive, root):
    os.makedirs(root, exist_ok=True)
    with open(archive, "rb") as file:
        is_zip = file.read(4) in (b"PK\x03\x04", b"PK\x05\x06")
    if is_zip:
        with zipfile.ZipFile(archive) as bundle:
            for info in bundle.infolist():
                path = inside(root, info.filename)
                mode = info.external_attr >> 16
                if path is None:
                    continue
                if info.is_dir():
                    os.makedirs(path, exist_ok=True)
                elif stat.S_ISLNK(mode):
                    link(root, path, info.filename, bundle.read(info).decode())
                else:
                    with bundle.open(info) as data:
                        write(path, data, bool(mode & 0o111))
        return
    with tarfile.open(archive, "r:*") as bundle:
        for member in bundle:
            path = inside(root, member.name)
            if path is None:
                continue
            if member.isdir():
                os.makedirs(path, exist_ok=True)
            elif member.issym():
                link(root, path, member.name, member.linkname)
            elif member.islnk():
                source = inside(root, member.linkname)
                if source is None or not os.path.isfile(source) or os.path.islink(source):
                    raise ValueError("the code archive's hard link %r -> %r names no file before it" % (member.name, member.linkname))
                with open(source, "rb") as data:
                    write(path, data, bool(member.mode & 0o111))
            elif member.isfile():
                write(path, bundle.extractfile(member), bool(member.mode & 0o111))
            # devices and fifos are no code: left out

try:
    if "NODUS_CODE_ARCHIVE" in os.environ:
        extract(os.environ["NODUS_CODE_ARCHIVE"], os.environ["NODUS_CODE_DIR"])
    sys.path.insert(0, os.environ["NODUS_CODE_DIR"])
    module = importlib.import_module(os.environ["NODUS_MODULE"])
    target = resolve(module, os.environ["NODUS_QUALNAME"]) if "NODUS_QUALNAME" in os.environ else None
    instance = resolve(module, os.environ["NODUS_CLASS"])() if "NODUS_CLASS" in os.environ else None
except BaseException as error:
    say({"ready": False, "error": describe(error)})
    sys.exit(1)

def decode(call):
    data = base64.b64decode(call["input"])
    if call["encoding"] == "Pickle":
        args, kwargs = pickle.loads(data)
    else:
        value = json.loads(data) if data else {}
        args, kwargs = value.get("args", []), value.get("kwargs", {})
    return list(args), dict(kwargs)

def encode(encoding, value):
    data = pickle.dumps(value) if encoding == "Pickle" else json.dumps(value, allow_nan=False).encode()
    return base64.b64encode(data).decode()

def serve(call):
    try:
        function = getattr(instance, call["method"]) if instance is not None else target
        args, kwargs = decode(call)
        value = function(*args, **kwargs)
        say({"id": call["id"], "ok": True, "encoding": call["encoding"], "result": encode(call["encoding"], value)})
    except BaseException as error:
        try:
            say({"id": call["id"], "ok": False, "error": describe(error)})
        except BaseException:
            say({"id": call["id"], "ok": False, "error": {"type": "WorkerError", "message": "the exception could not be described", "traceback": ""}})

say({"ready": True, "python": "%d.%d" % sys.version_info[:2]})
concurrency = max(1, int(os.environ.get("NODUS_CONCURRENCY", "1")))
pool = ThreadPoolExecutor(max_workers=concurrency) if concurrency > 1 else None
for line in calls:
    if not line.strip():
        continue
    call = json.loads(line)
    if pool is None:
        serve(call)
    else:
        pool.submit(serve, call)
`

/**
 * The longest line a worker may say: an answer carries its result inline (base64), and a result larger than this is
 * the blob store's, not a pipe's. A longer line ends the worker's connection (every waiting call is lost), so no
 * worker can make the host hold an unbounded line.
 */
export const workerLineBytesMax = 64 * 1024 * 1024

/** Calls `onLine` with each line of `output`; `onEnd` once, when it ends or says a line longer than `maxBytes`. */
const readLines = (
  output: Readable,
  maxBytes: number,
  onLine: (line: string) => void,
  onEnd: (why: string) => void
) => {
  let pending: Array<Buffer> = []
  let pendingBytes = 0
  let ended = false
  const end = (why: string) => {
    if (ended) return
    ended = true
    onEnd(why)
  }
  output.on("data", (chunk: Buffer) => {
    let start = 0
    for (let newline = chunk.indexOf(10); newline !== -1 && !ended; newline = chunk.indexOf(10, start)) {
      onLine(Buffer.concat([...pending, chunk.subarray(start, newline)]).toString("utf8"))
      pending = []
      pendingBytes = 0
      start = newline + 1
    }
    pending.push(chunk.subarray(start))
    pendingBytes += chunk.length - start
    if (pendingBytes > maxBytes) {
      pending = []
      output.destroy()
      end(`the worker said a line longer than ${maxBytes} bytes`)
    }
  })
  output.on("close", () => end("the worker exited"))
  output.on("end", () => end("the worker exited"))
  output.on("error", () => end("the worker exited"))
}

/** A call's outcome as the worker said it, its error scrubbed of what the worker was given in secret. */
export type WorkerOutcome =
  | { readonly ok: true; readonly encoding: "JSON" | "Pickle"; readonly result: string }
  | { readonly ok: false; readonly error: WorkerError }

const decodeMessage = Schema.decodeUnknownExit(Schema.fromJsonString(WorkerMessageSchema))

/** The worker ended (or its connection did) before it answered the call: the call did not finish on it. */
export class WorkerLost extends Error {}

/**
 * The host's end of one worker: its stdin and stdout. `ready` settles once the module is imported (or failed to be);
 * `call` answers when the worker answers that call, and rejects with `WorkerLost` every call still waiting when the
 * worker's stdout ends (and every later one), so a call the worker never answered is never taken for its outcome.
 */
export class WorkerConnection {
  readonly ready: Promise<{ readonly python: string }>
  /** Called when the count of calls waiting for an answer goes from none to some, or back (the worker's activity). */
  onBusy: ((busy: boolean) => void) | undefined
  private readonly waiting = new Map<
    string,
    { readonly resolve: (outcome: WorkerOutcome) => void; readonly reject: (error: Error) => void }
  >()
  private ended: WorkerLost | undefined
  private settleReady!: { resolve: (value: { readonly python: string }) => void; reject: (error: Error) => void }

  private readonly input: Writable
  private readonly secrets: ReadonlyArray<string>

  constructor(input: Writable, output: Readable, secrets: ReadonlyArray<string>, lineBytesMax = workerLineBytesMax) {
    this.input = input
    this.secrets = secrets
    this.ready = new Promise((resolve, reject) => (this.settleReady = { resolve, reject }))
    this.ready.catch(() => undefined)
    input.on("error", () => undefined)
    readLines(output, lineBytesMax, (line) => this.take(line), (why) => this.end(new WorkerLost(why)))
  }

  /** Whether a call waits for its answer now. */
  get busy(): boolean {
    return this.waiting.size > 0
  }

  /**
   * The call's outcome; rejects with `WorkerLost` when the worker ends first, or an Error when its id is waiting
   * already.
   */
  call(call: WorkerCall): Promise<WorkerOutcome> {
    if (this.ended !== undefined) return Promise.reject(this.ended)
    if (this.waiting.has(call.id)) return Promise.reject(new Error(`call ${call.id} is running on this worker already`))
    return new Promise((resolve, reject) => {
      this.waiting.set(call.id, { resolve, reject })
      if (this.waiting.size === 1) this.onBusy?.(true)
      this.input.write(callLine(call))
    })
  }

  /** No more calls: the worker finishes those it has and exits. */
  close() {
    this.input.end()
  }

  private take(line: string) {
    const decoded = decodeMessage(line)
    // Code in the box can write lines of its own: what is not a message of the protocol is not one.
    if (Exit.isFailure(decoded)) return
    const message = decoded.value
    if ("ready" in message) {
      if (message.ready) this.settleReady.resolve({ python: message.python })
      else {this.settleReady.reject(
          new Error(
            `the worker could not load its code: ${this.scrubbed(message.error).type}: ${
              this.scrubbed(message.error).message
            }`
          )
        )}
      return
    }
    const waiter = this.waiting.get(message.id)
    if (waiter === undefined) return
    this.waiting.delete(message.id)
    waiter.resolve(
      message.ok
        ? { ok: true, encoding: message.encoding, result: message.result }
        : { ok: false, error: this.scrubbed(message.error) }
    )
    if (this.waiting.size === 0) this.onBusy?.(false)
  }

  private scrubbed(error: WorkerError): WorkerError {
    return {
      type: error.type,
      message: scrub(error.message, this.secrets),
      traceback: scrub(error.traceback, this.secrets)
    }
  }

  private end(error: WorkerLost) {
    this.ended = error
    this.settleReady.reject(error)
    const lost = this.waiting.size > 0
    for (const [id, waiter] of this.waiting) {
      waiter.reject(new WorkerLost(`${error.message} before answering call ${id}`))
    }
    this.waiting.clear()
    if (lost) this.onBusy?.(false)
  }
}
