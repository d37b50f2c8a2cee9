/**
 * Acceptance on the local backend: real kubectl against a server whose Jobs run as real processes in bubblewrap boxes
 * on this host (docs/live.md). A Job that prints succeeds and its log reads back; a failing one fails with its last
 * lines in status.message; a Job with egress Deny cannot reach a TCP server on the host's loopback, and one with Open
 * only through its proxy (this server's operator named loopback: --egress-allow-cidr); secrets reach the program as env
 * and 0400 files, and never the status, events, log or the store's JSON.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer as createHttpsServer, type Server as HttpsServer } from "node:https"
import { createServer, type Server } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { generateTlsMaterial } from "../../src/apiserver/tls/Certificates.ts"
import { loopbackRanges } from "../../src/core/PublicAddress.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"
import { api, createFromYaml, kubectl, requireKubectl } from "./Clients.ts"

let server: TestServer
let listener: Server
let port = 0
/** An https server of the test's own CA, for url inputs. */
const material = generateTlsMaterial({ hosts: ["127.0.0.1", "localhost"], now: new Date() })
const inputData = "input data\n"
const inputSha256 = createHash("sha256").update(inputData).digest("hex")
let files: HttpsServer
let filesUrl = ""
const namespace = "live"

beforeAll(async () => {
  requireKubectl()
  files = createHttpsServer(
    { cert: material.certPem, key: material.keyPem },
    (_request, response) => response.end(inputData)
  )
  await new Promise<void>((resolve) => files.listen(0, "127.0.0.1", resolve))
  filesUrl = `https://127.0.0.1:${(files.address() as { port: number }).port}/data.txt`
  server = await startTestServer({ tls: true, local: { inputCa: material.caCertPem, egressAllow: loopbackRanges } })
  const reply = await api(server, "POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } }
  })
  assert.strictEqual(reply.status, 201, reply.text)
  listener = createServer((socket) => socket.end("hello from the host\n"))
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve))
  port = (listener.address() as { port: number }).port
})
afterAll(async () => {
  listener?.close()
  files?.close()
  await server?.stop()
})

/** A tar.zst of the given files (path → text), as `nodus volume put` sends a directory. */
const archiveOf = (files: Record<string, string>): Buffer => {
  const dir = mkdtempSync(join(tmpdir(), "nodus-volume-"))
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true })
      writeFileSync(join(dir, path), text)
    }
    return execFileSync("tar", ["--zstd", "-cf", "-", "-C", dir, "."])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const jobPath = (name: string) => `/apis/nodus.dev/v1/namespaces/${namespace}/jobs/${name}`

const apply = (name: string, yaml: string) => createFromYaml(server, name, yaml)

const jobYaml = (name: string, command: ReadonlyArray<string>, extra: ReadonlyArray<string> = []) =>
  [
    "apiVersion: nodus.dev/v1",
    "kind: Job",
    "metadata:",
    `  name: ${name}`,
    `  namespace: ${namespace}`,
    "spec:",
    "  image: debian:12",
    `  command: ${JSON.stringify(command)}`,
    "  backoffLimit: 0",
    ...extra
  ].join("\n")

/** Waits (through kubectl wait) until the Job reached `phase`. */
const waitFor = async (name: string, phase: string) => {
  const waited = await kubectl(server, [
    "wait",
    "-n",
    namespace,
    `jobs.nodus.dev/${name}`,
    `--for=jsonpath={.status.phase}=${phase}`,
    "--timeout=60s"
  ], { timeoutMs: 70_000 })
  const job = await api(server, "GET", jobPath(name))
  assert.strictEqual(waited.code, 0, `${waited.stderr}\n${JSON.stringify(job.body?.status)}`)
  return job.body
}

const logOf = async (name: string, query = "") => {
  const read = await kubectl(server, ["get", "--raw", `${jobPath(name)}/log${query}`])
  assert.strictEqual(read.code, 0, read.stderr)
  return read.stdout
}

