// The schema-derived arbitraries (test/support/SchemaArbitrary.ts) on small hand-written OpenAPI 3.0 JSON Schemas:
// every keyword the generator understands yields values that satisfy it, exactly-one-of groups pick exactly one
// field, and each violation breaks the rule it names and no other rule of its leaf.
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { isArray, isObject, type Json, type JsonObject } from "../../src/core/Json.ts"
import {
  arbitraryOf,
  durationMs,
  pathsIn,
  quantityValue,
  type SchemaDocument,
  setAt,
  validates,
  violationsOf
} from "../support/SchemaArbitrary.ts"

const seed = 20_260_301

const doc = (schema: JsonObject, definitions: JsonObject = {}): SchemaDocument => ({ schema, definitions })

/** `runs` generated values of a document. */
const samples = (document: SchemaDocument, runs = 200): ReadonlyArray<Json> =>
  fc.sample(arbitraryOf(document), { numRuns: runs, seed })

/** Every generated value satisfies the document (by the module's own validator) and `holds`. */
const allSatisfy = (document: SchemaDocument, holds: (value: Json) => boolean = () => true, runs = 200): void => {
  fc.assert(
    fc.property(arbitraryOf(document), (value) => validates(document, document.schema, value) && holds(value)),
    { numRuns: runs, seed }
  )
}

const durationPattern = "^(0|(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|ms|s|m|h))+)$"
const quantityPattern = "^([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
const usdPattern = "^(0|[1-9][0-9]*)(\\.[0-9]{1,6})?$"

/** A duration field as Fields.ts writes it: `type: string` with the pattern and bounds in an allOf member. */
const durationField = (bounds: JsonObject): JsonObject => ({
  type: "string",
  allOf: [{ pattern: durationPattern, "x-nodus-duration": bounds, description: "A duration." }]
})

