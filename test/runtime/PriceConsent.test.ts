/**
 * Price consent through the dry-run ETag (spec: Create semantics 1-2, property "Estimate price protection";
 * docs/billing.md, "Price consent"). The token first (round trip, tampering, another key, the 10 % rule), then the
 * server in sim mode, where the cheap capacity can honestly be taken between a dry run and its create: a bound create
 * is admitted after validUntil, refused with PriceConsentRequired when it would be placed above its bound, and a bound
 * Job is never placed above the bound later.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Result } from "effect"
import * as fc from "fast-check"
import { Ids } from "../../src/apiserver/Ids.ts"
import type { ResourceObject } from "../../src/core/meta/ObjectMeta.ts"
import {
  consentOf,
  decodeQuote,
  encodeQuote,
  keyId,
  keyTable,
  PriceConsent,
  type Quote
} from "../../src/runtime/PriceConsent.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { Store } from "../../src/store/Store.ts"
import { assertStatus, createProject, jobPath, jobsPath, mergePatch, v1 } from "../apiserver/api/Support.ts"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

const key = "k".repeat(43)

describe("the dry-run token", () => {
  const quoteArb: fc.Arbitrary<Quote> = fc.record({
    payload: fc.base64String({ minLength: 4, maxLength: 44 }),
    rateMicro: fc.option(fc.bigInt({ min: 0n, max: 10n ** 12n }), { nil: undefined }),
    pricebookVersion: fc.option(fc.string({ maxLength: 20 }), { nil: undefined })
  }).map(({ payload, rateMicro, pricebookVersion }) => ({
    payload,
    ...(rateMicro === undefined ? {} : { rateMicro }),
    ...(pricebookVersion === undefined ? {} : { pricebookVersion })
  }))

  it("round-trips, and is a valid strong ETag (a quoted opaque string)", () => {
    fc.assert(
      fc.property(quoteArb, (quote) => {
        const etag = encodeQuote(key, quote)
        assert.match(etag, /^"dryrun\.1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"$/u)
        assert.deepStrictEqual(decodeQuote(key, etag), quote)
      }),
      { numRuns: 300 }
    )
  })

  it("any changed character, or another key, makes it no token", () => {
    fc.assert(
      fc.property(quoteArb, fc.nat(), fc.constantFrom(..."AZaz09-_."), (quote, at, replacement) => {
        const etag = encodeQuote(key, quote)
        // Only the opaque part between the quotes and after the prefix changes.
        const index = 10 + (at % (etag.length - 11))
        fc.pre(etag[index] !== replacement)
        const tampered = `${etag.slice(0, index)}${replacement}${etag.slice(index + 1)}`
        assert.isUndefined(decodeQuote(key, tampered), tampered)
      }),
      { numRuns: 500 }
    )
    const etag = encodeQuote(key, { payload: "p", rateMicro: 2_490_000n })
    assert.isUndefined(decodeQuote("another-key", etag))
    assert.isUndefined(decodeQuote(key, etag.slice(1, -1)))
    assert.isUndefined(decodeQuote(key, `W/${etag}`))
    assert.isUndefined(decodeQuote(key, `"${"1".repeat(10)}"`))
  })

  it("a forged higher rate under the original MAC does not verify", () => {
    const etag = encodeQuote(key, { payload: "p", rateMicro: 2_490_000n, pricebookVersion: "v" })
    const [, claims, mac] = /^"dryrun\.1\.([^.]+)\.([^."]+)"$/u.exec(etag)!
    const forged = Buffer.from(JSON.stringify(["p", "100000000", "v"])).toString("base64url")
    assert.notStrictEqual(forged, claims)
    assert.isUndefined(decodeQuote(key, `"dryrun.1.${forged}.${mac}"`))
  })

  it("binds the rate plus 10 % (rounded down): at the bound admitted, one micro-USD above refused with both rates", () => {
    const subject = { group: "nodus.dev", kind: "jobs", name: "train" }
    const quote = { payload: "p", rateMicro: 2_490_000n, pricebookVersion: "nodus-2026-11.1" }
    assert.deepStrictEqual(consentOf(quote, 2_739_000n, subject), { bound: 2_739_000n, refusal: undefined })
    assert.deepStrictEqual(consentOf(quote, 1_000_000n, subject), { bound: 2_739_000n, refusal: undefined })
    // Nothing to compare with now (no estimate): admitted, and the bound still holds the placement.
    assert.deepStrictEqual(consentOf(quote, undefined, subject), { bound: 2_739_000n, refusal: undefined })
    const refused = consentOf(quote, 2_739_001n, subject).refusal!
    assert.strictEqual(refused.code, "PriceConsentRequired")
    assert.include(refused.message, "2.739001 USD/h")
    assert.include(refused.message, "2.739 USD/h")
    assert.include(refused.message, "2.49 USD/h (pricebook nodus-2026-11.1)")
    assert.include(refused.message, "jobs.nodus.dev \"train\"")
    assert.include(refused.fix!, "dryRun=All")
    // A dry run whose estimate named no rate binds the object only.
    assert.deepStrictEqual(consentOf({ payload: "p" }, 99_000_000n, subject), { bound: undefined, refusal: undefined })
  })
})

describe("the server key", () => {
  const object: ResourceObject = {
    apiVersion: "nodus.dev/v1",
    kind: "Job",
    metadata: {
      name: "train",
      namespace: "p",
      uid: "u",
      resourceVersion: "1",
      generation: 1,
      creationTimestamp: "2026-11-22T00:00:00Z"
    },
    spec: { image: "a" }
  }
  /** A server process's PriceConsent over the store in context (fresh: one per process). */
  const consent = Effect.gen(function*() {
    return yield* PriceConsent
  }).pipe(Effect.provide(Layer.fresh(PriceConsent.layer)))

  it.effect("is generated once and kept in the store: another process over the same store accepts the ETag", () =>
    Effect.gen(function*() {
      const first = yield* consent
      const second = yield* consent
      const etag = first.quote(object, { rateMicro: 2_490_000n, pricebookVersion: "v" })
      const quote = yield* second.verify(etag, object)
      assert.deepStrictEqual(quote.rateMicro, 2_490_000n)
      const stored = yield* (yield* Store).getRecord(keyTable, keyId, 0)
      assert.isTrue(Option.isSome(stored) && typeof stored.value === "string" && stored.value.length >= 43)
      // A change in the object (here its spec) is another payload.
      const other = yield* Effect.result(second.verify(etag, { ...object, spec: { image: "b" } }))
      assert.isTrue(Result.isFailure(other) && other.failure.code === "PreconditionFailed")
      // Another store has another key.
      const elsewhere = yield* Effect.result(
        Effect.flatMap(consent, (third) => third.verify(etag, object)).pipe(
          Effect.provide(Layer.fresh(MemoryStore.layer))
        )
      )
      assert.isTrue(Result.isFailure(elsewhere) && elsewhere.failure.code === "PreconditionFailed")
    }).pipe(Effect.provide(Layer.merge(Layer.fresh(MemoryStore.layer), Ids.layer))))
})

