/**
 * Runs the real clients (kubectl, the Python Kubernetes client) as child processes against a test server.
 *
 * The test server lives in the vitest process, so every client runs asynchronously (never execFileSync/spawnSync,
 * which would block the event loop and the server with it), with a timeout, and hands back exit code, stdout and
 * stderr. `startKubectl` runs a long-lived command (`get -w`, `wait`) in the background.
 */
import { spawn } from "node:child_process"
import { accessSync, constants, writeFileSync } from "node:fs"
import { request as httpsRequest } from "node:https"
import { join } from "node:path"
import type { TestServer } from "../support/TestServer.ts"

export interface Result {
  /** The exit code; -1 when the process was killed by a signal (our timeout or `stop`). */
  readonly code: number
  /** The signal that ended the process, if one did. */
  readonly signal: string | null
  readonly stdout: string
  readonly stderr: string
}

export interface RunOptions {
  /** Extra environment variables (on top of this process's environment). */
  readonly env?: Record<string, string>
  /** Written to the child's stdin, which is then closed. */
  readonly input?: string
  /** Milliseconds before the child is killed; 30 s by default. */
  readonly timeoutMs?: number
}

export const kubectlPath = "/usr/bin/kubectl"
/** The Debian python3 that has python3-kubernetes; the pyenv `python3` on PATH does not. */
export const pythonPath = "/usr/bin/python3"

/** A child process running in the background. */
export interface Background {
  /** Everything it printed on stdout so far. */
  readonly stdout: () => string
  /** Everything it printed on stderr so far. */
  readonly stderr: () => string
  /** Settles when the process exits on its own (or by the timeout). */
  readonly done: Promise<Result>
  /** Whether the process is still running. */
  readonly running: () => boolean
  /** Sends SIGTERM (if still running) and waits for the exit. */
  readonly stop: () => Promise<Result>
  /** Its process id (to kill it otherwise). */
  readonly pid: number | undefined
}

/** Starts `command args` without waiting for it. */
export const start = (command: string, args: ReadonlyArray<string>, options: RunOptions = {}): Background => {
  const child = spawn(command, args, {
    env: { ...process.env, ...options.env },
    stdio: ["pipe", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  child.stdin.on("error", () => {}) // the child may exit before reading its input
  child.stdin.end(options.input ?? "")
  const timer = setTimeout(() => {
    stderr += `\n[killed after ${options.timeoutMs ?? 30_000} ms]`
    child.kill("SIGKILL")
  }, options.timeoutMs ?? 30_000)
  const done = new Promise<Result>((resolve) => {
    child.on("error", (error) => {
      clearTimeout(timer)
      resolve({ code: -1, signal: null, stdout, stderr: `${stderr}\n${String(error)}` })
    })
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      resolve({ code: code ?? -1, signal, stdout, stderr })
    })
  })
  return {
    stdout: () => stdout,
    stderr: () => stderr,
    done,
    running: () => child.exitCode === null && child.signalCode === null,
    pid: child.pid,
    stop: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
      return done
    }
  }
}

/** Runs `command args` to completion. */
export const run = (command: string, args: ReadonlyArray<string>, options: RunOptions = {}): Promise<Result> =>
  start(command, args, options).done

const requireExecutable = (path: string, install: string): void => {
  try {
    accessSync(path, constants.X_OK)
  } catch {
    throw new Error(`${path} is missing: ${install}`)
  }
}

/** Fails with installation advice when kubectl is not there. */
export const requireKubectl = (): void =>
  requireExecutable(kubectlPath, "install kubectl (the CI image has the gcloud kubectl at /usr/bin/kubectl)")

/** Fails with installation advice when /usr/bin/python3 or its `kubernetes` module is not there. */
export const requirePythonClient = async (): Promise<void> => {
  requireExecutable(pythonPath, "apt-get install -y python3 python3-kubernetes")
  const probe = await run(pythonPath, ["-c", "import kubernetes; print(kubernetes.__version__)"])
  if (probe.code !== 0) {
    throw new Error(
      `the Python module 'kubernetes' is missing for ${pythonPath}: apt-get install -y python3-kubernetes\n${probe.stderr}`
    )
  }
}

const kubectlArgs = (
  server: TestServer,
  args: ReadonlyArray<string>
): ReadonlyArray<string> => [...args, "--cache-dir", join(server.directory, "kcache"), "--request-timeout=20s"]

const kubectlOptions = (server: TestServer, options: RunOptions): RunOptions => ({
  ...options,
  env: { KUBECONFIG: server.kubeconfigPath, ...options.env }
})