describe("a Job on the local backend", () => {
  it("runs its command as a real process: it succeeds and its log reads back", async () => {
    await apply(
      "hello",
      jobYaml("hello", ["sh", "-c", "echo hello from index $JOB_COMPLETION_INDEX; echo to stderr >&2; pwd"])
    )
    const job = await waitFor("hello", "Succeeded")
    assert.strictEqual(job.status.succeeded, 1)
    const log = await logOf("hello")
    assert.include(log, "hello from index 0")
    assert.include(log, "to stderr")
    assert.include(log, "/platform/work")
    assert.strictEqual(await logOf("hello", "?tailLines=1"), "/platform/work\n")
  })

  it("is estimated on this host's Node: its rate, a start without a boot, no cold-start warning", async () => {
    const path = join(server.directory, "estimated.yaml")
    writeFileSync(path, jobYaml("estimated", ["true"]))
    const dry = await kubectl(server, ["create", "-f", path, "--dry-run=server", "-o", "json"])
    assert.strictEqual(dry.code, 0, dry.stderr)
    const estimate = JSON.parse(dry.stdout).status.estimate
    assert.strictEqual(estimate.placementPreview.offering, "local")
    assert.strictEqual(estimate.placementPreview.regionClass, "pool")
    assert.notInclude(JSON.stringify(estimate.warnings ?? []), "ColdStart")
    assert.match(estimate.startup.cold.p90, /^\d+ms$|^0s$/u)
  })

  it("collects its outputs when it succeeds: a declared file, and /platform/outputs as tar.zst, each with its digest", async () => {
    await apply(
      "maker",
      jobYaml("maker", [
        "sh",
        "-c",
        "echo 42 > /platform/work/answer.txt; mkdir -p /platform/outputs/d; echo inside > /platform/outputs/d/f"
      ], [
        "  outputs:",
        "  - {name: answer, path: /platform/work/answer.txt}"
      ])
    )
    const job = await waitFor("maker", "Succeeded")
    const outputs = job.status.outputs as ReadonlyArray<{ name: string; sha256: string; size: number; index: number }>
    assert.deepStrictEqual(outputs.map((output) => [output.name, output.index]).sort(), [["answer", 0], ["outputs", 0]])
    const answer = outputs.find((output) => output.name === "answer")!
    const read = await kubectl(server, ["get", "--raw", `${jobPath("maker")}/outputs/answer?index=0`])
    assert.strictEqual(read.code, 0, read.stderr)
    const bytes = Buffer.from(read.stdout)
    assert.strictEqual(bytes.toString(), "42\n")
    assert.strictEqual(createHash("sha256").update(bytes).digest("hex"), answer.sha256)
    assert.strictEqual(answer.size, 3)
    const archive = await kubectl(server, ["get", "--raw", `${jobPath("maker")}/outputs/outputs`])
    assert.strictEqual(archive.code, 0, archive.stderr)
    const missing = await api(server, "GET", `${jobPath("maker")}/outputs/nothing`)
    assert.strictEqual(missing.status, 404)
  })

  it("reads its inputs read-only under /platform/inputs: a URL checked against its SHA-256, and another Job's output", async () => {
    await apply(
      "reader",
      jobYaml("reader", [
        "sh",
        "-c",
        "cat $PLATFORM_INPUT_data; cat /platform/inputs/answer; touch /platform/inputs/x 2>/dev/null || echo read-only"
      ], [
        "  inputs:",
        `  - {name: data, url: {url: "${filesUrl}", sha256: "${inputSha256}"}}`,
        "  - {name: answer, output: {job: maker, name: answer}}"
      ])
    )
    const reader = await waitFor("reader", "Succeeded")
    assert.strictEqual(await logOf("reader"), `${inputData}42\nread-only\n`)
    assert.deepStrictEqual(reader.status.inputs.map((input: { name: string }) => input.name), ["data", "answer"])
    assert.strictEqual(reader.status.inputs[0].sha256, inputSha256)
    assert.isString(reader.status.inputsReadyTime)
  })

  it("reads a Volume's committed revision as a read-only directory, the revision named in status.inputs", async () => {
    const created = await api(server, "POST", `/apis/nodus.dev/v1/namespaces/${namespace}/volumes`, {
      body: { apiVersion: "nodus.dev/v1", kind: "Volume", metadata: { name: "corpus" }, spec: { size: "1Gi" } }
    })
    assert.strictEqual(created.status, 201, created.text)
    const revisions = `/apis/nodus.dev/v1/namespaces/${namespace}/volumes/corpus/revisions`
    const first = await api(server, "POST", revisions, {
      body: archiveOf({ "a.txt": "first\n", "sub/b.txt": "deep\n" }),
      contentType: "application/zstd"
    })
    assert.strictEqual(first.status, 201, first.text)
    const second = await api(server, "POST", revisions, {
      body: archiveOf({ "a.txt": "second\n" }),
      contentType: "application/zstd"
    })
    assert.strictEqual(second.status, 201, second.text)
    await apply(
      "volume-reader",
      jobYaml("volume-reader", [
        "sh",
        "-c",
        "cat $PLATFORM_INPUT_pinned/a.txt /platform/inputs/pinned/sub/b.txt /platform/inputs/latest/a.txt; touch /platform/inputs/pinned/x 2>/dev/null || echo read-only"
      ], [
        "  inputs:",
        "  - {name: pinned, volume: {name: corpus, revision: 1}}",
        "  - {name: latest, volume: {name: corpus}}"
      ])
    )
    const job = await waitFor("volume-reader", "Succeeded")
    assert.strictEqual(await logOf("volume-reader"), "first\ndeep\nsecond\nread-only\n")
    const uid = created.body.metadata.uid
    assert.deepStrictEqual(job.status.inputs, [
      {
        name: "pinned",
        sha256: first.body.status.revisions[0].sha256,
        volumeName: "corpus",
        volumeRevision: 1,
        volumeUID: uid
      },
      {
        name: "latest",
        sha256: second.body.status.revisions[1].sha256,
        volumeName: "corpus",
        volumeRevision: 2,
        volumeUID: uid
      }
    ])
    // Mounted read-only at a path of its own (spec: VolumeMount), recorded in status.inputs under the mount's field
    // path.
    await apply(
      "volume-mounter",
      jobYaml("volume-mounter", [
        "sh",
        "-c",
        "cat /data/v1/a.txt /data/now/a.txt; touch /data/now/x 2>/dev/null || echo read-only"
      ], [
        "  volumes:",
        "  - {volume: corpus, mountPath: /data/v1, readOnly: true, revision: 1}",
        "  - {volume: corpus, mountPath: /data/now, readOnly: true}"
      ])
    )
    const mounter = await waitFor("volume-mounter", "Succeeded")
    assert.strictEqual(await logOf("volume-mounter"), "first\nsecond\nread-only\n")
    assert.deepStrictEqual(
      mounter.status.inputs.map((
        input: { name: string; volumeRevision: number }
      ) => [input.name, input.volumeRevision]),
      [["volumes[0]", 1], ["volumes[1]", 2]]
    )
    // A writable mount is refused at start, saying what to do instead.
    await apply(
      "volume-writer",
      jobYaml("volume-writer", ["true"], ["  volumes:", "  - {volume: corpus, mountPath: /data}"])
    )
    assert.include(
      (await waitFor("volume-writer", "Failed")).status.message,
      "live hosts mount Volumes read-only so far"
    )
    // A revision not committed yet fails the run at start, saying which revisions there are.
    await apply(
      "volume-future",
      jobYaml("volume-future", ["true"], ["  inputs:", "  - {name: pinned, volume: {name: corpus, revision: 7}}"])
    )
    assert.include(
      (await waitFor("volume-future", "Failed")).status.message,
      `Volume "corpus" has no revision 7 (its latest is 2)`
    )
  })

  it("fails a run whose URL input has another digest: SHA256Mismatch, with the digest it has", async () => {
    await apply(
      "mismatch",
      jobYaml("mismatch", ["true"], [
        "  inputs:",
        `  - {name: data, url: {url: "${filesUrl}", sha256: "${"0".repeat(64)}"}}`
      ])
    )
    const job = await waitFor("mismatch", "Failed")
    assert.include(job.status.message, "SHA256Mismatch")
    assert.include(job.status.message, inputSha256)
  })

  it("fails a run whose declared output is missing, or leads out of its own files", async () => {
    await apply(
      "forgetful",
      jobYaml("forgetful", ["true"], ["  outputs:", "  - {name: model, path: /platform/work/model.bin}"])
    )
    assert.include((await waitFor("forgetful", "Failed")).status.message, "/platform/work/model.bin does not exist")
    await apply(
      "sneaky",
      jobYaml("sneaky", ["ln", "-s", "/etc/shadow", "/platform/work/shadow"], [
        "  outputs:",
        "  - {name: shadow, path: /platform/work/shadow}"
      ])
    )
    const sneaky = await waitFor("sneaky", "Failed")
    assert.include(sneaky.status.message, "leads out of the run's own files")
    assert.isUndefined(sneaky.status.outputs)
  })

  it("fails a command that exits non-zero, with its last log lines in status.message", async () => {
    await apply(
      "broken",
      jobYaml("broken", ["sh", "-c", "echo one; echo two; echo three; echo 'it broke' >&2; exit 3"])
    )
    const job = await waitFor("broken", "Failed")
    assert.include(job.status.message, "exited with code 3")
    assert.include(job.status.message, "it broke")
    // At most three lines of the log (spec: Job status.message).
    assert.include(job.status.message, "two")
    assert.notInclude(job.status.message, "one")
  })

  it("holds a program to its memory, its timeout and its initCommand", async () => {
    await apply(
      "hungry",
      jobYaml("hungry", ["python3", "-c", "b = bytearray(512 * 1024 * 1024)"], ["  resources: {memory: 64Mi}"])
    )
    await apply("slow", jobYaml("slow", ["sleep", "600"], ["  timeout: 2s"]))
    await apply(
      "unready",
      jobYaml("unready", ["true"], ["  initCommand: {command: [sh, -c, 'echo preflight failed; exit 4']}"])
    )
    assert.include((await waitFor("hungry", "Failed")).status.message, "OOMKilled")
    const slow = await waitFor("slow", "Failed")
    assert.strictEqual(slow.status.reason, "DeadlineExceeded")
    assert.include((await waitFor("unready", "Failed")).status.message, "initCommand exited with 4")
  })

  it("runs every index with its own PLATFORM_INDEX", async () => {
    await apply(
      "indexed",
      jobYaml("indexed", ["sh", "-c", "echo index=$PLATFORM_INDEX"], ["  completions: 3", "  parallelism: 2"])
    )
    const job = await waitFor("indexed", "Succeeded")
    assert.strictEqual(job.status.succeeded, 3)
    for (const index of [0, 1, 2]) assert.include(await logOf("indexed", `?index=${index}`), `index=${index}`)
  })

  it("gives a Job with egress Deny no network, and one with Open only its proxy: the host's loopback is out of direct reach", async () => {
    const connect = ["bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/${port} && head -n 1 <&3`]
    // This server's operator named loopback (--egress-allow-cidr): the proxy, and only the proxy, reaches it.
    const proxied = [
      "bash",
      "-c",
      `exec 3<>/dev/tcp/127.0.0.1/3128; printf 'CONNECT 127.0.0.1:${port} HTTP/1.1\\r\\n\\r\\n' >&3; head -n 3 <&3 | tr -d '\\r'`
    ]
    await apply("denied", jobYaml("denied", connect, ["  network:", "    egress:", "      policy: Deny"]))
    await apply("open", jobYaml("open", connect, ["  network:", "    egress:", "      policy: Open"]))
    await apply("open-proxied", jobYaml("open-proxied", proxied, ["  network:", "    egress:", "      policy: Open"]))
    await waitFor("denied", "Failed")
    await waitFor("open", "Failed")
    await waitFor("open-proxied", "Succeeded")
    assert.include(await logOf("open-proxied"), "hello from the host")
  })

  it("lets an AllowList Job reach the listed names only, through its proxy", async () => {
    const connect = (fd: number, target: string) =>
      `exec ${fd}<>/dev/tcp/127.0.0.1/3128; printf 'CONNECT ${target} HTTP/1.1\\r\\n\\r\\n' >&${fd}; head -n 3 <&${fd} | tr -d '\\r'`
    const script = [connect(3, `localhost:${port}`), connect(4, "example.org:443"), connect(5, `127.0.0.1:${port}`)]
      .join("; ")
    await apply(
      "listed",
      jobYaml("listed", ["bash", "-c", script], [
        "  network:",
        "    egress:",
        "      policy: AllowList",
        "      allow: [localhost]"
      ])
    )
    await waitFor("listed", "Succeeded")
    const log = await logOf("listed")
    assert.include(log, "HTTP/1.1 200 Connection established")
    assert.include(log, "hello from the host")
    assert.include(log, "example.org is not in the egress allow list")
    assert.include(log, "127.0.0.1 is an IP address")
    await apply(
      "unlisted",
      jobYaml("unlisted", ["true"], [
        "  network:",
        "    egress:",
        "      policy: AllowList",
        "      presets: [nothing-like-this]"
      ])
    )
    assert.include((await waitFor("unlisted", "Failed")).status.message, "no egress preset is named nothing-like-this")
  })

  it("hands secrets to the program as env and 0400 files, and nowhere else", async () => {
    const value = "s3cr3t-value-7f1c9a"
    const secret = await api(server, "POST", `/apis/nodus.dev/v1/namespaces/${namespace}/secrets`, {
      body: {
        apiVersion: "nodus.dev/v1",
        kind: "Secret",
        metadata: { name: "db" },
        spec: { data: { password: value } }
      }
    })
    assert.strictEqual(secret.status, 201, secret.text)
    const check = [
      "sh",
      "-c",
      `[ "$DB_PASSWORD" = "${"$"}(cat /run/secrets/db/password)" ] && [ "$password" = "$DB_PASSWORD" ] && stat -c %a /run/secrets/db/password && echo same`
    ]
    await apply(
      "secretive",
      jobYaml("secretive", check, [
        "  secrets: [db]",
        "  env:",
        "  - name: DB_PASSWORD",
        "    valueFrom:",
        "      secretKeyRef: {name: db, key: password}"
      ])
    )
    const job = await waitFor("secretive", "Succeeded")
    const log = await logOf("secretive")
    assert.include(log, "400")
    assert.include(log, "same")
    assert.notInclude(JSON.stringify(job), value)
    const events = await api(server, "GET", `/api/v1/namespaces/${namespace}/events`)
    assert.notInclude(events.text, value)
    // A program that prints its secret: the log and status.message show it redacted.
    await apply(
      "leaky",
      jobYaml("leaky", ["sh", "-c", "echo the password is $DB_PASSWORD; exit 1"], [
        "  env:",
        "  - name: DB_PASSWORD",
        "    valueFrom:",
        "      secretKeyRef: {name: db, key: password}"
      ])
    )
    const leaky = await waitFor("leaky", "Failed")
    assert.include(leaky.status.message, "the password is [redacted]")
    assert.notInclude(JSON.stringify(leaky), value)
    const leakedLog = await logOf("leaky")
    assert.include(leakedLog, "the password is [redacted]")
    assert.notInclude(leakedLog, value)
    const stored = await server.withStore((store) =>
      Effect.map(Effect.orDie(store.list({ resource: "jobs", namespace })), (page) => JSON.stringify(page.items))
    )
    assert.notInclude(stored, value)
  })
})
