/**
 * The `nodus` command as users run it: `npm start` serves on the embedded store, printing one line with its URL;
 * `nodus kubeconfig` prints a kubeconfig that real kubectl uses as is; settings come from flags and environment.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const root = join(import.meta.dirname, "..", "..")
const node = join(root, "node_modules", ".bin", "node")
const cli = join(root, "bin", "nodus.js")

const run = (command: string, args: ReadonlyArray<string>, env: Record<string, string> = {}, cwd = root) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      command,
      args,
      { cwd, env: { ...cleanEnvironment(), ...env }, timeout: 60_000 },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
    )
  })

/** The environment without nodus settings, so that each test sets exactly the ones it means (the embedded store
 * unless it says otherwise, even when the test run itself has DATABASE_URL). */
const cleanEnvironment = (): NodeJS.ProcessEnv =>
  Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith("NODUS_") && name !== "DATABASE_URL")
  )

const children: Array<ChildProcess> = []

/** Starts a server process and resolves with the URL from its one announcement line. */
const serve = (command: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<{ url: string; line: string }>((resolve, reject) => {
    // Its own process group, so that stopping it also stops the server npm starts under it.
    const child = spawn(command, args, { cwd: root, env: { ...cleanEnvironment(), ...env }, detached: true })
    children.push(child)
    let output = ""
    const timer = setTimeout(() => reject(new Error(`no announcement within 60 s:\n${output}`)), 60_000)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const match = /^nodus serving (https?:\/\/\S+).*$/mu.exec(output)
      if (match !== null) {
        clearTimeout(timer)
        resolve({ url: match[1]!, line: match[0] })
      }
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    child.on("exit", (code) => reject(new Error(`server exited with ${code}:\n${output}`)))
  })

afterAll(() => {
  for (const child of children) {
    if (child.pid !== undefined && child.exitCode === null) process.kill(-child.pid, "SIGTERM")
  }
})

describe("nodus CLI", () => {
  it("npm start serves on the embedded store with HTTPS, and nodus kubeconfig works with kubectl", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "nodus-cli-"))
    const { url } = await serve("npm", ["start", "--silent", "--", "--data-dir", dataDir, "--addr", "127.0.0.1:0"])
    assert.match(url, /^https:\/\/127\.0\.0\.1:\d+$/u)
    const port = new URL(url).port
    const tokenFile = join(dataDir, "admin.token")
    assert.strictEqual(statSync(tokenFile).mode & 0o777, 0o600)
    const printed = await run(node, [cli, "kubeconfig", "--data-dir", dataDir, "--addr", `127.0.0.1:${port}`])
    assert.strictEqual(printed.code, 0, printed.stderr)
    assert.include(printed.stdout, `server: ${url}`)
    assert.include(printed.stdout, "certificate-authority-data: ")
    assert.include(printed.stdout, `token: ${readFileSync(tokenFile, "utf8").trim()}`)
    const kubeconfigPath = join(dataDir, "kubeconfig")
    writeFileSync(kubeconfigPath, printed.stdout)
    const created = await run("kubectl", ["create", "namespace", "cli-demo", "--cache-dir", join(dataDir, "kcache")], {
      KUBECONFIG: kubeconfigPath
    })
    assert.strictEqual(created.code, 0, created.stderr)
    const listed = await run("kubectl", ["get", "nodus", "-A", "--cache-dir", join(dataDir, "kcache")], {
      KUBECONFIG: kubeconfigPath
    })
    assert.strictEqual(listed.code, 0, listed.stderr)
    // A fresh server holds no Jobs; the local backend (the default) has already listed its Node's offering.
    assert.include(listed.stdout, "offering.nodus.dev/", listed.stdout)
    assert.notInclude(listed.stdout, "job.nodus.dev/", listed.stdout)
    const namespaces = await run("kubectl", ["get", "namespaces", "--cache-dir", join(dataDir, "kcache")], {
      KUBECONFIG: kubeconfigPath
    })
    assert.include(namespaces.stdout, "cli-demo")
    // kubectl prints a Status's message only: the server's fix is there too.
    const absent = await run("kubectl", [
      "get",
      "jobs.nodus.dev",
      "absent",
      "-n",
      "cli-demo",
      "--cache-dir",
      join(dataDir, "kcache")
    ], { KUBECONFIG: kubeconfigPath })
    assert.match(absent.stderr, /Error from server \(NotFound\): jobs\.nodus\.dev "absent" not found; fix: \S/u)
  })

  it("nodus logs, sandbox and grant reach the server of $KUBECONFIG, as kubectl plugins do", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "nodus-cli-"))
    const { url } = await serve(node, [
      cli,
      "serve",
      "--data-dir",
      dataDir,
      "--addr",
      "127.0.0.1:0",
      "--backend",
      "none"
    ])
    const printed = await run(node, [cli, "kubeconfig", "--data-dir", dataDir, "--addr", new URL(url).host])
    const kubeconfigPath = join(dataDir, "kubeconfig")
    writeFileSync(kubeconfigPath, printed.stdout)
    // Elsewhere, with nothing but KUBECONFIG: no data directory here, no NODUS_ADDR.
    const elsewhere = mkdtempSync(join(tmpdir(), "nodus-cli-cwd-"))
    const env = { KUBECONFIG: kubeconfigPath }
    const granted = await run(node, [cli, "grant", "3", "--reason", "kubeconfig"], env, elsewhere)
    assert.strictEqual(granted.code, 0, granted.stderr)
    assert.match(granted.stdout, /^creditgrant\/\S+ granted 3 USD$/mu)
    const logs = await run(node, [cli, "logs", "job/absent", "-n", "kube"], env, elsewhere)
    assert.strictEqual(logs.code, 1, logs.stderr)
    // The server's own answer, its fix shown once.
    assert.include(logs.stderr, "NotFound: jobs.nodus.dev \"absent\" not found\n  fix: ")
    assert.strictEqual(logs.stderr.split("fix:").length, 2, logs.stderr)
    const exec = await run(node, [cli, "sandbox", "exec", "absent", "-n", "kube", "--", "true"], env, elsewhere)
    assert.strictEqual(exec.code, 1, exec.stderr)
    assert.include(exec.stderr, "NotFound: sandboxes.nodus.dev \"absent\" not found")
    // A server flag still names the server: this data directory's (none here), whatever the kubeconfig says.
    const named = await run(node, [cli, "grant", "3", "--addr", "127.0.0.1:1", "--tls", "off"], env, elsewhere)
    assert.strictEqual(named.code, 1)
    assert.include(named.stderr, "ECONNREFUSED")
  })

  it("reads settings from the environment: plain HTTP, a given admin token, another API group", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "nodus-cli-"))
    const token = "nds_environment-token-for-tests-0123456789abcdef"
    const { url } = await serve(node, [cli, "serve"], {
      NODUS_DATA_DIR: dataDir,
      NODUS_ADDR: "127.0.0.1:0",
      NODUS_TLS: "off",
      NODUS_BOOTSTRAP_TOKEN: token,
      NODUS_API_GROUP: "compute.example.dev"
    })
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/u)
    const groups = await fetch(`${url}/apis`, { headers: { authorization: `Bearer ${token}` } })
    assert.strictEqual(groups.status, 200)
    const body = await groups.json() as { groups: Array<{ name: string }> }
    assert.deepStrictEqual(body.groups.map((group) => group.name), ["compute.example.dev"])
    const wrong = await fetch(`${url}/apis`, { headers: { authorization: "Bearer nds_wrong" } })
    assert.strictEqual(wrong.status, 401)
  })

  it("under a Node older than 24 says which to use, with no stack trace", async () => {
    // An older node as `node bin/nodus.js` meets it: this node, told by a preload that it is Node 20.
    const older =
      `data:text/javascript,Object.defineProperty(process, "versions", { value: { ...process.versions, node: "20.20.2" } })`
    const result = await run(node, ["--import", older, cli, "--help"])
    assert.strictEqual(result.code, 1, result.stderr)
    assert.include(result.stderr, "nodus needs Node 24 (this is Node 20.20.2): use npm start or npx nodus")
    assert.notInclude(result.stderr, "    at ")
    assert.strictEqual(result.stdout, "")
  })

  it("leaves out of git what the README's quick start writes into the checkout", async () => {
    for (const path of ["nodus.kubeconfig", "nodus-sim.kubeconfig", ".nodus/admin.token", ".nodus-sim/admin.token"]) {
      const checked = await run("git", ["check-ignore", "--no-index", "-q", path])
      assert.strictEqual(checked.code, 0, `${path} is not git-ignored`)
    }
  })

  it("refuses bad settings with a clear message and exit code 2", async () => {
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
      [["serve", "--addr", "nowhere"], "is not host:port"],
      [["serve", "--tls", "maybe"], "NODUS_TLS must be on or off"],
      [["serve", "--tls-cert", "/tmp/x.pem"], "go together"],
      [["serve", "--frobnicate", "1"], "unknown flag --frobnicate"],
      [["launch"], "unknown command"]
    ]
    for (const [args, message] of cases) {
      const result = await run(node, [cli, ...args])
      assert.strictEqual(result.code, 2, `${args.join(" ")}: ${result.stderr}`)
      assert.include(result.stderr, message)
      assert.notInclude(result.stderr, "    at ")
    }
  })
})
