// Tests for the OpenAPI documents: each is valid OpenAPI 3.0 for an independent validator, every PATCH carries what
// kubectl needs to leave validation to the server, nothing offers strategic merge, every kind has an explainable
// schema (kubectl-compat §3), and toOpenApi30 turns JSON Schema constructs 3.0 lacks into their 3.0 forms.

import { assert, describe, it } from "@effect/vitest"
import { Validator } from "@seriousme/openapi-schema-validator"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { isArray, isObject } from "../../../src/core/Json.ts"
import type { Version } from "../../../src/core/meta/Kinds.ts"
import * as OpenApi from "../../../src/http/openapi/OpenApi.ts"
import { schemaDocuments } from "../../../src/http/openapi/SchemaDocuments.ts"
import { kinds, kindsIn } from "../../../src/kinds/Kinds.ts"
import { kindOperations } from "../../../src/kinds/Registry.ts"

const group = "nodus.dev"

/** The documents the server serves (every kind's schema generated from its effect Schema), and the core one. */
const documents: ReadonlyArray<readonly [label: string, document: JsonObject]> = [
  ["v1", OpenApi.document(group, "v1", schemaDocuments, kindOperations)],
  ["v1beta1", OpenApi.document(group, "v1beta1", schemaDocuments, kindOperations)],
  ["core v1", OpenApi.coreDocument()],
  ["v1 with permissive placeholders", OpenApi.document(group, "v1", OpenApi.permissiveSchemas, kindOperations)]
]

const member = (value: Json | undefined, key: string): Json | undefined => (isObject(value) ? value[key] : undefined)

/** Every operation of a document with its path and HTTP method. */
const operations = (
  document: JsonObject
): ReadonlyArray<readonly [path: string, method: string, operation: JsonObject]> => {
  const paths = document["paths"]
  if (!isObject(paths)) return []
  return Object.entries(paths).flatMap(([path, item]) =>
    (isObject(item) ? Object.entries(item) : [])
      .flatMap((
        [method, operation]
      ) => (method !== "parameters" && isObject(operation) ? [[path, method, operation] as const] : []))
  )
}

const parameterNames = (operation: JsonObject, location: string): ReadonlyArray<string> => {
  const parameters = operation["parameters"]
  if (!isArray(parameters)) return []
  return parameters.filter(isObject).filter((parameter) => parameter["in"] === location).map((parameter) =>
    String(parameter["name"])
  )
}

const validate = async (
  document: Readonly<Record<string, unknown>>
): Promise<{ readonly valid: boolean; readonly errors: string }> => {
  const validator = new Validator()
  // The validator may resolve $refs in place, so it gets its own copy.
  const result = await validator.validate(structuredClone(document))
  return { valid: result.valid && validator.version === "3.0", errors: JSON.stringify(result.errors ?? []) }
}

