/**
 * Acceptance: a WebhookEndpoint through the real kubectl (docs/webhooks.md). `kubectl create -o jsonpath` prints the
 * signing secret of the create response — the one time it is shown; `get -o yaml`, the table and a watch never show
 * it, and the delivery log reads with `get --raw`.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { eventually } from "../support/Eventually.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"
import { kubectl, requireKubectl, show } from "./Clients.ts"

let server: TestServer

beforeAll(async () => {
  requireKubectl()
  // The receiver's name does not resolve (no network): the ping is tried, and stays Pending.
  server = await startTestServer({ tls: true })
})
afterAll(() => server?.stop())

describe("kubectl and a WebhookEndpoint", () => {
  it("prints the signing secret once, at create; no read shows it; the log reads with get --raw", async () => {
    const file = join(server.directory, "hooks.yaml")
    writeFileSync(
      file,
      "apiVersion: nodus.dev/v1\nkind: WebhookEndpoint\nmetadata: {name: hooks}\nspec: {url: https://hooks.example.com/nodus, eventTypes: [\"job.*\"]}\n"
    )
    const created = await kubectl(server, ["create", "-f", file, "-o", "jsonpath={.status.signingSecret}"])
    assert.strictEqual(created.code, 0, show(created))
    const secret = created.stdout.trim()
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/u)
    const key = secret.slice("whsec_".length)
    for (
      const args of [["get", "webhookendpoints.nodus.dev", "hooks", "-o", "yaml"], [
        "get",
        "webhookendpoints.nodus.dev"
      ], ["get", "webhookendpoints.nodus.dev", "-o", "json"]]
    ) {
      const read = await kubectl(server, args)
      assert.strictEqual(read.code, 0, show(read))
      assert.notInclude(read.stdout, key)
    }
    let log: Array<any> = []
    await eventually("the ping in the log", async () => {
      const raw = await kubectl(server, ["get", "--raw", "/apis/nodus.dev/v1/webhookendpoints/hooks/deliveries"])
      log = raw.code === 0 ? JSON.parse(raw.stdout).items : []
      return log.length > 0
    }, { timeoutMs: 15_000 })
    assert.strictEqual(log[0].type, "webhookendpoint.ping")
    assert.notInclude(JSON.stringify(log), key)
  })
})