describe("SchemaArbitrary", () => {
  describe("scalars", () => {
    it("strings match their pattern and length bounds", () => {
      allSatisfy(
        doc({ type: "string", pattern: "^[a-z][a-z0-9-]*$", maxLength: 12 }),
        (value) => typeof value === "string" && /^[a-z][a-z0-9-]*$/u.test(value) && value.length <= 12
      )
      allSatisfy(
        doc({ type: "string", minLength: 3, maxLength: 5 }),
        (value) => typeof value === "string" && value.length >= 3 && value.length <= 5
      )
    })

    it("type: string with the pattern in an allOf member (the Fields.ts shape)", () => {
      allSatisfy(
        doc({ type: "string", allOf: [{ pattern: "^/.*$" }], description: "An absolute path." }),
        (value) => typeof value === "string" && value.startsWith("/")
      )
    })

    it("integers and numbers stay within minimum and maximum, exclusive bounds included", () => {
      allSatisfy(
        doc({ type: "integer", minimum: 2, maximum: 8 }),
        (value) => Number.isInteger(value) && (value as number) >= 2 && (value as number) <= 8
      )
      allSatisfy(
        doc({ type: "integer", minimum: 0, maximum: 3, exclusiveMinimum: true, exclusiveMaximum: true }),
        (value) => value === 1 || value === 2
      )
      allSatisfy(
        doc({ type: "number", minimum: -1.5, maximum: 2.5 }),
        (value) => typeof value === "number" && value >= -1.5 && value <= 2.5
      )
      allSatisfy(
        doc({ type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
        (value) => Number.isSafeInteger(value) && (value as number) >= 1
      )
    })

    it("booleans, and enums of every type, each value reached", () => {
      allSatisfy(doc({ type: "boolean" }), (value) => typeof value === "boolean")
      const values = ["Never", "Allow", "Prefer"]
      allSatisfy(doc({ type: "string", enum: values }), (value) => values.includes(value as string))
      assert.sameMembers([...new Set(samples(doc({ type: "string", enum: values })))], values)
      assert.sameMembers([...new Set(samples(doc({ type: "number", enum: [1, 2, 4, 8] })))], [1, 2, 4, 8])
      assert.sameMembers([...new Set(samples(doc({ anyOf: [{ type: "boolean", enum: [true] }] })))], [true])
    })

    it("nullable values are sometimes null and otherwise of their type", () => {
      const document = doc({ type: "integer", minimum: 0, maximum: 5, nullable: true })
      allSatisfy(document, (value) => value === null || (typeof value === "number" && value >= 0 && value <= 5))
      const generated = samples(document)
      assert.isTrue(generated.includes(null))
      assert.isTrue(generated.some((value) => typeof value === "number"))
    })

    it("durations are real durations within x-nodus-duration bounds; 0s only where zero is allowed", () => {
      const bounded = doc(durationField({ minimumMs: 60_000, maximumMs: 6 * 3_600_000 }))
      allSatisfy(bounded, (value) => {
        const ms = durationMs(value as string)
        return ms !== undefined && ms >= 60_000 && ms <= 6 * 3_600_000
      })
      assert.isFalse(samples(bounded).includes("0s"))
      const withZero = doc(durationField({ minimumMs: 60_000, maximumMs: 3_600_000, zero: true }))
      allSatisfy(withZero, (value) => {
        const ms = durationMs(value as string)
        return ms === 0 || (ms !== undefined && ms >= 60_000 && ms <= 3_600_000)
      })
      assert.isTrue(samples(withZero).includes("0s"))
      allSatisfy(doc(durationField({})), (value) => durationMs(value as string) !== undefined)
    })

    it("quantities stay at most x-nodus-quantity.maximum; USD amounts have at most six decimals", () => {
      const twoTi = 2 * 2 ** 40
      allSatisfy(
        doc({ type: "string", allOf: [{ pattern: quantityPattern, "x-nodus-quantity": { maximum: twoTi } }] }),
        (value) => {
          const amount = quantityValue(value as string)
          return amount !== undefined && amount <= twoTi
        }
      )
      allSatisfy(
        doc({ type: "string", pattern: quantityPattern }),
        (value) => quantityValue(value as string) !== undefined
      )
      allSatisfy(
        doc({ type: "string", allOf: [{ pattern: usdPattern, "x-nodus-usd": true }] }),
        (value) => /^(0|[1-9][0-9]*)(\.[0-9]{1,6})?$/u.test(value as string)
      )
      assert.isTrue(
        samples(doc({ type: "string", allOf: [{ pattern: usdPattern, "x-nodus-usd": true }] })).some((value) =>
          (value as string).includes(".")
        )
      )
    })

    it("patterns fc.stringMatching cannot read (lookaheads) still yield matching strings", () => {
      const pattern = "^(?!\\/)(?!(?:.*\\/)?\\.\\.(?:\\/|$)).+$"
      const regex = new RegExp(pattern, "u")
      allSatisfy(doc({ type: "string", pattern }), (value) => typeof value === "string" && regex.test(value))
    })

    it("decimals stay within x-nodus-decimal bounds", () => {
      const document = doc({
        type: "string",
        allOf: [{ pattern: "^(0|[1-9][0-9]*)(\\.[0-9]+)?$", "x-nodus-decimal": { minimum: 1, maximum: 10 } }]
      })
      allSatisfy(
        document,
        (value) => /^(0|[1-9][0-9]*)(\.[0-9]+)?$/u.test(value as string) && Number(value) >= 1 && Number(value) <= 10
      )
      assert.isTrue(samples(document).some((value) => (value as string).includes(".")))
    })

    it("not: {pattern} is never matched", () => {
      const document = doc({ type: "string", pattern: "^[a-z.]{1,12}$", allOf: [{ not: { pattern: "^p" } }] })
      allSatisfy(document, (value) => !(value as string).startsWith("p"))
    })

    it("unknown keywords and empty schemas do not crash", () => {
      allSatisfy(
        doc({
          type: "string",
          format: "weird",
          "x-vendor": { a: 1 },
          if: { type: "string" },
          discriminator: { propertyName: "x" }
        }),
        (value) => typeof value === "string"
      )
      assert.lengthOf(samples(doc({})), 200)
      allSatisfy(doc({ type: "string", format: "date-time" }), (value) => !Number.isNaN(Date.parse(value as string)))
    })
  })

  describe("arrays and objects", () => {
    it("arrays respect minItems, maxItems, items and uniqueItems", () => {
      allSatisfy(
        doc({ type: "array", items: { type: "string", minLength: 1 }, minItems: 1, maxItems: 8 }),
        (value) =>
          isArray(value) && value.length >= 1 && value.length <= 8 &&
          value.every((item) => typeof item === "string" && item.length > 0)
      )
      allSatisfy(
        doc({ type: "array", items: { type: "integer", minimum: 0, maximum: 3 }, uniqueItems: true }),
        (value) => isArray(value) && new Set(value).size === value.length
      )
    })

    it("objects: required members always, optional ones sometimes, nothing undeclared", () => {
      const document = doc({
        type: "object",
        properties: { name: { type: "string", minLength: 1 }, size: { type: "integer" }, tag: { type: "string" } },
        required: ["name"],
        additionalProperties: true
      })
      allSatisfy(
        document,
        (value) =>
          isObject(value) && typeof value["name"] === "string" &&
          Object.keys(value).every((key) => ["name", "size", "tag"].includes(key))
      )
      const generated = samples(document) as ReadonlyArray<JsonObject>
      for (const key of ["size", "tag"]) {
        assert.isTrue(generated.some((value) => Object.hasOwn(value, key)), `${key} sometimes present`)
        assert.isTrue(generated.some((value) => !Object.hasOwn(value, key)), `${key} sometimes absent`)
      }
    })

    it("objects stay small: a few optional members each", () => {
      const properties = Object.fromEntries(
        Array.from({ length: 30 }, (_, index) => [`f${index}`, { type: "integer" }])
      )
      allSatisfy(doc({ type: "object", properties }), (value) => isObject(value) && Object.keys(value).length <= 4)
    })

    it("maps: additionalProperties with propertyNames", () => {
      const document = doc({
        type: "object",
        additionalProperties: { type: "integer", minimum: 0 },
        propertyNames: { pattern: "^[a-z]{1,4}$" }
      })
      allSatisfy(
        document,
        (value) =>
          isObject(value) &&
          Object.entries(value).every(([key, member]) => /^[a-z]{1,4}$/u.test(key) && (member as number) >= 0)
      )
      assert.isTrue(samples(document).some((value) => isObject(value) && Object.keys(value).length > 0))
    })

    it("$ref to components, and the allOf [$ref] + description wrapper", () => {
      const definitions = {
        Port: {
          type: "object",
          properties: { port: { type: "integer", minimum: 1, maximum: 65535 } },
          required: ["port"]
        },
        Service: {
          type: "object",
          properties: {
            ports: { type: "array", items: { $ref: "#/components/schemas/Port" } },
            main: { $ref: "#/components/schemas/Port" }
          },
          required: ["main"]
        }
      }
      const document = doc(
        { allOf: [{ $ref: "#/components/schemas/Service" }], description: "The service." },
        definitions
      )
      allSatisfy(document, (value) => {
        if (!isObject(value) || !isObject(value["main"])) return false
        const port = value["main"]["port"]
        return typeof port === "number" && port >= 1 && port <= 65535
      })
    })

    it("oneOf of required groups: exactly one of the named fields, each reached", () => {
      const document = doc({
        type: "object",
        properties: {
          image: { type: "string", minLength: 1 },
          imageRef: { type: "string", minLength: 1 },
          args: { type: "array", items: { type: "string" } }
        },
        allOf: [{ oneOf: [{ required: ["image"] }, { required: ["imageRef"] }] }]
      })
      allSatisfy(
        document,
        (value) => isObject(value) && Object.hasOwn(value, "image") !== Object.hasOwn(value, "imageRef")
      )
      const generated = samples(document) as ReadonlyArray<JsonObject>
      assert.isTrue(generated.some((value) => Object.hasOwn(value, "image")))
      assert.isTrue(generated.some((value) => Object.hasOwn(value, "imageRef")))
    })

    it("oneOf with six groups (JobInput's forms)", () => {
      const forms = ["volume", "output", "bucket", "url", "fromWorkspace", "fromStage"]
      const document = doc({
        type: "object",
        properties: {
          name: { type: "string" },
          ...Object.fromEntries(
            forms.map((
              form
            ) => [form, { type: "object", properties: { name: { type: "string" } }, required: ["name"] }])
          )
        },
        required: ["name"],
        allOf: [{ oneOf: forms.map((form) => ({ required: [form] })), description: "An input." }]
      })
      allSatisfy(
        document,
        (value) => isObject(value) && forms.filter((form) => Object.hasOwn(value, form)).length === 1
      )
      const reached = new Set(
        samples(document).flatMap((value) => forms.filter((form) => isObject(value) && Object.hasOwn(value, form)))
      )
      assert.sameMembers([...reached], forms)
    })

    it("not: {required: [a, b]}: never both", () => {
      const document = doc({
        type: "object",
        properties: {
          activeDeadlineSeconds: { type: "integer", minimum: 1 },
          timeout: durationField({}),
          image: { type: "string" }
        },
        allOf: [{ not: { required: ["activeDeadlineSeconds", "timeout"] } }]
      })
      allSatisfy(
        document,
        (value) =>
          isObject(value) && !(Object.hasOwn(value, "activeDeadlineSeconds") && Object.hasOwn(value, "timeout")),
        500
      )
      const generated = samples(document, 500) as ReadonlyArray<JsonObject>
      assert.isTrue(generated.some((value) => Object.hasOwn(value, "activeDeadlineSeconds")))
      assert.isTrue(generated.some((value) => Object.hasOwn(value, "timeout")))
    })

    it("anyOf: one alternative at a time, each reached (a bare name or the object)", () => {
      const document = doc({
        type: "array",
        items: { anyOf: [{ type: "string", minLength: 1 }, { $ref: "#/components/schemas/SecretMount" }] },
        minItems: 1
      }, {
        SecretMount: {
          type: "object",
          properties: { name: { type: "string", minLength: 1 }, version: { type: "integer", minimum: 1 } },
          required: ["name"]
        }
      })
      allSatisfy(document)
      const items = samples(document).flatMap((value) => (isArray(value) ? value : []))
      assert.isTrue(items.some((item) => typeof item === "string"))
      assert.isTrue(items.some((item) => isObject(item)))
    })

    it("recursive schemas stop at maxDepth", () => {
      const definitions = {
        Tree: {
          type: "object",
          properties: {
            label: { type: "string" },
            children: { type: "array", items: { $ref: "#/components/schemas/Tree" } }
          },
          required: ["label"]
        }
      }
      const document = doc({ $ref: "#/components/schemas/Tree" }, definitions)
      const depthOf = (
        value: Json
      ): number => (isArray(value) || isObject(value) ? 1 + Math.max(0, ...Object.values(value).map(depthOf)) : 0)
      fc.assert(
        fc.property(
          arbitraryOf(document, { maxDepth: 3 }),
          (value) => validates(document, document.schema, value) && depthOf(value) <= 5
        ),
        { numRuns: 200, seed }
      )
    })
  })

  describe("violations", () => {
    /** The schema without the keywords of `rule` (at the top and in allOf members), so the rest can be checked. */
    const keywordsOf: Readonly<Record<string, ReadonlyArray<string>>> = {
      minimum: ["minimum", "exclusiveMinimum"],
      maximum: ["maximum", "exclusiveMaximum"],
      enum: ["enum"],
      maxItems: ["maxItems"],
      minItems: ["minItems"],
      maxLength: ["maxLength"],
      minLength: ["minLength"],
      // A string off the grammar is no duration or quantity either: the extension's bounds need the grammar.
      pattern: ["pattern", "x-nodus-duration", "x-nodus-quantity", "x-nodus-decimal"],
      "not-pattern": ["not"],
      "duration-minimum": ["x-nodus-duration"],
      "duration-maximum": ["x-nodus-duration"],
      "quantity-maximum": ["x-nodus-quantity"],
      "decimal-minimum": ["x-nodus-decimal"],
      "decimal-maximum": ["x-nodus-decimal"]
    }
    const without = (schema: Json, keywords: ReadonlyArray<string>): Json => {
      if (!isObject(schema)) return schema
      return Object.fromEntries(
        Object.entries(schema)
          .filter(([key]) => !keywords.includes(key))
          .map(([key, member]) => [
            key,
            ["allOf", "anyOf", "oneOf"].includes(key) && isArray(member)
              ? member.map((inner) => without(inner, keywords))
              : member
          ])
      )
    }

    /**
     * Each violation of a leaf document: the leaf fails the schema, and passes it once the rule's keywords are removed.
     */
    const breaksExactly = (schema: JsonObject, rules: ReadonlyArray<string>, definitions: JsonObject = {}): void => {
      const document = doc(schema, definitions)
      const seen = new Set<string>()
      fc.assert(
        fc.property(arbitraryOf(document), (value) => {
          for (const violation of violationsOf(document, value).filter((found) => found.path.length === 0)) {
            seen.add(violation.rule)
            assert.isFalse(
              validates(document, schema, violation.value),
              `${violation.rule}: ${JSON.stringify(violation.value)} still valid`
            )
            const relaxed = without(schema, keywordsOf[violation.rule] ?? [])
            assert.isTrue(
              validates(document, relaxed, violation.value),
              `${violation.rule}: ${JSON.stringify(violation.value)} breaks more than its rule`
            )
          }
        }),
        { numRuns: 100, seed }
      )
      assert.sameMembers([...seen], [...rules])
    }

    it("minimum and maximum: one below, one above", () => {
      breaksExactly({ type: "integer", minimum: 1, maximum: 32 }, ["minimum", "maximum"])
      breaksExactly({ type: "integer", minimum: 0, maximum: 5, exclusiveMinimum: true }, ["minimum", "maximum"])
    })

    it("enum: a value outside it, of the same type", () => {
      breaksExactly({ type: "string", enum: ["Resume", "Fail"] }, ["enum"])
      breaksExactly({ type: "number", enum: [1, 2, 4, 8] }, ["enum"])
      breaksExactly({ anyOf: [{ type: "boolean", enum: [true] }] }, ["enum"])
    })

    it("pattern and maxLength: a string that cannot match, and one that is too long but still matches", () => {
      breaksExactly({ type: "string", pattern: "^[a-z0-9._-]{1,64}$", maxLength: 10 }, ["pattern", "maxLength"])
      breaksExactly({ type: "string", minLength: 1 }, ["minLength"])
    })

    it("not: {pattern}: a string the forbidden pattern matches", () => {
      breaksExactly({
        type: "string",
        pattern: "^[A-Za-z_][A-Za-z0-9_]*$",
        allOf: [{ not: { pattern: "^PLATFORM_" } }]
      }, ["pattern", "not-pattern"])
    })

    it("durations just outside their bounds, still durations", () => {
      breaksExactly(durationField({ minimumMs: 300_000, maximumMs: 3_600_000 }), [
        "pattern",
        "duration-minimum",
        "duration-maximum"
      ])
      breaksExactly(durationField({ maximumMs: 1_200_000 }), ["pattern", "duration-maximum"])
      const document = doc(durationField({ minimumMs: 300_000, maximumMs: 3_600_000 }))
      const violations = violationsOf(document, "15m")
      assert.deepInclude(violations, { path: [], value: "299999ms", rule: "duration-minimum" })
      assert.deepInclude(violations, { path: [], value: "3601s", rule: "duration-maximum" })
    })

    it("quantities above their maximum", () => {
      breaksExactly({
        type: "string",
        allOf: [{ pattern: quantityPattern, "x-nodus-quantity": { maximum: 2 * 2 ** 40 } }]
      }, ["pattern", "quantity-maximum"])
    })

    it("decimals just outside their bounds, still decimals", () => {
      breaksExactly({
        type: "string",
        allOf: [{ pattern: "^(0|[1-9][0-9]*)(\\.[0-9]+)?$", "x-nodus-decimal": { minimum: 1, maximum: 10 } }]
      }, ["pattern", "decimal-minimum", "decimal-maximum"])
    })

    it("arrays: one longer than maxItems, one shorter than minItems", () => {
      breaksExactly({ type: "array", items: { type: "string", minLength: 1 }, minItems: 1, maxItems: 4 }, [
        "minItems",
        "maxItems"
      ])
    })

    it("anyOf leaves: the mutation fails every alternative", () => {
      const interval = {
        anyOf: [{ type: "string", enum: ["auto"] }, durationField({ minimumMs: 60_000, maximumMs: 21_600_000 })]
      }
      const document = doc(interval)
      const auto = violationsOf(document, "auto")
      assert.isAbove(auto.length, 0)
      for (const violation of auto) assert.isFalse(validates(document, interval, violation.value))
      const rules = violationsOf(document, "30m").map((violation) => violation.rule)
      assert.includeMembers(rules, ["duration-minimum", "duration-maximum", "pattern"])
    })

    it("nested leaves: paths through objects and arrays; setAt changes only that leaf", () => {
      const definitions = {
        EnvVar: {
          type: "object",
          properties: { name: { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_]*$" }, value: { type: "string" } },
          required: ["name"]
        }
      }
      const document = doc({
        type: "object",
        properties: {
          env: { type: "array", items: { $ref: "#/components/schemas/EnvVar" }, maxItems: 3 },
          recovery: { type: "object", properties: { maxAttempts: { type: "integer", minimum: 1, maximum: 32 } } }
        }
      }, definitions)
      const value: Json = { env: [{ name: "A", value: "1" }, { name: "B" }], recovery: { maxAttempts: 3 } }
      assert.isTrue(validates(document, document.schema, value))
      const violations = violationsOf(document, value)
      const keys = violations.map((violation) => `${violation.path.join("/")} ${violation.rule}`)
      assert.includeMembers(keys, [
        "env maxItems",
        "env/0/name pattern",
        "env/1/name pattern",
        "recovery/maxAttempts minimum",
        "recovery/maxAttempts maximum"
      ])
      for (const violation of violations) {
        const mutated = setAt(value, violation.path, violation.value)
        assert.isFalse(validates(document, document.schema, mutated), keys.join(", "))
        const changed = pathsIn(mutated).filter((path) => !path.join("/").startsWith(violation.path.join("/")))
        for (const path of changed) {
          assert.isTrue(
            pathsIn(value).some((other) => other.join("/") === path.join("/")),
            `only ${violation.path.join("/")} changed`
          )
        }
      }
      const maxItems = violations.find((violation) => violation.rule === "maxItems")
      assert.isTrue(maxItems !== undefined && isArray(maxItems.value) && maxItems.value.length === 4)
    })

    it("a bound from one alternative of an object's oneOf names that object as its context", () => {
      const document = doc({
        type: "object",
        properties: {
          volume: { type: "string", minLength: 1 },
          ephemeral: { type: "boolean" },
          size: { type: "integer", minimum: 1 }
        },
        oneOf: [
          { required: ["volume"], not: { required: ["ephemeral"], properties: { ephemeral: { enum: [true] } } } },
          { required: ["ephemeral"], properties: { ephemeral: { enum: [true] } }, not: { required: ["volume"] } }
        ]
      })
      allSatisfy(
        document,
        (value) =>
          isObject(value) &&
          (Object.hasOwn(value, "volume") ? value["ephemeral"] !== true : value["ephemeral"] === true)
      )
      const violations = violationsOf(document, { ephemeral: true, size: 2 })
      assert.deepInclude(violations, { path: ["ephemeral"], value: false, rule: "enum", context: [] })
      const size = violations.find((violation) => violation.path[0] === "size")
      assert.isDefined(size)
      assert.isUndefined(size!.context, "a bound of the object itself has no context")
    })

    it("accepts: the items that make an array too long are ones the whole value accepts", () => {
      const document = doc({
        type: "object",
        properties: { names: { type: "array", items: { type: "string", minLength: 1 }, maxItems: 3 } }
      })
      const lowercase = (value: Json): boolean =>
        isObject(value) && isArray(value["names"]) && value["names"].every((name) => /^[a-z]+$/u.test(name as string))
      const [violation] = violationsOf(document, { names: ["a"] }, { accepts: lowercase }).filter((found) =>
        found.rule === "maxItems"
      )
      assert.isDefined(violation)
      assert.isTrue(
        isArray(violation!.value) && violation!.value.length === 4 && lowercase({ names: violation!.value }),
        JSON.stringify(violation)
      )
    })

    it("setAt: immutable, through arrays and objects, creating missing members", () => {
      const value: Json = { a: [{ b: 1 }, { b: 2 }], c: "x" }
      assert.deepStrictEqual(setAt(value, ["a", "1", "b"], 5), { a: [{ b: 1 }, { b: 5 }], c: "x" })
      assert.deepStrictEqual(setAt(value, ["d", "e"], true), { a: [{ b: 1 }, { b: 2 }], c: "x", d: { e: true } })
      assert.deepStrictEqual(setAt(value, [], null), null)
      assert.deepStrictEqual(value, { a: [{ b: 1 }, { b: 2 }], c: "x" })
    })

    it("pathsIn lists every member, parents first", () => {
      assert.deepStrictEqual(pathsIn({ a: [1, { b: 2 }] }), [["a"], ["a", "0"], ["a", "1"], ["a", "1", "b"]])
    })
  })
})