describe("OpenApi documents", () => {
  for (const [label, document] of documents) {
    it(`${label} is valid OpenAPI 3.0 for @seriousme/openapi-schema-validator`, async () => {
      assert.strictEqual(document["openapi"], "3.0.3")
      const result = await validate(document)
      assert.isTrue(result.valid, result.errors)
    })
  }

  it("the validator rejects what OpenAPI 3.0 lacks, so the checks above are not vacuous", async () => {
    const [, document] = documents[0] ?? ["", {}]
    const broken = { ...document, components: { schemas: { Bad: { type: "null" } } } }
    assert.isFalse((await validate(broken)).valid)
    const unknownKeyword = { ...document, components: { schemas: { Bad: { type: "object", $defs: {} } } } }
    assert.isFalse((await validate(unknownKeyword)).valid)
  })

  for (const [label, document] of documents) {
    it(`${label}: every PATCH has x-kubernetes-group-version-kind and a fieldValidation query parameter`, () => {
      const patches = operations(document).filter(([, method]) => method === "patch")
      // Namespaces are never patched; the nodus versions must have PATCH operations, or the loop below proves nothing.
      if (label !== "core v1") assert.isNotEmpty(patches)
      for (const [path, , operation] of patches) {
        assert.isTrue(isObject(operation["x-kubernetes-group-version-kind"]), path)
        assert.include(parameterNames(operation, "query"), "fieldValidation", path)
      }
    })

    it(`${label}: never mentions strategic merge`, () => {
      assert.notInclude(JSON.stringify(document), "strategic-merge-patch")
    })
  }

  it("gives every operation an operationId, an action and a default Status response", () => {
    for (const [, document] of documents) {
      const ids = operations(document).map(([, , operation]) => operation["operationId"])
      assert.strictEqual(new Set(ids).size, ids.length, "operationIds are unique")
      for (const [path, method, operation] of operations(document)) {
        assert.isString(operation["x-kubernetes-action"], `${method} ${path}`)
        assert.deepStrictEqual(member(member(operation["responses"], "default"), "content"), {
          "application/json": { schema: { $ref: "#/components/schemas/Status" } }
        })
      }
    }
  })

  it("gives every kind a components schema carrying its group, version and kind", () => {
    for (const info of kinds) {
      const document = OpenApi.document(group, info.version, OpenApi.permissiveSchemas, kindOperations)
      const schema = member(member(document["components"], "schemas"), `dev.nodus.${info.version}.${info.kind}`)
      assert.deepStrictEqual(member(schema, "x-kubernetes-group-version-kind"), [{
        group,
        version: info.version,
        kind: info.kind
      }])
      assert.strictEqual(member(schema, "description"), info.description)
      assert.deepStrictEqual(member(schema, "required"), info.hasSpec ? ["spec"] : undefined, info.plural)
      const list = member(member(document["components"], "schemas"), `dev.nodus.${info.version}.${info.kind}List`)
      assert.deepStrictEqual(member(member(member(list, "properties"), "items"), "items"), {
        $ref: `#/components/schemas/dev.nodus.${info.version}.${info.kind}`
      })
    }
  })
})

/** A Sandbox's commands, files and terminal (docs/sandboxes.md, "Commands and files"), with their query parameters. */
const sandboxRows: ReadonlyArray<
  readonly [operationId: string, method: string, path: string, action: string, query: ReadonlyArray<string>]
> = [
  ["listSandboxCommands", "get", "/apis/nodus.dev/v1/namespaces/{namespace}/sandboxes/{name}/commands", "list", []],
  ["runSandboxCommand", "post", "/apis/nodus.dev/v1/namespaces/{namespace}/sandboxes/{name}/commands", "post", []],
  ["readSandboxCommand", "get", "/apis/nodus.dev/v1/namespaces/{namespace}/sandboxes/{name}/commands/{id}", "get", []],
  [
    "readSandboxCommandLog",
    "get",
    "/apis/nodus.dev/v1/namespaces/{namespace}/sandboxes/{name}/commands/{id}/log",
    "get",
    ["follow"]
  ],
  [
    "writeSandboxCommandStdin",
    "post",
    "/apis/nodus.dev/v1/namespaces/{namespace}/sandboxes/{name}/commands/{id}/stdin",
    "post",
    ["close"]
  ],
  [
    "killSandboxCommand",
    "post",
    "/apis/nodus.dev/v1/namespaces/{namespace}/sandboxes/{name}/commands/{id}/kill",
    "post",
    ["signal"]
  ],
  ["readSandboxFile", "get", "/apis/nodus.dev/v1/namespaces/{namespace}/sandboxes/{name}/files", "get", ["path"]],
  ["writeSandboxFile", "put", "/apis/nodus.dev/v1/namespaces/{namespace}/sandboxes/{name}/files", "put", ["path"]],
  ["deleteSandboxFile", "delete", "/apis/nodus.dev/v1/namespaces/{namespace}/sandboxes/{name}/files", "delete", [
    "path"
  ]],
  ["openSandboxTerminal", "get", "/apis/nodus.dev/v1/namespaces/{namespace}/sandboxes/{name}/terminal", "connect", [
    "cols",
    "rows",
    "shell"
  ]]
]

