/**
 * Acceptance: the real kubectl (the gcloud dispatcher at /usr/bin/kubectl, pinned to 1.32 by our /version) against a
 * whole nodus server over TLS with the admin kubeconfig. One describe per area of the acceptance list: discovery,
 * namespaces, every `get` form, watches, apply (client-side, dry run, server-side), create, replace, patch, delete,
 * wait, explain, edit, a wrong token and project deletion. Each command's exit code and output are checked, and
 * every write is checked again on the server through raw HTTPS.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { chmodSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { parse as parseYaml } from "yaml"
import { eventually } from "../support/Eventually.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"
import {
  api,
  type Background,
  jsonDocuments,
  kubectl,
  parseTable,
  requireKubectl,
  type Result,
  show,
  startKubectl
} from "./Clients.ts"

let server: TestServer

beforeAll(async () => {
  requireKubectl()
  server = await startTestServer({ tls: true })
})
afterAll(() => server?.stop())

// ---------------------------------------------------------------------------------------------------------------
// Fixtures, written through raw HTTPS so that the kubectl command under test is the only kubectl in play.

const jobsPath = (namespace: string, name?: string) =>
  `/apis/nodus.dev/v1/namespaces/${namespace}/jobs${name === undefined ? "" : `/${name}`}`

const createNamespace = async (name: string) => {
  const reply = await api(server, "POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name } }
  })
  assert.strictEqual(reply.status, 201, reply.text)
}

interface JobFixture {
  readonly labels?: Record<string, string>
  readonly image?: string
}

const createJob = async (namespace: string, name: string, fixture: JobFixture = {}) => {
  const reply = await api(server, "POST", jobsPath(namespace), {
    body: {
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      metadata: { name, labels: fixture.labels ?? { team: "a" } },
      spec: { image: fixture.image ?? "python:3.12", command: ["python", "train.py"] }
    }
  })
  assert.strictEqual(reply.status, 201, reply.text)
  return reply.body
}

/** The job as the server has it (undefined on 404). */
const readJob = async (namespace: string, name: string): Promise<any> => {
  const reply = await api(server, "GET", jobsPath(namespace, name))
  if (reply.status === 404) return undefined
  assert.strictEqual(reply.status, 200, reply.text)
  return reply.body
}

/** Writes a manifest into the server's directory and returns its path. */
const manifest = (file: string, text: string): string => {
  const path = join(server.directory, file)
  writeFileSync(path, text)
  return path
}

/** A Job manifest; `backoffLimit` is a field that may change after create (spec: Job, Immutability). */
const jobYaml = (
  namespace: string,
  name: string,
  options: { readonly image?: string; readonly team?: string; readonly backoffLimit?: number } = {}
) =>
  [
    "apiVersion: nodus.dev/v1",
    "kind: Job",
    "metadata:",
    `  name: ${name}`,
    `  namespace: ${namespace}`,
    "  labels:",
    `    team: ${options.team ?? "a"}`,
    "spec:",
    `  image: ${options.image ?? "python:3.12"}`,
    "  command: [python, train.py]",
    ...(options.backoffLimit === undefined ? [] : [`  backoffLimit: ${options.backoffLimit}`]),
    ""
  ].join("\n")

/**
 * Runs `steps` while a background kubectl runs, then stops it (kubectl catches SIGTERM and exits 1) and returns its
 * result, failing if it had already ended by itself. When a step fails, the error carries what kubectl printed.
 */