// Two single-GPU H100 offerings in the us: the cheaper one's rate plus 10 % (2.739) is below the other's (3.29).
const cheap = "h100-pcie-80gb-1x-us-41651579"
const dear = "h100-sxm-80gb-1x-us-13c99b9f"
const boundAnnotation = "nodus.dev/price-bound-usd-per-hour"
const clockPath = `${v1}/simulation/clock`

const job = (name: string, offerings: ReadonlyArray<string>, spec: Record<string, unknown> = {}, duration = "30m") => ({
  apiVersion: "nodus.dev/v1",
  kind: "Job",
  metadata: { name, annotations: { "sim.nodus.dev/duration": duration } },
  spec: {
    image: "ghcr.io/acme/train:1",
    resources: { gpu: { type: ["H100"], count: 1 } },
    placement: { offerings },
    expectedDuration: "30m",
    ...spec
  }
})

const dryRun = async (server: TestServer, project: string, body: unknown) => {
  const reply = await request(server, "POST", `${jobsPath(project)}?dryRun=All`, { body })
  assert.strictEqual(reply.status, 201, reply.text)
  return { estimate: reply.body.status.estimate, etag: reply.headers.get("etag")! }
}

const advance = async (server: TestServer, by: string): Promise<number> => {
  const reply = await request(server, "POST", clockPath, { body: { advance: by } })
  assert.strictEqual(reply.status, 200, reply.text)
  return Date.parse(reply.body.now)
}

/** A Job that holds every host of `offering` (one per variant in these servers) for ten hours. */
const occupy = async (server: TestServer, project: string, name: string, offering: string) => {
  const reply = await request(server, "POST", jobsPath(project), { body: job(name, [offering], {}, "10h") })
  assert.strictEqual(reply.status, 201, reply.text)
  // The test clock reads the store first, so the Job is placed (its host taken) when it answers.
  await advance(server, "1s")
}

