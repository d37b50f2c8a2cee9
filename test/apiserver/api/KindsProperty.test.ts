// Property tests of every kind with its own schema, over real HTTP, with data generated from the kind's OpenAPI JSON
// Schema (test/support/SchemaArbitrary.ts): the document clients see, so these test what OpenAPI promises.
//
// - The JSON Schema and the effect Schema agree: most values generated from the JSON Schema decode (a low acceptance
//   means the document promises what admission refuses).
// - Every generated valid spec is created under fieldValidation=Strict and reads back as sent, except for defaults
//   (and the Job's aliases); reads are stable; a second create of the name is AlreadyExists.
// - Every single-field mutation outside a declared bound is Invalid, with the field's path among the causes.
// - No generated input (random JSON, or a valid spec with one member replaced by random JSON) gets a 5xx, and every
//   error body is a Status with a registered reason.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Exit, Schema, SchemaIssue } from "effect"
import * as fc from "fast-check"
import { createHash } from "node:crypto"
import { beyondEveryOffering } from "../../../src/core/capacity/HostBounds.ts"
import { isArray, isObject, type Json, type JsonObject } from "../../../src/core/Json.ts"
import { topUpAmountMicroMax } from "../../../src/core/Limits.ts"
import { type KindInfo } from "../../../src/core/meta/Kinds.ts"
import { parseMicroUsd } from "../../../src/core/Money.ts"
import { loadCatalog } from "../../../src/data/CatalogData.ts"
import { kinds } from "../../../src/kinds/Kinds.ts"
import { definitionOf, isDefined } from "../../../src/kinds/Kinds.ts"
import { testMethodDefault } from "../../../src/runtime/Payments.ts"
import {
  arbitraryOf,
  childSchema,
  pathsIn,
  type SchemaDocument,
  setAt,
  specDocument,
  type Violation,
  violationsOf
} from "../../support/SchemaArbitrary.ts"
import { type Reply, request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { createProject, registeredCodes } from "./Support.ts"

const seed = Number(process.env["NODUS_PROPERTY_SEED"] ?? 3_141_592)
const runs = Number(process.env["NODUS_PROPERTY_RUNS"] ?? 25)
const acceptanceSamples = 300
const propertyTimeout = 120_000

const propertyKinds: ReadonlyArray<KindInfo> = kinds.filter((info) =>
  isDefined(info.kind) && info.operations.has("create")
)

const identifier = /^[A-Za-z_$][\w$-]*$/u

/** `spec.env[0].name`: indices and keys that are not identifiers (dots, slashes) in brackets. */
const fieldOf = (path: ReadonlyArray<string>): string =>
  path.reduce((field, segment) => (identifier.test(segment) ? `${field}.${segment}` : `${field}[${segment}]`), "spec")

/**
 * The spec as it is stored, for the aliases only (defaults are left to the subset check). The aliases are the Job's
 * (spec: Job, Resources, SecretMount): activeDeadlineSeconds → timeout, resources.nodes > 1 → distributed.nodes (where
 * the object also declares `distributed`), and bare secret names → {name}. They are folded wherever those fields
 * appear, since Job-shaped specs are nested in other kinds (a Sweep's template holds a Job or TrainingJob spec) and
 * every workload takes SecretMounts. Write-only fields are left out: a Secret's `data` is never read back.
 */
const storedForm = (kind: string, document: SchemaDocument, spec: JsonObject): JsonObject => {
  const folded = foldAliases(document, document.schema, spec) as JsonObject
  if (kind !== "Secret") return folded
  const { data: _writeOnly, ...rest } = folded
  return rest
}

const foldAliases = (document: SchemaDocument, schema: Json | undefined, value: Json): Json => {
  if (isArray(value)) {
    return value.map((item, index) => foldAliases(document, childSchema(document, schema, value, String(index)), item))
  }
  if (!isObject(value)) return value
  let next: Record<string, Json> = Object.fromEntries(
    Object.entries(value).map((
      [key, member]
    ) => [key, foldAliases(document, childSchema(document, schema, value, key), member as Json)])
  )
  const deadline = next["activeDeadlineSeconds"]
  if (typeof deadline === "number") {
    delete next["activeDeadlineSeconds"]
    next["timeout"] = `${deadline}s`
  }
  const resources = next["resources"]
  const gang = childSchema(document, schema, value, "distributed") !== undefined && !Object.hasOwn(next, "distributed")
  if (gang && isObject(resources) && typeof resources["nodes"] === "number" && resources["nodes"] > 1) {
    const { nodes, ...rest } = resources
    next = { ...next, resources: rest, distributed: { nodes: nodes as Json } }
  }
  const secrets = next["secrets"]
  if (isArray(secrets)) {
    next["secrets"] = secrets.map((secret) => (typeof secret === "string" ? { name: secret } : secret))
  }
  return next
}

/**
 * Whether a cause's field answers a violation: its own path, or for a bound from one alternative of an object's
 * oneOf/anyOf, that object or one of its direct members (the rule is the object's as much as the field's).
 */
const answers = (violation: Violation, field: string): boolean => {
  if (field === fieldOf(violation.path)) return true
  if (violation.context === undefined) return false
  const object = fieldOf(violation.context)
  if (field === object) return true
  const member = field.startsWith(`${object}.`)
    ? field.slice(object.length + 1)
    : field.startsWith(`${object}[`)
    ? field.slice(object.length)
    : undefined
  return member !== undefined && !/[.[]/u.test(member.replace(/^\[[^\]]*\]/u, ""))
}

const issueFormatter = SchemaIssue.makeFormatterStandardSchemaV1()

/** What the kind's Schema says when it refuses `spec` (fields as `spec.…`); empty when it accepts it. */
const refusals = (
  decoded: Exit.Exit<unknown, Schema.SchemaError>
): ReadonlyArray<{ readonly field: string; readonly message: string }> => {
  if (Exit.isSuccess(decoded)) return []
  const failure = decoded.cause.reasons.find((reason) => reason._tag === "Fail")
  if (failure === undefined || !Schema.isSchemaError(failure.error)) {
    return [{ field: "spec", message: "refused without a SchemaError" }]
  }
  return issueFormatter(failure.error.issue).issues.map((issue) => ({
    field: fieldOf((issue.path ?? []).map((segment) => String(typeof segment === "object" ? segment.key : segment))),
    message: issue.message
  }))
}

const refusedPaths = (decoded: Exit.Exit<unknown, Schema.SchemaError>): ReadonlyArray<string> =>
  refusals(decoded).map((refusal) => refusal.field)

/** The most frequent refusals of generated specs, each once with its count (indices and quoted values folded). */
const topRefusals = (decoded: ReadonlyArray<Exit.Exit<unknown, Schema.SchemaError>>, count: number): string => {
  const tally = new Map<string, number>()
  for (const exit of decoded) {
    for (const refusal of refusals(exit)) {
      const key = `${refusal.field.replace(/\[[0-9]+\]/gu, "[i]")}: ${
        refusal.message.replace(/"[^"]*"/gu, "\"…\"").slice(0, 120)
      }`
      tally.set(key, (tally.get(key) ?? 0) + 1)
    }
  }
  return [...tally].sort((a, b) => b[1] - a[1]).slice(0, count).map(([key, times]) => `${times}× ${key}`).join("; ")
}

/**
 * Where `actual` lacks or differs from a member of `expected` (arrays item by item), or undefined when it has them all.
 */
const missingFrom = (
  expected: Json,
  actual: Json | undefined,
  path: ReadonlyArray<string> = []
): string | undefined => {
  if (isObject(expected)) {
    if (!isObject(actual)) return `${fieldOf(path)}: expected an object, got ${JSON.stringify(actual)}`
    for (const [key, member] of Object.entries(expected)) {
      const found = missingFrom(member as Json, Object.hasOwn(actual, key) ? (actual[key] as Json) : undefined, [
        ...path,
        key
      ])
      if (found !== undefined) return found
    }
    return undefined
  }
  if (isArray(expected)) {
    if (!isArray(actual) || actual.length !== expected.length) {
      return `${fieldOf(path)}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`
    }
    for (const [index, item] of expected.entries()) {
      const found = missingFrom(item, actual[index], [...path, String(index)])
      if (found !== undefined) return found
    }
    return undefined
  }
  return actual === expected
    ? undefined
    : `${fieldOf(path)}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`
}

const fixtureSecret = "prop-secret"
const fixtureFunction = "prop-function"
const fixtureBlobBytes = new TextEncoder().encode("def f():\n    return 1\n")
const fixtureBlob = `sha256:${createHash("sha256").update(fixtureBlobBytes).digest("hex")}`

/**
 * References the JSON Schema cannot know exist: secret mounts (a bare name or {name, version}, in any `secrets` list)
 * name the project's fixture Secret, which has version 1; a FunctionCall's `function` names the fixture Function (its
 * timeout the largest, its Python unset) and every `sha256:` blob reference the fixture blob (docs/blobs.md); a TopUp's
 * payment method is the embedded processor's default one, and its promo code goes (none is known: docs/billing.md,
 * "Credits"). Other references to objects that
 * do not exist make the create NotFound-refused; such cases are discarded (and counted).
 */
const withFixtures = (value: Json): Json => {
  if (isArray(value)) return value.map(withFixtures)
  if (!isObject(value)) return value
  const next: Record<string, Json> = Object.fromEntries(
    Object.entries(value).map(([key, member]) => [key, withFixtures(member as Json)])
  )
  const secrets = next["secrets"]
  if (isArray(secrets)) {
    next["secrets"] = secrets.map((mount): Json =>
      typeof mount === "string" ?
        fixtureSecret
        : isObject(mount) && typeof mount["name"] === "string" ?
        { ...mount, name: fixtureSecret, ...(Object.hasOwn(mount, "version") ? { version: 1 } : {}) }
        : mount
    )
  }
  if (typeof next["paymentMethod"] === "string") next["paymentMethod"] = testMethodDefault
  if (typeof next["function"] === "string") next["function"] = fixtureFunction
  if (typeof next["blob"] === "string" && next["blob"].startsWith("sha256:")) next["blob"] = fixtureBlob
  delete next["promoCode"]
  return next
}

/**
 * An account limit a valid spec may still pass, refused with its own code: a TopUp adds at most topUpAmountMicroMax.
 */
const withinAccountLimits = (kind: string) => (spec: Json): boolean =>
  kind !== "TopUp" || !isObject(spec) || typeof spec["amountUSD"] !== "string" ||
  parseMicroUsd(spec["amountUSD"]) <= topUpAmountMicroMax

/**
 * A bound of the offerings a valid spec may still pass, refused at its field (docs/jobs.md, "Admission"): no cpu,
 * memory or disk floor that no offering of the catalog (this server has no backend of its own) could ever hold.
 */
const offerings = { offerings: loadCatalog(), joinable: false }
const withinOfferings = (spec: Json): boolean => {
  if (
    !isObject(spec) || !isObject(spec["resources"]) ||
    (isObject(spec["placement"]) && spec["placement"]["pool"] !== undefined)
  ) return true
  const resources = spec["resources"]
  const text = (field: string) => (typeof resources[field] === "string" ? resources[field] : undefined)
  return beyondEveryOffering(
    { cpu: text("cpu"), memory: text("memory"), disk: text("disk") },
    offerings,
    "spec.resources"
  ) === undefined
}

/** A refusal only because a referenced object does not exist. */
const onlyNotFound = (reply: Reply): boolean => {
  const causes = reply.body?.details?.causes
  return reply.status === 422 && isArray(causes) && causes.length > 0 &&
    causes.every((cause) => isObject(cause) && cause["reason"] === "FieldValueNotFound")
}

/** Any answer: below 500, and an error answer is a Status with a registered reason and its own HTTP code. */
const assertWellFormed = (reply: Reply, input: unknown): void => {
  const shown = JSON.stringify(input)?.slice(0, 2_000)
  assert.isBelow(reply.status, 500, `${reply.status} for ${shown}: ${reply.text}`)
  if (reply.status < 400) return
  assert.isObject(reply.body, `error body is not JSON for ${shown}: ${reply.text}`)
  assert.strictEqual(reply.body.kind, "Status", reply.text)
  assert.strictEqual(reply.body.status, "Failure", reply.text)
  assert.strictEqual(reply.body.code, reply.status, reply.text)
  assert.isTrue(registeredCodes.has(reply.body.reason), `unregistered reason in ${reply.text}`)
}

/** Acceptance rate per kind, printed once at the end (the report reads it). */
const acceptance = new Map<string, string>()
const exercised = new Map<string, Map<string, number>>()
const discarded = new Map<string, Array<string>>()
const masked = new Map<string, Array<string>>()

describe("kinds: properties from the OpenAPI schemas", () => {
  let server: TestServer
  const project = "props"

  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, project)
    const secret = await request(server, "POST", `/apis/nodus.dev/v1/namespaces/${project}/secrets`, {
      body: { metadata: { name: fixtureSecret }, spec: { data: { token: "fixture-value-8c1d2e" } } }
    })
    assert.strictEqual(secret.status, 201, secret.text)
    const blob = await fetch(`${server.url}/blobs/v1/${fixtureBlob}?project=${project}`, {
      method: "PUT",
      headers: { authorization: `Bearer ${server.token}` },
      body: fixtureBlobBytes
    })
    assert.strictEqual(blob.status, 201)
    const fn = await request(server, "POST", `/apis/nodus.dev/v1/namespaces/${project}/functions`, {
      body: {
        metadata: { name: fixtureFunction },
        spec: { image: "python:3.12-slim", code: { module: "app", qualname: "f" }, timeout: "24h" }
      }
    })
    assert.strictEqual(fn.status, 201, fn.text)
  })
  afterAll(async () => {
    for (const [kind, line] of acceptance) console.log(`[KindsProperty] ${kind}: ${line}`)
    for (const [kind, examples] of discarded) {
      console.log(
        `[KindsProperty] ${kind}: ${examples.length} round-trip cases discarded for references to missing objects, e.g. ${
          examples[0]
        }`
      )
    }
    for (const [kind, examples] of masked) {
      console.log(
        `[KindsProperty] ${kind}: ${examples.length} maxItems mutations skipped (the Schema reports only its own rules on the added items), e.g. ${
          examples[0]
        }`
      )
    }
    for (const [kind, rules] of exercised) {
      console.log(
        `[KindsProperty] ${kind} violations exercised: ${
          [...rules].map(([rule, count]) => `${rule} ${count}`).join(", ")
        }`
      )
    }
    await server.stop()
  })

  it("at least one kind has its own schema and create", () => {
    assert.isAbove(propertyKinds.length, 0)
  })

  for (const info of propertyKinds) {
    describe(info.kind, () => {
      const document = specDocument(info)
      const definition = definitionOf(info.kind)
      const decode = Schema.decodeUnknownExit(definition.spec, { errors: "all", onExcessProperty: "error" })
      // Valid now: it decodes and passes the kind's rules on the request time (e.g. a Workspace's readyBy ahead).
      const onTime = (spec: JsonObject): boolean =>
        (definition.timeRules?.(definition.normalize?.(spec) ?? spec, Date.now(), undefined) ?? []).length === 0
      const decodes = (spec: Json): boolean => {
        const decoded = decode(spec)
        return Exit.isSuccess(decoded) && onTime(decoded.value as JsonObject)
      }
      const generated = arbitraryOf(document)
      const valid = generated.map(withFixtures).filter(decodes).filter(withinAccountLimits(info.kind)).filter(
        withinOfferings
      )
      const collection = info.scope === "Cluster"
        ? `/apis/nodus.dev/${info.version}/${info.plural}`
        : `/apis/nodus.dev/${info.version}/namespaces/${project}/${info.plural}`
      let counter = 0
      const nextName = (prefix: string): string => `${prefix}-${(counter++).toString(36)}`
      const body = (name: string, spec: Json): JsonObject => ({
        apiVersion: `nodus.dev/${info.version}`,
        kind: info.kind,
        metadata: { name },
        spec
      })
      const create = (name: string, spec: Json) =>
        request(server, "POST", `${collection}?fieldValidation=Strict`, { body: body(name, spec) })

      it("the JSON Schema and the Schema agree: at least a third of the generated specs decode", () => {
        const values = fc.sample(generated, { numRuns: acceptanceSamples, seed })
        const decoded = values.map((value) => decode(value))
        const refused = values.filter((_, index) => Exit.isFailure(decoded[index]!))
        const rate = (values.length - refused.length) / values.length
        const reasons = topRefusals(decoded, 4)
        acceptance.set(
          info.kind,
          `${values.length - refused.length}/${values.length} generated specs decode (${(rate * 100).toFixed(1)}%)${
            reasons === "" ? "" : `; refused for ${reasons}`
          }`
        )
        assert.isAtLeast(
          rate,
          1 / 3,
          `${info.kind}: only ${
            (rate * 100).toFixed(1)
          }% of the specs its JSON Schema allows decode (${reasons}); e.g. ${JSON.stringify(refused[0])}`
        )
      })

      it("valid specs are created, read back as sent except for defaults, stable, and not created twice", async () => {
        await fc.assert(
          fc.asyncProperty(valid, async (spec) => {
            const name = nextName("rt")
            const created = await create(name, spec)
            if (onlyNotFound(created)) {
              discarded.set(info.kind, [
                ...(discarded.get(info.kind) ?? []),
                `${JSON.stringify(spec)}: ${created.body.message}`
              ])
              fc.pre(false)
            }
            assert.strictEqual(created.status, 201, `create ${JSON.stringify(spec)}: ${created.text}`)
            const path = `${collection}/${name}`
            const first = await request(server, "GET", path)
            assert.strictEqual(first.status, 200, first.text)
            const missing = missingFrom(storedForm(info.kind, document, spec as JsonObject), first.body.spec)
            assert.isUndefined(missing, `sent ${JSON.stringify(spec)}, read ${JSON.stringify(first.body.spec)}`)
            const second = await request(server, "GET", path)
            assert.strictEqual(second.status, 200, second.text)
            assert.deepStrictEqual(second.body.spec, first.body.spec)
            const again = await create(name, spec)
            assertWellFormed(again, spec)
            assert.strictEqual(again.status, 409, again.text)
            assert.strictEqual(again.body.reason, "AlreadyExists", again.text)
          }),
          { numRuns: runs, seed }
        )
      }, propertyTimeout)

      it("a single field outside a declared bound is Invalid at its path", async () => {
        const rules = new Map<string, number>()
        exercised.set(info.kind, rules)
        const cases = valid.chain((spec) => {
          const violations = violationsOf(document, spec, { accepts: decodes })
          return violations.length === 0
            ? fc.constant({ spec, picked: violations })
            : fc.subarray([...violations], { minLength: 1, maxLength: Math.min(3, violations.length) }).map((
              picked
            ) => ({ spec, picked }))
        })
        await fc.assert(
          fc.asyncProperty(cases, async ({ spec, picked }) => {
            for (const violation of picked) {
              const mutated = setAt(spec, violation.path, violation.value)
              const field = fieldOf(violation.path)
              const what = `${violation.rule} at ${field}: ${JSON.stringify(violation.value).slice(0, 200)} in ${
                JSON.stringify(mutated).slice(0, 1_000)
              }`
              const local = decode(mutated)
              assert.isFalse(
                Exit.isSuccess(local),
                `the JSON Schema bounds ${field} (${violation.rule}) but the Schema accepts ${what}`
              )
              if (violation.rule === "maxItems" && !refusedPaths(local).some((path) => answers(violation, path))) {
                // Too long only with items the kind's own rules refuse (e.g. all its unique values used up): not a
                // bound test.
                masked.set(info.kind, [...(masked.get(info.kind) ?? []), `${what}: ${refusedPaths(local).join(", ")}`])
                continue
              }
              const reply = await create(nextName("bad"), mutated)
              assertWellFormed(reply, mutated)
              assert.strictEqual(reply.status, 422, `${what}: ${reply.text}`)
              assert.strictEqual(reply.body.reason, "Invalid", reply.text)
              const fields = ((reply.body.details?.causes ?? []) as ReadonlyArray<{ readonly field?: unknown }>).map((
                cause
              ) => String(cause.field))
              assert.isTrue(
                fields.some((found) => answers(violation, found)),
                `${what}: no cause at ${field}${
                  violation.context === undefined ? "" : ` (or ${fieldOf(violation.context)})`
                }: ${reply.text}`
              )
              rules.set(violation.rule, (rules.get(violation.rule) ?? 0) + 1)
            }
          }),
          { numRuns: runs, seed }
        )
      }, propertyTimeout)

      it("random JSON as the spec or the whole body never gets a 5xx", async () => {
        const inputs = fc.oneof(
          fc.jsonValue({ maxDepth: 3 }).map((spec) => ({ whole: false, value: spec as Json })),
          fc.jsonValue({ maxDepth: 3 }).map((value) => ({ whole: true, value: value as Json }))
        )
        await fc.assert(
          fc.asyncProperty(inputs, async ({ whole, value }) => {
            const reply = whole
              ? await request(server, "POST", `${collection}?fieldValidation=Strict`, { body: value })
              : await create(nextName("any"), value)
            assertWellFormed(reply, whole ? value : body("…", value))
          }),
          { numRuns: runs * 2, seed }
        )
      }, propertyTimeout)

      it("a valid spec with one member replaced by random JSON never gets a 5xx", async () => {
        const inputs = valid.chain((spec) => {
          const paths = pathsIn(spec)
          return paths.length === 0
            ? fc.jsonValue({ maxDepth: 2 }).map((value) => setAt(spec, ["x"], value as Json))
            : fc.tuple(fc.constantFrom(...paths), fc.jsonValue({ maxDepth: 2 })).map(([path, value]) =>
              setAt(spec, path, value as Json)
            )
        })
        await fc.assert(
          fc.asyncProperty(inputs, async (spec) => {
            assertWellFormed(await create(nextName("mix"), spec), spec)
          }),
          { numRuns: runs * 2, seed }
        )
      }, propertyTimeout)

      it("merge patches of a stored object with random specs never get a 5xx", async () => {
        const [spec] = fc.sample(valid, { numRuns: 1, seed })
        const name = nextName("patch")
        const created = await create(name, spec!)
        assert.strictEqual(created.status, 201, created.text)
        const patches = fc.oneof(
          fc.jsonValue({ maxDepth: 3 }).map((value) => ({ spec: value as Json })),
          valid.chain((next) => {
            const paths = pathsIn(next)
            return paths.length === 0
              ? fc.constant({ spec: next })
              : fc.tuple(fc.constantFrom(...paths), fc.jsonValue({ maxDepth: 2 })).map(([path, value]) => ({
                spec: setAt(next, path, value as Json)
              }))
          })
        )
        await fc.assert(
          fc.asyncProperty(patches, async (patch) => {
            const reply = await request(server, "PATCH", `${collection}/${name}?fieldValidation=Strict`, {
              body: patch,
              contentType: "application/merge-patch+json"
            })
            assertWellFormed(reply, patch)
          }),
          { numRuns: runs, seed }
        )
      }, propertyTimeout)
    })
  }
})