const whileRunning = async (background: Background, steps: () => Promise<void>): Promise<Result> => {
  try {
    await steps()
  } catch (error) {
    const result = await background.stop()
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${show(result)}`, { cause: error })
  }
  const running = background.running()
  const result = await background.stop()
  assert.isTrue(running, `kubectl ended by itself before it was stopped:\n${show(result)}`)
  return result
}

const names = (rows: ReadonlyArray<Record<string, string>>) => rows.map((row) => row["NAME"]).sort()

// ---------------------------------------------------------------------------------------------------------------

describe("api-resources", () => {
  it("lists the served kinds with short names, scope and group version", async () => {
    const result = await kubectl(server, ["api-resources"])
    assert.strictEqual(result.code, 0, show(result))
    const rows = parseTable(result.stdout)
    const row = (name: string) => {
      const found = rows.find((entry) => entry["NAME"] === name)
      assert.isDefined(found, `${name} missing from api-resources:\n${result.stdout}`)
      return found!
    }
    assert.deepStrictEqual(row("jobs"), {
      NAME: "jobs",
      SHORTNAMES: "nj",
      APIVERSION: "nodus.dev/v1",
      NAMESPACED: "true",
      KIND: "Job"
    })
    assert.deepStrictEqual(row("namespaces"), {
      NAME: "namespaces",
      SHORTNAMES: "ns",
      APIVERSION: "v1",
      NAMESPACED: "false",
      KIND: "Namespace"
    })
    assert.strictEqual(row("budgets")["NAMESPACED"], "false")
    assert.strictEqual(row("budgets")["APIVERSION"], "nodus.dev/v1")
    assert.strictEqual(row("trainingjobs")["APIVERSION"], "nodus.dev/v1beta1")
    assert.strictEqual(row("trainingjobs")["NAMESPACED"], "true")
  })
})

describe("create namespace", () => {
  it("creates a project that get and the server both see", async () => {
    const created = await kubectl(server, ["create", "namespace", "demo"])
    assert.strictEqual(created.code, 0, show(created))
    assert.strictEqual(created.stdout.trim(), "namespace/demo created")

    const got = await kubectl(server, ["get", "namespace", "demo"])
    assert.strictEqual(got.code, 0, show(got))
    assert.deepStrictEqual(parseTable(got.stdout).map((row) => [row["NAME"], row["STATUS"]]), [["demo", "Active"]])

    const reply = await api(server, "GET", "/api/v1/namespaces/demo")
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.body.metadata.name, "demo")
  })
})

describe("get", () => {
  beforeAll(async () => {
    await createNamespace("get-a")
    await createNamespace("get-b")
    await createJob("get-a", "alpha", { labels: { team: "a" }, image: "python:3.12" })
    await createJob("get-a", "beta", { labels: { team: "b" }, image: "pytorch:2.5" })
    await createJob("get-a", "gamma", { labels: { team: "a", gone: "yes" } })
    await createJob("get-b", "delta", { labels: { team: "c" } })
    const sandbox = await api(server, "POST", "/apis/nodus.dev/v1/namespaces/get-a/sandboxes", {
      body: { apiVersion: "nodus.dev/v1", kind: "Sandbox", metadata: { name: "sbx-1" }, spec: { image: "tools:1" } }
    })
    assert.strictEqual(sandbox.status, 201, sandbox.text)
    const budget = await api(server, "POST", "/apis/nodus.dev/v1/budgets", {
      body: {
        apiVersion: "nodus.dev/v1",
        kind: "Budget",
        metadata: { name: "get-budget" },
        spec: { amountUSD: "100", period: "Monthly" }
      }
    })
    assert.strictEqual(budget.status, 201, budget.text)
  })

  it("-n lists the jobs of one project", async () => {
    const result = await kubectl(server, ["get", "jobs", "-n", "get-a"])
    assert.strictEqual(result.code, 0, show(result))
    const rows = parseTable(result.stdout)
    assert.deepStrictEqual(names(rows), ["alpha", "beta", "gamma"])
    assert.isTrue(result.stdout.startsWith("NAME"), result.stdout)
    assert.notInclude(result.stdout, "IMAGE", "IMAGE is a wide column")
  })

  it("-A lists every project with a NAMESPACE column", async () => {
    const result = await kubectl(server, ["get", "jobs", "-A"])
    assert.strictEqual(result.code, 0, show(result))
    const rows = parseTable(result.stdout).map((row) => `${row["NAMESPACE"]}/${row["NAME"]}`)
    for (const expected of ["get-a/alpha", "get-a/beta", "get-a/gamma", "get-b/delta"]) {
      assert.include(rows, expected, result.stdout)
    }
  })

  it("-o wide shows the wide columns", async () => {
    const result = await kubectl(server, ["get", "jobs", "-n", "get-a", "-o", "wide"])
    assert.strictEqual(result.code, 0, show(result))
    const rows = parseTable(result.stdout)
    assert.strictEqual(rows.find((row) => row["NAME"] === "alpha")?.["IMAGE"], "python:3.12", result.stdout)
    assert.strictEqual(rows.find((row) => row["NAME"] === "beta")?.["IMAGE"], "pytorch:2.5", result.stdout)
  })

  it("-o json prints the objects", async () => {
    const result = await kubectl(server, ["get", "jobs", "-n", "get-a", "-o", "json"])
    assert.strictEqual(result.code, 0, show(result))
    const list = JSON.parse(result.stdout)
    assert.strictEqual(list.kind, "List")
    assert.deepStrictEqual(list.items.map((item: any) => item.metadata.name).sort(), ["alpha", "beta", "gamma"])
    const alpha = list.items.find((item: any) => item.metadata.name === "alpha")
    assert.strictEqual(alpha.apiVersion, "nodus.dev/v1")
    assert.strictEqual(alpha.kind, "Job")
    assert.strictEqual(alpha.spec.image, "python:3.12")
    assert.strictEqual(alpha.metadata.namespace, "get-a")
  })

  it("-o yaml prints the objects", async () => {
    const result = await kubectl(server, ["get", "job", "beta", "-n", "get-a", "-o", "yaml"])
    assert.strictEqual(result.code, 0, show(result))
    const job = parseYaml(result.stdout)
    assert.strictEqual(job.kind, "Job")
    assert.strictEqual(job.metadata.name, "beta")
    assert.deepStrictEqual(job.metadata.labels, { team: "b" })
    assert.strictEqual(job.spec.image, "pytorch:2.5")
  })

  it("-o name prints kind.group/name", async () => {
    const result = await kubectl(server, ["get", "jobs", "-n", "get-a", "-o", "name"])
    assert.strictEqual(result.code, 0, show(result))
    assert.deepStrictEqual(result.stdout.trim().split("\n").sort(), [
      "job.nodus.dev/alpha",
      "job.nodus.dev/beta",
      "job.nodus.dev/gamma"
    ])
  })

  it("-l filters by a set-based label selector", async () => {
    const result = await kubectl(server, ["get", "jobs", "-A", "-l", "team in (a,b),!gone"])
    assert.strictEqual(result.code, 0, show(result))
    assert.deepStrictEqual(names(parseTable(result.stdout)), ["alpha", "beta"])
  })

  it("--field-selector filters by metadata.name", async () => {
    const result = await kubectl(server, ["get", "jobs", "-A", "--field-selector", "metadata.name=beta"])
    assert.strictEqual(result.code, 0, show(result))
    assert.deepStrictEqual(parseTable(result.stdout).map((row) => `${row["NAMESPACE"]}/${row["NAME"]}`), ["get-a/beta"])
  })

  it("get nodus -A lists every kind of the category with kind-qualified names", async () => {
    const result = await kubectl(server, ["get", "nodus", "-A"])
    assert.strictEqual(result.code, 0, show(result))
    const listed = result.stdout.split("\n").flatMap((line) => line.trim().split(/\s+/))
    for (
      const expected of [
        "job.nodus.dev/alpha",
        "job.nodus.dev/delta",
        "sandbox.nodus.dev/sbx-1",
        "budget.nodus.dev/get-budget"
      ]
    ) {
      assert.include(listed, expected, result.stdout)
    }
  })

  it("get jobs.nodus.dev resolves the group-qualified name", async () => {
    const result = await kubectl(server, ["get", "jobs.nodus.dev", "-n", "get-a"])
    assert.strictEqual(result.code, 0, show(result))
    assert.deepStrictEqual(names(parseTable(result.stdout)), ["alpha", "beta", "gamma"])
  })

  it("get nj resolves the short name", async () => {
    const result = await kubectl(server, ["get", "nj", "-n", "get-b"])
    assert.strictEqual(result.code, 0, show(result))
    assert.deepStrictEqual(names(parseTable(result.stdout)), ["delta"])
  })
})

describe("get -w", () => {
  beforeAll(() => createNamespace("watch"))

  it("get jobs -w prints a line when a job is created and when it is deleted", async () => {
    await createJob("watch", "seed")
    const watcher = startKubectl(server, ["get", "jobs", "-n", "watch", "-w"])
    const result = await whileRunning(watcher, async () => {
      // The seed row means the list is printed; the watch starts from the list's resourceVersion, so nothing is missed.
      await eventually("the initial list", () => /^seed\s/m.test(watcher.stdout()), { timeoutMs: 15_000 })
      await createJob("watch", "live")
      await eventually("the ADDED line", () => /^live\s/m.test(watcher.stdout()), { timeoutMs: 15_000 })
      const deleted = await api(server, "DELETE", jobsPath("watch", "live"))
      assert.strictEqual(deleted.status, 200, deleted.text)
      await eventually("the DELETED line", () => watcher.stdout().match(/^live\s/gm)?.length === 2, {
        timeoutMs: 15_000
      })
    })
    assert.deepStrictEqual(parseTable(result.stdout).map((row) => row["NAME"]), ["seed", "live", "live"], result.stdout)
    assert.strictEqual(result.stderr, "")
  })

  it("get job X -w --output-watch-events -o json prints ADDED, MODIFIED and DELETED events", async () => {
    await createJob("watch", "watched")
    const watcher = startKubectl(server, [
      "get",
      "job",
      "watched",
      "-n",
      "watch",
      "-w",
      "--output-watch-events",
      "-o",
      "json"
    ])
    const result = await whileRunning(watcher, async () => {
      await eventually("the ADDED event", () => jsonDocuments(watcher.stdout()).length === 1, { timeoutMs: 15_000 })
      const patched = await api(server, "PATCH", jobsPath("watch", "watched"), {
        body: { spec: { backoffLimit: 3 } },
        contentType: "application/merge-patch+json"
      })
      assert.strictEqual(patched.status, 200, patched.text)
      await eventually("the MODIFIED event", () => jsonDocuments(watcher.stdout()).length === 2, { timeoutMs: 15_000 })
      const deleted = await api(server, "DELETE", jobsPath("watch", "watched"))
      assert.strictEqual(deleted.status, 200, deleted.text)
      await eventually("the DELETED event", () => jsonDocuments(watcher.stdout()).length === 3, { timeoutMs: 15_000 })
    })
    const events = jsonDocuments(result.stdout)
    assert.deepStrictEqual(events.map((event) => event.type), ["ADDED", "MODIFIED", "DELETED"], result.stdout)
    assert.deepStrictEqual(events.map((event) => event.object.metadata.name), ["watched", "watched", "watched"])
    assert.deepStrictEqual(events.map((event) => event.object.spec.backoffLimit), [undefined, 3, 3])
    assert.strictEqual(events[0].object.kind, "Job")
  })
})

describe("apply -f", () => {
  beforeAll(() => createNamespace("apply"))

  it("creates, reports unchanged, then configures", async () => {
    const file = manifest("apply-1.yaml", jobYaml("apply", "app-1"))
    const created = await kubectl(server, ["apply", "-f", file])
    assert.strictEqual(created.code, 0, show(created))
    assert.strictEqual(created.stdout.trim(), "job.nodus.dev/app-1 created")
    const first = await readJob("apply", "app-1")
    assert.strictEqual(first.spec.image, "python:3.12")
    assert.include(first.metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"], "python:3.12")

    const again = await kubectl(server, ["apply", "-f", file])
    assert.strictEqual(again.code, 0, show(again))
    assert.strictEqual(again.stdout.trim(), "job.nodus.dev/app-1 unchanged")
    assert.strictEqual((await readJob("apply", "app-1")).metadata.resourceVersion, first.metadata.resourceVersion)

    manifest("apply-1.yaml", jobYaml("apply", "app-1", { backoffLimit: 2, team: "b" }))
    const configured = await kubectl(server, ["apply", "-f", file])
    assert.strictEqual(configured.code, 0, show(configured))
    assert.strictEqual(configured.stdout.trim(), "job.nodus.dev/app-1 configured")
    const updated = await readJob("apply", "app-1")
    assert.strictEqual(updated.spec.backoffLimit, 2)
    assert.strictEqual(updated.spec.image, "python:3.12")
    assert.deepStrictEqual(updated.metadata.labels, { team: "b" })
    assert.strictEqual(updated.metadata.uid, first.metadata.uid)
  })

  it("--dry-run=server reports the change and changes nothing", async () => {
    const file = manifest("apply-2.yaml", jobYaml("apply", "app-2"))
    const created = await kubectl(server, ["apply", "-f", file])
    assert.strictEqual(created.code, 0, show(created))
    const before = await readJob("apply", "app-2")

    manifest("apply-2.yaml", jobYaml("apply", "app-2", { backoffLimit: 4 }))
    const configured = await kubectl(server, ["apply", "-f", file, "--dry-run=server"])
    assert.strictEqual(configured.code, 0, show(configured))
    assert.strictEqual(configured.stdout.trim(), "job.nodus.dev/app-2 configured (server dry run)")
    const after = await readJob("apply", "app-2")
    assert.isUndefined(after.spec.backoffLimit)
    assert.deepStrictEqual(after.spec, before.spec)
    assert.strictEqual(after.metadata.resourceVersion, before.metadata.resourceVersion)

    const fresh = manifest("apply-3.yaml", jobYaml("apply", "app-3"))
    const dryCreate = await kubectl(server, ["apply", "-f", fresh, "--dry-run=server"])
    assert.strictEqual(dryCreate.code, 0, show(dryCreate))
    assert.strictEqual(dryCreate.stdout.trim(), "job.nodus.dev/app-3 created (server dry run)")
    assert.isUndefined(await readJob("apply", "app-3"), "a dry-run create must not persist the object")
  })

  it("--server-side creates the object with an Apply entry for manager kubectl", async () => {
    const file = manifest("apply-ssa.yaml", jobYaml("apply", "ssa-1"))
    const applied = await kubectl(server, ["apply", "--server-side", "-f", file])
    assert.strictEqual(applied.code, 0, show(applied))
    assert.strictEqual(applied.stdout.trim(), "job.nodus.dev/ssa-1 serverside-applied")
    const job = await readJob("apply", "ssa-1")
    assert.strictEqual(job.spec.image, "python:3.12")
    const entries = (job.metadata.managedFields ?? []).map((entry: any) => ({
      manager: entry.manager,
      operation: entry.operation
    }))
    assert.deepInclude(entries, { manager: "kubectl", operation: "Apply" }, JSON.stringify(job.metadata.managedFields))
  })

  it("--server-side updates the object and keeps the Apply entry for manager kubectl", async () => {
    const file = manifest("apply-ssa2.yaml", jobYaml("apply", "ssa-2"))
    const first = await kubectl(server, ["apply", "--server-side", "-f", file])
    assert.strictEqual(first.code, 0, show(first))
    manifest("apply-ssa2.yaml", jobYaml("apply", "ssa-2", { backoffLimit: 3 }))
    const applied = await kubectl(server, ["apply", "--server-side", "-f", file])
    assert.strictEqual(applied.code, 0, show(applied))
    assert.strictEqual(applied.stdout.trim(), "job.nodus.dev/ssa-2 serverside-applied")
    const job = await readJob("apply", "ssa-2")
    assert.strictEqual(job.spec.backoffLimit, 3)
    assert.strictEqual(job.metadata.generation, 2)
    const entries = (job.metadata.managedFields ?? []).map((entry: any) => ({
      manager: entry.manager,
      operation: entry.operation
    }))
    assert.deepInclude(entries, { manager: "kubectl", operation: "Apply" }, JSON.stringify(job.metadata.managedFields))
  })
})

describe("create -f", () => {
  beforeAll(() => createNamespace("create"))

  it("creates once, then fails with AlreadyExists", async () => {
    const file = manifest("create-1.yaml", jobYaml("create", "cr-1"))
    const created = await kubectl(server, ["create", "-f", file])
    assert.strictEqual(created.code, 0, show(created))
    assert.strictEqual(created.stdout.trim(), "job.nodus.dev/cr-1 created")
    const first = await readJob("create", "cr-1")
    assert.strictEqual(first.spec.image, "python:3.12")

    const again = await kubectl(server, ["create", "-f", file])
    assert.notStrictEqual(again.code, 0, show(again))
    assert.include(
      again.stderr,
      `Error from server (AlreadyExists): error when creating "${file}": jobs.nodus.dev "cr-1" already exists`
    )
    const after = await readJob("create", "cr-1")
    assert.strictEqual(after.metadata.uid, first.metadata.uid)
    assert.strictEqual(after.metadata.resourceVersion, first.metadata.resourceVersion)
  })

  it("creates a TopUp (a kind without PATCH: validation falls back to /openapi/v2), and get creditgrants shows its credits", async () => {
    const file = manifest(
      "topup.yaml",
      "apiVersion: nodus.dev/v1\nkind: TopUp\nmetadata: {name: kubectl-topup}\nspec: {amountUSD: \"12.50\"}\n"
    )
    const created = await kubectl(server, ["create", "-f", file])
    assert.strictEqual(created.code, 0, show(created))
    assert.strictEqual(created.stdout.trim(), "topup.nodus.dev/kubectl-topup created")
    const grants = await kubectl(server, ["get", "creditgrants"])
    assert.strictEqual(grants.code, 0, show(grants))
    const row = parseTable(grants.stdout).find((entry) => entry["NAME"] === "topup-kubectl-topup")
    assert.deepStrictEqual(
      { amount: row?.["AMOUNT"], source: row?.["SOURCE"] },
      { amount: "$12.50", source: "TopUp" },
      grants.stdout
    )
  })
})

describe("replace -f", () => {
  beforeAll(() => createNamespace("replace"))

  it("replaces the object with the edited manifest", async () => {
    const original = await createJob("replace", "rep-1")
    const file = manifest("replace-1.yaml", jobYaml("replace", "rep-1", { backoffLimit: 5, team: "z" }))
    const replaced = await kubectl(server, ["replace", "-f", file])
    assert.strictEqual(replaced.code, 0, show(replaced))
    assert.strictEqual(replaced.stdout.trim(), "job.nodus.dev/rep-1 replaced")
    const job = await readJob("replace", "rep-1")
    assert.strictEqual(job.spec.backoffLimit, 5)
    assert.deepStrictEqual(job.metadata.labels, { team: "z" })
    assert.strictEqual(job.metadata.uid, original.metadata.uid)
    assert.notStrictEqual(job.metadata.resourceVersion, original.metadata.resourceVersion)
  })
})

describe("patch", () => {
  beforeAll(async () => {
    await createNamespace("patch")
    await createJob("patch", "pat-1")
  })

  it("--type merge changes the spec", async () => {
    const result = await kubectl(server, [
      "patch",
      "job",
      "pat-1",
      "-n",
      "patch",
      "--type",
      "merge",
      "-p",
      "{\"spec\":{\"backoffLimit\":2},\"metadata\":{\"labels\":{\"team\":null}}}"
    ])
    assert.strictEqual(result.code, 0, show(result))
    assert.strictEqual(result.stdout.trim(), "job.nodus.dev/pat-1 patched")
    const job = await readJob("patch", "pat-1")
    assert.strictEqual(job.spec.backoffLimit, 2)
    assert.isUndefined(job.metadata.labels?.["team"], "null removes the label")
  })

  it("--type json applies JSON patch operations", async () => {
    const result = await kubectl(server, [
      "patch",
      "job",
      "pat-1",
      "-n",
      "patch",
      "--type",
      "json",
      "-p",
      "[{\"op\":\"replace\",\"path\":\"/spec/recovery/checkpoint/retainAfterFinish\",\"value\":\"24h\"},{\"op\":\"add\",\"path\":\"/spec/timeout\",\"value\":\"2h\"}]"
    ])
    assert.strictEqual(result.code, 0, show(result))
    assert.strictEqual(result.stdout.trim(), "job.nodus.dev/pat-1 patched")
    const job = await readJob("patch", "pat-1")
    assert.strictEqual(job.spec.recovery.checkpoint.retainAfterFinish, "24h")
    assert.strictEqual(job.spec.timeout, "2h")
  })

  it("--subresource=status --type merge changes only the status", async () => {
    const before = await readJob("patch", "pat-1")
    const result = await kubectl(server, [
      "patch",
      "job",
      "pat-1",
      "-n",
      "patch",
      "--subresource=status",
      "--type",
      "merge",
      "-p",
      "{\"status\":{\"phase\":\"Running\"},\"spec\":{\"image\":\"ignored:1\"}}"
    ])
    assert.strictEqual(result.code, 0, show(result))
    assert.strictEqual(result.stdout.trim(), "job.nodus.dev/pat-1 patched")
    const job = await readJob("patch", "pat-1")
    assert.strictEqual(job.status?.phase, "Running")
    assert.strictEqual(job.spec.image, before.spec.image, "a status write ignores spec")
    assert.strictEqual(job.metadata.generation, before.metadata.generation)
  })
})

describe("delete", () => {
  beforeAll(() => createNamespace("delete"))

  it("deletes the job, and get then reports NotFound", async () => {
    await createJob("delete", "del-1")
    const deleted = await kubectl(server, ["delete", "job", "del-1", "-n", "delete"])
    assert.strictEqual(deleted.code, 0, show(deleted))
    assert.strictEqual(deleted.stdout.trim(), "job.nodus.dev \"del-1\" deleted")
    assert.isUndefined(await readJob("delete", "del-1"))

    const got = await kubectl(server, ["get", "job", "del-1", "-n", "delete"])
    assert.notStrictEqual(got.code, 0, show(got))
    assert.include(got.stderr, "Error from server (NotFound): jobs.nodus.dev \"del-1\" not found")
  })
})

describe("wait", () => {
  beforeAll(() => createNamespace("wait"))

  it("--for=jsonpath returns once another call sets the status", async () => {
    await createJob("wait", "wait-1")
    const waiter = startKubectl(server, [
      "wait",
      "--for=jsonpath={.status.phase}=Succeeded",
      "job/wait-1",
      "-n",
      "wait",
      "--timeout=25s"
    ])
    await new Promise((resolve) => setTimeout(resolve, 1500))
    assert.isTrue(
      waiter.running(),
      `kubectl wait returned before the status was set:\n${waiter.stdout()}${waiter.stderr()}`
    )
    const patched = await kubectl(server, [
      "patch",
      "job",
      "wait-1",
      "-n",
      "wait",
      "--subresource=status",
      "--type",
      "merge",
      "-p",
      "{\"status\":{\"phase\":\"Succeeded\"}}"
    ])
    assert.strictEqual(patched.code, 0, show(patched))
    const result = await waiter.done
    assert.strictEqual(result.code, 0, show(result))
    assert.strictEqual(result.stdout.trim(), "job.nodus.dev/wait-1 condition met")
    assert.strictEqual((await readJob("wait", "wait-1")).status.phase, "Succeeded")
  })

  it("--for=delete returns once the job is gone", async () => {
    await createJob("wait", "wait-2")
    const waiter = startKubectl(server, ["wait", "--for=delete", "job/wait-2", "-n", "wait", "--timeout=25s"])
    await new Promise((resolve) => setTimeout(resolve, 1500))
    assert.isTrue(
      waiter.running(),
      `kubectl wait returned before the job was deleted:\n${waiter.stdout()}${waiter.stderr()}`
    )
    const deleted = await api(server, "DELETE", jobsPath("wait", "wait-2"))
    assert.strictEqual(deleted.status, 200, deleted.text)
    const result = await waiter.done
    assert.strictEqual(result.code, 0, show(result))
    assert.strictEqual(result.stdout.trim(), "job.nodus.dev/wait-2 condition met")
    assert.isUndefined(await readJob("wait", "wait-2"))
  })
})

describe("explain", () => {
  it("explain jobs.nodus.dev.spec prints the field documentation", async () => {
    const result = await kubectl(server, ["explain", "jobs.nodus.dev.spec"])
    assert.strictEqual(result.code, 0, show(result))
    assert.match(result.stdout, /^KIND:\s+Job$/m)
    assert.match(result.stdout, /^GROUP:\s+nodus\.dev$/m)
    assert.match(result.stdout, /^FIELD:\s+spec\b/m)
    const description = result.stdout.split(/^DESCRIPTION:$/m)[1]?.split(/^[A-Z]+:/m)[0]?.trim() ?? ""
    assert.isAbove(description.length, 0, result.stdout)
    assert.notStrictEqual(description, "<empty>", result.stdout)
  })

  it("explain jobs.nodus.dev.spec.recovery prints each field with its type and the schema's description", async () => {
    const result = await kubectl(server, ["explain", "jobs.nodus.dev.spec.recovery"])
    assert.strictEqual(result.code, 0, show(result))
    // A field of a named schema is shown with the schema's name as its type, as kubectl shows <ObjectMeta>.
    assert.match(result.stdout, /^FIELD:\s+recovery\s+<Recovery>$/m, result.stdout)
    assert.include(result.stdout, "Recovery from preemption and node loss", result.stdout)
    const fields = result.stdout.split(/^FIELDS:$/m)[1] ?? ""
    assert.match(fields, /^\s+maxAttempts\s+<integer>$/m, result.stdout)
    assert.match(fields, /^\s+checkpoint\s+<Checkpoint>\n\s+Checkpoint settings\./m, result.stdout)
    assert.match(fields, /^\s+minProgressDuration\s+<string>\n\s+Run time that counts as progress\./m, result.stdout)
    assert.match(fields, /^\s+continuity\s+<string>$/m, result.stdout)
    assert.include(fields, "Infrastructure replacements per index, 1 to 32", result.stdout)
    // Enumerations reach kubectl as the schema's enum.
    assert.match(fields, /enum: Checkpointed, Restartable, Ephemeral/u, result.stdout)
  })
})

describe("edit", () => {
  beforeAll(() => createNamespace("edit"))

  it("saves what the editor wrote", async () => {
    await createJob("edit", "ed-1")
    const editor = join(server.directory, "editor.sh")
    // Adds backoffLimit (a field that may change after create) beside spec.image, at its indentation.
    writeFileSync(
      editor,
      "#!/bin/sh\nsed -i 's/^\\( *\\)image: \\(.*\\)$/\\1image: \\2\\n\\1backoffLimit: 7/' \"$1\"\n"
    )
    chmodSync(editor, 0o755)
    const result = await kubectl(server, ["edit", "job", "ed-1", "-n", "edit"], {
      env: { EDITOR: editor, KUBE_EDITOR: editor }
    })
    assert.strictEqual(result.code, 0, show(result))
    assert.strictEqual(result.stdout.trim(), "job.nodus.dev/ed-1 edited")
    const job = await readJob("edit", "ed-1")
    assert.strictEqual(job.spec.backoffLimit, 7)
    assert.strictEqual(job.spec.image, "python:3.12")
    assert.deepStrictEqual(job.spec.command, ["python", "train.py"])
  })
})

describe("authentication", () => {
  it("a wrong token is refused as Unauthorized", async () => {
    const bad = join(server.directory, "kubeconfig-bad-token")
    const good = readFileSync(server.kubeconfigPath, "utf8")
    const wrong = good.replace(/token: .*/, "token: nds_wrong-token-0000000000000000000000000000000000")
    assert.notStrictEqual(wrong, good, "the kubeconfig carries a token line")
    writeFileSync(bad, wrong)
    const result = await kubectl(server, ["get", "jobs", "-n", "demo"], { env: { KUBECONFIG: bad } })
    assert.notStrictEqual(result.code, 0, show(result))
    assert.include(result.stderr, "Unauthorized")
    assert.strictEqual(result.stdout, "")
  })
})

describe("delete namespace", () => {
  it("deletes a project and its jobs", async () => {
    const created = await kubectl(server, ["create", "namespace", "demo2"])
    assert.strictEqual(created.code, 0, show(created))
    await createJob("demo2", "doomed-1")
    await createJob("demo2", "doomed-2")

    const deleted = await kubectl(server, ["delete", "namespace", "demo2"])
    assert.strictEqual(deleted.code, 0, show(deleted))
    assert.strictEqual(deleted.stdout.trim(), "namespace \"demo2\" deleted")

    // kubectl delete waits until the namespace is gone, which happens only once it is empty.
    const namespace = await api(server, "GET", "/api/v1/namespaces/demo2")
    assert.strictEqual(namespace.status, 404, namespace.text)
    const all = await api(server, "GET", "/apis/nodus.dev/v1/jobs")
    assert.strictEqual(all.status, 200, all.text)
    assert.deepStrictEqual(all.body.items.filter((item: any) => item.metadata.namespace === "demo2"), [])

    const got = await kubectl(server, ["get", "namespace", "demo2"])
    assert.notStrictEqual(got.code, 0, show(got))
    assert.include(got.stderr, "namespaces \"demo2\" not found")
  })
})