const attemptsOf = async (server: TestServer, project: string, uid: string): Promise<ReadonlyArray<any>> => {
  const reply = await request(server, "GET", `${v1}/namespaces/${project}/attempts`)
  assert.strictEqual(reply.status, 200, reply.text)
  return (reply.body.items as ReadonlyArray<any>).filter((attempt) =>
    attempt.metadata.ownerReferences?.some((owner: any) => owner.uid === uid)
  )
}

describe("price consent on the server (sim mode, one host per offering variant)", () => {
  let server: TestServer | undefined
  afterEach(async () => {
    await server?.stop()
    server = undefined
  })

  const start = async (project: string) => {
    server = await startTestServer({ sim: { speed: 1, hostsPerVariant: 1 } })
    await createProject(server, project)
    return server
  }

  it("the dry run's ETag quotes the rate; a create with it is admitted after validUntil and carries the bound", async () => {
    const s = await start("consent")
    const body = job("train", [cheap, dear])
    const dry = await dryRun(s, "consent", body)
    assert.strictEqual(dry.estimate.rateUSDPerHour, "2.49")
    assert.strictEqual(dry.estimate.placementPreview.offering, cheap)
    assert.match(dry.etag, /^"dryrun\.1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"$/u)
    // The same dry run again quotes the same (the estimate is deterministic, the key is the server's).
    assert.strictEqual((await dryRun(s, "consent", body)).etag, dry.etag)

    const now = await advance(s, "20m")
    assert.isBelow(Date.parse(dry.estimate.validUntil), now)
    const created = await request(s, "POST", jobsPath("consent"), { body, headers: { "if-match": dry.etag } })
    assert.strictEqual(created.status, 201, created.text)
    assert.strictEqual(created.body.metadata.annotations[boundAnnotation], "2.739")
    assert.strictEqual(created.body.metadata.annotations["sim.nodus.dev/duration"], "30m")
    assert.isAbove(Date.parse(created.body.status.estimate.validUntil), now)
    const stored = await request(s, "GET", jobPath("consent", "train"))
    assert.strictEqual(stored.body.metadata.annotations[boundAnnotation], "2.739")

    // The bound is the server's: a replace of the original manifest keeps it, and a patch cannot raise or drop it. The
    // replace is read-modify-write: the Job's controller writes its status meanwhile, so a Conflict means read again.
    let replaced = await request(s, "PUT", jobPath("consent", "train"), {
      body: { ...body, metadata: { ...body.metadata, resourceVersion: stored.body.metadata.resourceVersion } }
    })
    for (let tries = 0; replaced.status === 409 && tries < 5; tries++) {
      const fresh = await request(s, "GET", jobPath("consent", "train"))
      replaced = await request(s, "PUT", jobPath("consent", "train"), {
        body: { ...body, metadata: { ...body.metadata, resourceVersion: fresh.body.metadata.resourceVersion } }
      })
    }
    assert.strictEqual(replaced.status, 200, replaced.text)
    assert.strictEqual(replaced.body.metadata.annotations[boundAnnotation], "2.739")
    for (const value of ["100", null]) {
      const patched = await mergePatch(s, jobPath("consent", "train"), {
        metadata: { annotations: { [boundAnnotation]: value } }
      })
      assert.strictEqual(patched.status, 200, patched.text)
      assert.strictEqual(patched.body.metadata.annotations[boundAnnotation], "2.739")
    }
  })

  it("an ETag that is not a dry run's of exactly this object is PreconditionFailed, and nothing is stored", async () => {
    const s = await start("tamper")
    const body = job("train", [cheap, dear])
    const { etag } = await dryRun(s, "tamper", body)
    const [, claims, mac] = /^"dryrun\.1\.([^.]+)\.([^."]+)"$/u.exec(etag)!
    const [payload] = JSON.parse(Buffer.from(claims!, "base64url").toString("utf8")) as [string]
    const raised = Buffer.from(JSON.stringify([payload, "100000000", "nodus-2026-11.1"])).toString("base64url")
    const candidates = [
      `"dryrun.1.${raised}.${mac}"`, // a higher rate under the dry run's MAC
      `"dryrun.1.${claims}.${mac!.startsWith("A") ? "B" : "A"}${mac!.slice(1)}"`, // the MAC changed
      (await dryRun(s, "tamper", job("other", [cheap, dear]))).etag, // another object's
      "\"1\"" // an object's ETag, not a dry run's
    ]
    for (const candidate of candidates) {
      const reply = await request(s, "POST", jobsPath("tamper"), { body, headers: { "if-match": candidate } })
      const status = assertStatus(s, reply, 412, "PreconditionFailed")
      assert.include(status.fix, "dryRun=All", candidate)
    }
    assert.strictEqual((await request(s, "GET", jobPath("tamper", "train"))).status, 404)
  })

  it("a create without If-Match behaves as before: no bound, and a bound sent in the body is dropped", async () => {
    const s = await start("plain")
    const body = job("train", [cheap, dear])
    const sent = {
      ...body,
      metadata: { ...body.metadata, annotations: { ...body.metadata.annotations, [boundAnnotation]: "1000" } }
    }
    const created = await request(s, "POST", jobsPath("plain"), { body: sent })
    assert.strictEqual(created.status, 201, created.text)
    assert.isUndefined(created.body.metadata.annotations[boundAnnotation])
    assert.strictEqual(created.body.metadata.annotations["sim.nodus.dev/duration"], "30m")
  })

  it("a bound below the rate the create would be placed at now is PriceConsentRequired; a fresh dry run's ETag is admitted", async () => {
    const s = await start("risen")
    const body = job("train", [cheap, dear])
    const before = await dryRun(s, "risen", body)
    assert.strictEqual(before.estimate.rateUSDPerHour, "2.49")
    // Someone else takes the cheap host between the dry run and the create.
    await occupy(s, "risen", "filler", cheap)
    const refused = await request(s, "POST", jobsPath("risen"), { body, headers: { "if-match": before.etag } })
    const status = assertStatus(s, refused, 428, "PriceConsentRequired")
    assert.include(status.message, "3.29 USD/h")
    assert.include(status.message, "2.739 USD/h")
    assert.include(status.message, "2.49 USD/h")
    assert.include(status.fix, "dryRun=All")
    assert.strictEqual((await request(s, "GET", jobPath("risen", "train"))).status, 404)

    const again = await dryRun(s, "risen", body)
    assert.strictEqual(again.estimate.rateUSDPerHour, "3.29")
    assert.notStrictEqual(again.etag, before.etag)
    const created = await request(s, "POST", jobsPath("risen"), { body, headers: { "if-match": again.etag } })
    assert.strictEqual(created.status, 201, created.text)
    assert.strictEqual(created.body.metadata.annotations[boundAnnotation], "3.619")
  })

  it("a bound Job is never placed above its bound: its second index waits for the cheap host instead", async () => {
    const s = await start("bound")
    const body = job("pair", [cheap, dear], { completions: 2, parallelism: 2 })
    const { etag } = await dryRun(s, "bound", body)
    const created = await request(s, "POST", jobsPath("bound"), { body, headers: { "if-match": etag } })
    assert.strictEqual(created.status, 201, created.text)
    await advance(s, "10m")
    // The unbound Job would have taken the dear host for its second index at once (checked below); this one waits.
    const waiting = await attemptsOf(s, "bound", created.body.metadata.uid)
    assert.deepStrictEqual(waiting.map((attempt) => attempt.status.offering), [cheap])
    await advance(s, "3h")
    const done = await eventually(
      "the bound Job succeeded",
      async () => (await request(s, "GET", jobPath("bound", "pair"))).body,
      { until: (object) => object.status?.phase === "Succeeded" }
    )
    assert.strictEqual(done.status.phase, "Succeeded")
    const attempts = await attemptsOf(s, "bound", created.body.metadata.uid)
    assert.isAtLeast(attempts.length, 2)
    for (const attempt of attempts) {
      assert.strictEqual(attempt.status.offering, cheap)
      assert.isTrue(Number(attempt.status.rateUSDPerHour) <= 2.739, attempt.status.rateUSDPerHour)
    }

    // The control: the same Job without If-Match runs its second index on the dear host.
    const unbound = await request(s, "POST", jobsPath("bound"), {
      body: { ...body, metadata: { ...body.metadata, name: "unbound" } }
    })
    assert.strictEqual(unbound.status, 201, unbound.text)
    await advance(s, "10m")
    const offerings = (await attemptsOf(s, "bound", unbound.body.metadata.uid)).map((attempt) =>
      attempt.status.offering
    ).sort()
    assert.deepStrictEqual(offerings, [cheap, dear].sort())
  })
})