/**
 * Runs kubectl with the server's admin kubeconfig (override with `env.KUBECONFIG`), its own discovery cache and a
 * request timeout.
 */
export const kubectl = (server: TestServer, args: ReadonlyArray<string>, options: RunOptions = {}): Promise<Result> =>
  run(kubectlPath, kubectlArgs(server, args), kubectlOptions(server, options))

/** Starts kubectl in the background (for `get -w`, `wait`), configured as `kubectl` does. */
export const startKubectl = (server: TestServer, args: ReadonlyArray<string>, options: RunOptions = {}): Background =>
  start(kubectlPath, kubectlArgs(server, args), kubectlOptions(server, options))

/** Runs a Python script with /usr/bin/python3. */
export const python = (script: string, args: ReadonlyArray<string>, options: RunOptions = {}): Promise<Result> =>
  run(pythonPath, [script, ...args], options)

/** Formats a result for assertion messages. */
export const show = (result: Result): string =>
  `exit ${result.code}${
    result.signal === null ? "" : ` (${result.signal})`
  }\n--- stdout\n${result.stdout}\n--- stderr\n${result.stderr}`

export interface Reply {
  readonly status: number
  readonly text: string
  /** The body parsed as JSON (undefined when it is not JSON). */
  readonly body: any
}

/**
 * One raw HTTPS request to a TLS test server, trusting its CA: a second path to the server's state, independent of
 * the client under test. `body` is sent as JSON (or as is when it is a string or a Buffer).
 */
export const api = (
  server: TestServer,
  method: string,
  path: string,
  options: { readonly body?: unknown; readonly contentType?: string } = {}
): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const payload = options.body === undefined
      ? undefined
      : typeof options.body === "string" || Buffer.isBuffer(options.body)
      ? options.body
      : JSON.stringify(options.body)
    const request = httpsRequest(`${server.url}${path}`, {
      method,
      ...(server.ca === undefined ? {} : { ca: server.ca }),
      headers: {
        authorization: `Bearer ${server.token}`,
        accept: "application/json",
        ...(payload === undefined ? {} : { "content-type": options.contentType ?? "application/json" })
      },
      timeout: 20_000
    }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => (text += chunk))
      response.on("end", () => {
        let body: unknown
        try {
          body = JSON.parse(text)
        } catch {
          body = undefined
        }
        resolve({ status: response.statusCode ?? 0, text, body })
      })
      response.on("error", reject)
    })
    request.on("timeout", () => request.destroy(new Error(`${method} ${path} timed out`)))
    request.on("error", reject)
    request.end(payload)
  })

/**
 * A kubectl table (`get`, `api-resources`) as rows keyed by header. Cells are cut at the header's column offsets, so
 * empty cells (a kind without short names) stay in their column.
 */
export const parseTable = (text: string): ReadonlyArray<Record<string, string>> => {
  const lines = text.split("\n").filter((line) => line.trim() !== "")
  const header = lines[0]
  if (header === undefined) return []
  const columns = [...header.matchAll(/\S+/g)].map((match) => ({ name: match[0], start: match.index }))
  return lines.slice(1).map((line) =>
    Object.fromEntries(columns.map((column, index) => {
      const end = columns[index + 1]?.start ?? line.length
      return [column.name, line.slice(column.start, end).trim()]
    }))
  )
}

/** Splits a stream of concatenated JSON documents (`kubectl get -w -o json` prints one per event) and parses each. */
export const jsonDocuments = (text: string): ReadonlyArray<any> => {
  const documents: Array<unknown> = []
  let depth = 0
  let start = -1
  let inString = false
  let escaped = false
  for (let index = 0; index < text.length; index++) {
    const char = text[index]
    if (inString) {
      if (escaped) escaped = false
      else if (char === "\\") escaped = true
      else if (char === "\"") inString = false
      continue
    }
    if (char === "\"") inString = true
    else if (char === "{" || char === "[") {
      if (depth === 0) start = index
      depth++
    } else if (char === "}" || char === "]") {
      depth--
      if (depth === 0) documents.push(JSON.parse(text.slice(start, index + 1)))
    }
  }
  return documents
}

/** `kubectl create -f` of `yaml` (written as `<name>.yaml` in the server's client directory): the created object. */
export const createFromYaml = async (server: TestServer, name: string, yaml: string): Promise<any> => {
  const file = join(server.directory, `${name}.yaml`)
  writeFileSync(file, yaml)
  const created = await kubectl(server, ["create", "-f", file, "-o", "json"])
  if (created.code !== 0) throw new Error(`kubectl create -f ${name}.yaml: ${created.stderr}`)
  return JSON.parse(created.stdout)
}