describe("OpenApi paths", () => {
  const v1 = OpenApi.document(group, "v1", OpenApi.permissiveSchemas, kindOperations)
  const byId = new Map(
    operations(v1).map(([path, method, operation]) => [operation["operationId"], { path, method, operation }])
  )

  const rows: ReadonlyArray<readonly [operationId: string, method: string, path: string, action: string]> = [
    ["listNamespacedJob", "get", "/apis/nodus.dev/v1/namespaces/{namespace}/jobs", "list"],
    ["createNamespacedJob", "post", "/apis/nodus.dev/v1/namespaces/{namespace}/jobs", "post"],
    ["readNamespacedJob", "get", "/apis/nodus.dev/v1/namespaces/{namespace}/jobs/{name}", "get"],
    ["replaceNamespacedJob", "put", "/apis/nodus.dev/v1/namespaces/{namespace}/jobs/{name}", "put"],
    ["patchNamespacedJob", "patch", "/apis/nodus.dev/v1/namespaces/{namespace}/jobs/{name}", "patch"],
    ["deleteNamespacedJob", "delete", "/apis/nodus.dev/v1/namespaces/{namespace}/jobs/{name}", "delete"],
    ["readNamespacedJobStatus", "get", "/apis/nodus.dev/v1/namespaces/{namespace}/jobs/{name}/status", "get"],
    ["patchNamespacedJobStatus", "patch", "/apis/nodus.dev/v1/namespaces/{namespace}/jobs/{name}/status", "patch"],
    ["listJobForAllNamespaces", "get", "/apis/nodus.dev/v1/jobs", "list"],
    ["listBudget", "get", "/apis/nodus.dev/v1/budgets", "list"],
    ["patchBudgetStatus", "patch", "/apis/nodus.dev/v1/budgets/{name}/status", "patch"],
    ...sandboxRows.map(([operationId, method, path, action]) => [operationId, method, path, action] as const),
    ["readFunctionCallResult", "get", "/apis/nodus.dev/v1/namespaces/{namespace}/functioncalls/{name}/result", "get"],
    ["createFunctionCallBatch", "post", "/apis/nodus.dev/v1/namespaces/{namespace}/functions/{name}/map", "post"]
  ]
  for (const [operationId, method, path, action] of rows) {
    it(`${operationId} is ${method.toUpperCase()} ${path}`, () => {
      const found = byId.get(operationId)
      assert.strictEqual(found?.path, path)
      assert.strictEqual(found?.method, method)
      assert.strictEqual(found?.operation["x-kubernetes-action"], action)
    })
  }

  it("documents every Sandbox operation and no other under a Sandbox: its query, its refusals, its errors as a Status", () => {
    // Under a Sandbox besides its status: the box's operations (kinds/sandbox/http/SandboxApi.ts), each documented.
    const documented = operations(v1).filter(([path]) =>
      path.includes("/sandboxes/{name}/") && !path.endsWith("/status")
    ).map(([, , operation]) => operation["operationId"])
    assert.sameMembers(documented, sandboxRows.map(([operationId]) => operationId))
    for (const [operationId, , , , query] of sandboxRows) {
      const operation = byId.get(operationId)!.operation
      assert.sameMembers([...parameterNames(operation, "query")], [...query], operationId)
      const description = String(operation["description"])
      for (const code of ["SandboxStarting", "SandboxNotRunning", "SandboxFailed"]) {
        assert.include(description, code, operationId)
      }
      assert.deepStrictEqual(
        member(
          member(member(member(member(operation, "responses"), "default"), "content"), "application/json"),
          "schema"
        ),
        { $ref: "#/components/schemas/Status" },
        operationId
      )
    }
    // What a refusal of its own says, in the operation that can answer it.
    assert.include(String(byId.get("writeSandboxCommandStdin")!.operation["description"]), "429 StdinBackpressure")
    for (const operationId of ["readSandboxFile", "writeSandboxFile"]) {
      assert.include(String(byId.get(operationId)!.operation["description"]), "413 FileTooLarge")
    }
    assert.include(String(byId.get("readSandboxFile")!.operation["description"]), "422 Invalid")
    assert.include(String(byId.get("runSandboxCommand")!.operation["description"]), "415 UnsupportedMediaType")
    assert.include(
      String(byId.get("runSandboxCommand")!.operation["description"]),
      "killed when its client disconnects"
    )
  })

  it("serves only the operations a kind has", () => {
    // Attempts are read-only with no status subresource; enrollment tokens are never replaced or patched.
    assert.isFalse(byId.has("createNamespacedAttempt"))
    assert.isFalse(byId.has("readNamespacedAttemptStatus"))
    assert.isTrue(byId.has("listAttemptForAllNamespaces"))
    assert.isFalse(byId.has("patchNamespacedEnrollmentToken"))
    assert.isTrue(byId.has("deleteNamespacedEnrollmentToken"))
    assert.isFalse(operations(v1).some(([path]) => path.includes("/namespaces/{namespace}/budgets")))
    assert.isFalse(operations(v1).some(([path]) => path.includes("trainingjobs")))
  })

  it("gives list, write and patch operations their query and header parameters", () => {
    const names = (operationId: string, location: string) => {
      const found = byId.get(operationId)
      return found === undefined ? [] : parameterNames(found.operation, location)
    }
    assert.deepStrictEqual(names("listNamespacedJob", "query"), [
      "labelSelector",
      "fieldSelector",
      "limit",
      "continue",
      "resourceVersion",
      "watch",
      "timeoutSeconds",
      "allowWatchBookmarks"
    ])
    assert.deepStrictEqual(names("createNamespacedJob", "query"), ["dryRun", "fieldValidation", "fieldManager"])
    assert.deepStrictEqual(names("replaceNamespacedJob", "query"), ["dryRun", "fieldValidation", "fieldManager"])
    assert.deepStrictEqual(names("patchNamespacedJob", "query"), ["dryRun", "fieldValidation", "fieldManager", "force"])
    assert.deepStrictEqual(names("createNamespacedJob", "header"), ["Idempotency-Key", "If-Match"])
  })

  it("accepts merge, JSON and apply patches, and JSON object bodies for create", () => {
    const patch = byId.get("patchNamespacedJob")?.operation
    assert.deepStrictEqual(Object.keys(member(member(patch, "requestBody"), "content") as JsonObject), [
      "application/merge-patch+json",
      "application/json-patch+json",
      "application/apply-patch+yaml"
    ])
    const create = byId.get("createNamespacedJob")?.operation
    assert.deepStrictEqual(member(member(member(create, "requestBody"), "content"), "application/json"), {
      schema: { $ref: "#/components/schemas/dev.nodus.v1.Job" }
    })
    const list = byId.get("listNamespacedJob")?.operation
    assert.deepStrictEqual(member(member(member(member(list, "responses"), "200"), "content"), "application/json"), {
      schema: { $ref: "#/components/schemas/dev.nodus.v1.JobList" }
    })
  })

  it("declares the path parameters of every templated path", () => {
    const paths = v1["paths"]
    assert.isTrue(isObject(paths))
    for (const [path, item] of Object.entries(isObject(paths) ? paths : {})) {
      const declared = (isObject(item) && isArray(item["parameters"]) ? item["parameters"] : []).filter(isObject)
        .map((parameter) => parameter["name"])
      const templated = [...path.matchAll(/\{(\w+)\}/gu)].map((match) => match[1])
      assert.deepStrictEqual(declared, templated, path)
    }
  })
})

