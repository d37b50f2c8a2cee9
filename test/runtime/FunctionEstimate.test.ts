/**
 * A Function's estimate (kinds/function/FunctionEstimate.ts; docs/kinds/Function.md, "Estimate"): on a dry run
 * and a create, the rate and first hold of a worker, the holds of its warm workers, an hour's band from minWorkers warm
 * to maxWorkers busy, the placement preview; a create whose warm workers' holds do not fit the balance is refused with
 * the code and a fix, while a Function scaled to zero holds nothing at create and is admitted.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Decimal } from "decimal.js"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

const path = "/apis/nodus.dev/v1/namespaces/fe/functions"
const fn = (name: string, scaling: Record<string, unknown>) => ({
  apiVersion: "nodus.dev/v1",
  kind: "Function",
  metadata: { name },
  spec: { image: "python:3.12", code: { module: "app", qualname: "f" }, resources: { cpu: "2" }, scaling }
})

describe("a Function's estimate", () => {
  let server: TestServer
  beforeAll(async () => {
    // 1 USD of starter credits: a few warm workers' holds fit, many do not.
    server = await startTestServer({ starterCreditsMicro: 1_000_000n })
    await request(server, "POST", "/api/v1/namespaces", { body: { metadata: { name: "fe" } } })
  })
  afterAll(() => server.stop())

  it("a dry run shows a worker's rate and hold, the warm workers' holds and an hour from minWorkers to maxWorkers", async () => {
    const dry = await request(server, "POST", `${path}?dryRun=All`, {
      body: fn("est", { minWorkers: 1, maxWorkers: 4 })
    })
    assert.strictEqual(dry.status, 201, dry.text)
    const estimate = dry.body.status.estimate
    const rate = new Decimal(estimate.rateUSDPerHour)
    assert.isTrue(rate.greaterThan(0))
    assert.strictEqual(estimate.concurrentHoldUSD, estimate.holdUSD)
    // An hour of one warm worker and of four busy ones, at the worker's rate (each at least the minimum charge).
    assert.isTrue(new Decimal(estimate.costUSD.p50).greaterThanOrEqualTo(rate))
    assert.isTrue(new Decimal(estimate.costUSD.p90).equals(new Decimal(estimate.costUSD.p50).times(4)))
    assert.match(estimate.placementPreview.offering, /cpu/u)
    assert.include(estimate.warnings.map((warning: any) => warning.code), "UsageDependent")
    assert.isUndefined(estimate.blockingReasons)
  })

  it("warm workers whose holds do not fit the balance refuse the create, with the amounts; scaled to zero it is admitted", async () => {
    const many = await request(server, "POST", path, { body: fn("many", { minWorkers: 200, maxWorkers: 200 }) })
    assert.strictEqual(many.status, 402, many.text)
    assert.strictEqual(many.body.reason, "InsufficientCredits")
    assert.isString(many.body.fix)
    const dry = await request(server, "POST", `${path}?dryRun=All`, {
      body: fn("many", { minWorkers: 200, maxWorkers: 200 })
    })
    assert.strictEqual(dry.body.status.estimate.blockingReasons[0].code, "InsufficientCredits")
    const zero = await request(server, "POST", path, { body: fn("zero", { minWorkers: 0, maxWorkers: 200 }) })
    assert.strictEqual(zero.status, 201, zero.text)
    assert.strictEqual(zero.body.status.estimate.costUSD.p50, "0")
    assert.include(zero.body.status.estimate.warnings.map((warning: any) => warning.code), "ColdStart")
  })
})