describe("OpenApi.index and core document", () => {
  it("points at both nodus versions and the core api/v1", () => {
    assert.deepStrictEqual(OpenApi.index(group), {
      paths: {
        "apis/nodus.dev/v1": { serverRelativeURL: "/openapi/v3/apis/nodus.dev/v1" },
        "apis/nodus.dev/v1beta1": { serverRelativeURL: "/openapi/v3/apis/nodus.dev/v1beta1" },
        "api/v1": { serverRelativeURL: "/openapi/v3/api/v1" }
      }
    })
  })

  it("describes namespaces with their Namespace schema, and read-only events", () => {
    const core = OpenApi.coreDocument()
    const ids = operations(core).map(([, , operation]) => operation["operationId"])
    assert.deepStrictEqual([...ids].sort(), [
      "createNamespace",
      "deleteNamespace",
      "listEventForAllNamespaces",
      "listNamespace",
      "listNamespacedEvent",
      "readNamespace",
      "readNamespacedEvent"
    ])
    const schema = member(member(core["components"], "schemas"), "io.k8s.api.core.v1.Namespace")
    assert.deepStrictEqual(member(schema, "x-kubernetes-group-version-kind"), [{
      group: "",
      version: "v1",
      kind: "Namespace"
    }])
  })

  it("has a path per version's kinds", () => {
    for (const version of ["v1", "v1beta1"] satisfies ReadonlyArray<Version>) {
      const document = OpenApi.document(group, version, OpenApi.permissiveSchemas, kindOperations)
      const paths = Object.keys(isObject(document["paths"]) ? document["paths"] : {})
      for (const info of kindsIn(version)) {
        assert.isTrue(paths.some((path) => path.endsWith(`/${info.plural}`)), info.plural)
      }
    }
  })
})

describe("OpenApi.objectMetaSchema", () => {
  const schema = OpenApi.objectMetaSchema()
  const properties = isObject(schema["properties"]) ? schema["properties"] : {}

  it("covers the spec's metadata fields, each with a description", () => {
    assert.includeMembers(Object.keys(properties), [
      "name",
      "namespace",
      "labels",
      "annotations",
      "resourceVersion",
      "uid",
      "generation",
      "creationTimestamp",
      "deletionTimestamp",
      "finalizers",
      "ownerReferences",
      "managedFields"
    ])
    for (const [name, property] of Object.entries(properties)) assert.isString(member(property, "description"), name)
  })

  it("renders nullable fields and string maps in the OpenAPI 3.0 way", () => {
    assert.deepStrictEqual(member(properties["finalizers"], "nullable"), true)
    assert.isUndefined(member(properties["finalizers"], "anyOf"))
    assert.deepStrictEqual(member(properties["labels"], "additionalProperties"), { type: "string" })
    assert.deepStrictEqual(member(member(properties["ownerReferences"], "items"), "required"), [
      "apiVersion",
      "kind",
      "name",
      "uid"
    ])
  })
})

describe("OpenApi.toOpenApi30", () => {
  const rows: ReadonlyArray<readonly [label: string, input: unknown, expected: unknown]> = [
    ["anyOf with null becomes nullable", { anyOf: [{ type: "string" }, { type: "null" }], description: "d" }, {
      type: "string",
      description: "d",
      nullable: true
    }],
    ["a nullable $ref is wrapped in allOf", { anyOf: [{ $ref: "#/definitions/Spec" }, { type: "null" }] }, {
      nullable: true,
      allOf: [{ $ref: "#/components/schemas/Spec" }]
    }],
    ["a described $ref is wrapped in allOf", { $ref: "#/$defs/Spec", description: "d" }, {
      description: "d",
      allOf: [{ $ref: "#/components/schemas/Spec" }]
    }],
    ["a bare $ref stays a reference", { $ref: "#/definitions/Spec" }, { $ref: "#/components/schemas/Spec" }],
    ["const becomes a one-value enum", { type: "string", const: "Job" }, { type: "string", enum: ["Job"] }],
    ["a type array with null becomes nullable", { type: ["integer", "null"] }, { type: "integer", nullable: true }],
    ["type null alone", { type: "null" }, { nullable: true, enum: [null] }],
    ["oneOf with several members keeps the union", {
      oneOf: [{ type: "string" }, { type: "integer" }, { type: "null" }]
    }, { oneOf: [{ type: "string" }, { type: "integer" }], nullable: true }],
    ["an enum with null is nullable", { type: "string", enum: ["a", null] }, {
      type: "string",
      enum: ["a", null],
      nullable: true
    }],
    ["$schema, $id, $defs and propertyNames are dropped", {
      $schema: "http://json-schema.org/draft-04/schema#",
      $id: "x",
      $defs: { A: {} },
      propertyNames: { pattern: "^a" },
      type: "object"
    }, { type: "object" }],
    ["numeric exclusive bounds become boolean", { type: "number", exclusiveMinimum: 0, exclusiveMaximum: 10 }, {
      type: "number",
      minimum: 0,
      exclusiveMinimum: true,
      maximum: 10,
      exclusiveMaximum: true
    }],
    ["examples becomes example", { type: "string", examples: ["a", "b"] }, { type: "string", example: "a" }],
    ["empty required is dropped", { type: "object", required: [] }, { type: "object" }],
    ["patternProperties widen to additionalProperties", {
      type: "object",
      patternProperties: { "^a": { type: "string" } }
    }, { type: "object", additionalProperties: { type: "string" } }],
    ["boolean schemas", { type: "object", properties: { a: true, b: false }, additionalProperties: false }, {
      type: "object",
      properties: { a: {}, b: { not: {} } },
      additionalProperties: false
    }],
    ["x- extensions pass", { type: "object", "x-kubernetes-preserve-unknown-fields": true }, {
      type: "object",
      "x-kubernetes-preserve-unknown-fields": true
    }],
    ["values and property names are left alone", {
      type: "object",
      properties: { const: { type: "string", default: { anyOf: 1, const: 2 } } }
    }, { type: "object", properties: { const: { type: "string", default: { anyOf: 1, const: 2 } } } }],
    ["nested subschemas are converted", {
      type: "object",
      properties: {
        tags: { type: "array", items: { anyOf: [{ type: "string", const: "a" }, { type: "null" }] } },
        owner: { anyOf: [{ $ref: "#/definitions/Owner" }, { type: "null" }], description: "o" },
        either: { allOf: [{ not: { const: 1 } }] }
      },
      additionalProperties: { anyOf: [{ type: "integer" }, { type: "null" }] }
    }, {
      type: "object",
      properties: {
        tags: { type: "array", items: { type: "string", enum: ["a"], nullable: true } },
        owner: { description: "o", nullable: true, allOf: [{ $ref: "#/components/schemas/Owner" }] },
        either: { not: { enum: [1] } }
      },
      additionalProperties: { type: "integer", nullable: true }
    }],
    [
      "allOf members without a $ref fold into the node unless their keywords overlap it (kubectl reads the node's own)",
      {
        type: "string",
        pattern: "^a",
        allOf: [{ description: "d", default: "ab" }, { pattern: "b$" }, { $ref: "#/$defs/Owner" }]
      },
      {
        type: "string",
        pattern: "^a",
        description: "d",
        default: "ab",
        allOf: [{ pattern: "b$" }, { $ref: "#/components/schemas/Owner" }]
      }
    ]
  ]
  for (const [label, input, expected] of rows) {
    it(label, () => {
      assert.deepStrictEqual(OpenApi.toOpenApi30(input), expected)
    })
  }

  it("produces schemas the validator accepts as OpenAPI 3.0", async () => {
    const schemas = Object.fromEntries(rows.map(([, input], index) => [`Case${index}`, OpenApi.toOpenApi30(input)]))
    const document = {
      openapi: "3.0.3",
      info: { title: "cases", version: "v1" },
      paths: {},
      components: { schemas: { ...schemas, Spec: { type: "object" }, Owner: { type: "object" } } }
    }
    const result = await validate(document)
    assert.isTrue(result.valid, result.errors)
  })
})

describe("OpenApi map batches", () => {
  it("documents the FunctionCallBatch body: its mapId and inputs required, each input a Payload", () => {
    const schemas =
      (OpenApi.document(group, "v1", OpenApi.permissiveSchemas, kindOperations)["components"] as any).schemas
    const batch = schemas["FunctionCallBatch"]
    assert.includeMembers(batch.required, ["mapId", "inputs"])
    assert.strictEqual(batch.properties.inputs.items.$ref, "#/components/schemas/Payload")
    assert.isObject(schemas["Payload"])
  })
})
