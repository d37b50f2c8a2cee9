/**
 * Admission of a written object: decode the body with its kind's schema, turn every schema issue into a cause with
 * the exact field path, and apply the caller's `fieldValidation` to fields the schema does not know (spec: Create
 * semantics; Kubernetes' server-side field validation):
 *
 * - Strict: unknown fields are an error (400 BadRequest), each named with its path.
 * - Warn: unknown fields are dropped and reported as warnings (the HTTP `Warning` header).
 * - Ignore: unknown fields are dropped silently.
 */
import { Exit, Result, Schema, type SchemaAST, SchemaIssue } from "effect"
import { isObject, type Json, type JsonObject } from "../Json.ts"
import { ApiError, type Cause, invalid, type Subject } from "./ApiError.ts"

export type FieldValidation = "Strict" | "Warn" | "Ignore"

export const fieldValidations: ReadonlyArray<FieldValidation> = ["Strict", "Warn", "Ignore"]

export interface Admitted {
  readonly object: JsonObject
  readonly warnings: ReadonlyArray<string>
}

/** The JSON type of a value, for messages that must not echo the value itself. */
const jsonType = (value: unknown): string => value === null ? "null" : Array.isArray(value) ? "array" : typeof value

/**
 * Type errors name the type that came, never the value: a value in the wrong place may be a secret (a Secret's data
 * sent as a string), and errors are logged and shown. Kubernetes words these "must be of type object".
 */
const leafHook: SchemaIssue.LeafHook = (issue) =>
  issue._tag === "InvalidType" && Object.hasOwn(issue, "input")
    ? `${SchemaIssue.defaultLeafHook(new SchemaIssue.InvalidType(issue.ast))}, got ${jsonType(issue.input)}`
    : SchemaIssue.defaultLeafHook(issue)

const formatter = SchemaIssue.makeFormatterStandardSchemaV1({ leafHook })

const identifier = /^[A-Za-z_$][\w$-]*$/u

/** `spec.env[0].name`; map keys that are not identifiers go in brackets: `metadata.labels[app.kubernetes.io/name]`. */
export const fieldPath = (segments: ReadonlyArray<PropertyKey>): string =>
  segments.reduce<string>((path, segment) => {
    if (typeof segment === "number") return `${path}[${segment}]`
    const name = String(segment)
    if (!identifier.test(name)) return `${path}[${name}]`
    return path === "" ? name : `${path}.${name}`
  }, "")

interface Problem {
  readonly path: ReadonlyArray<PropertyKey>
  readonly tag: SchemaIssue.Issue["_tag"]
  readonly message: string
}

/** Flattens an issue tree into leaves with absolute paths. */
const problemsOf = (issue: SchemaIssue.Issue, path: ReadonlyArray<PropertyKey> = []): ReadonlyArray<Problem> => {
  switch (issue._tag) {
    case "Pointer":
      return problemsOf(issue.issue, [...path, ...issue.path])
    case "Composite":
      return issue.issues.flatMap((inner) => problemsOf(inner, path))
    case "Encoding":
      return problemsOf(issue.issue, path)
    case "AnyOf":
      // A union whose discriminator picked one member reports that member's issue wrapped in AnyOf; unwrapping it
      // keeps the real reason (an unknown field stays UnexpectedKey and obeys fieldValidation).
      if (issue.issues.length === 1) return problemsOf(issue.issues[0]!, path)
      return issue.issues.length === 0
        ? discriminatorProblem(issue, path) ?? leavesOf(issue, path)
        : leavesOf(issue, path)
    default:
      return leavesOf(issue, path)
  }
}

const literalsOf = (ast: SchemaAST.AST): ReadonlyArray<unknown> =>
  ast._tag === "Literal" ? [ast.literal] : ast._tag === "Union" ? ast.types.flatMap(literalsOf) : []

/** The key every member of a union of objects fixes to literals (`type`, `kind`, `intent`), with all its values. */
const discriminatorOf = (
  union: SchemaAST.Union
): { readonly key: string; readonly values: ReadonlyArray<unknown> } | undefined => {
  const members = union.types.map((member) =>
    new Map(
      member._tag === "Objects"
        ? member.propertySignatures.map((property) => [String(property.name), literalsOf(property.type)] as const)
        : []
    )
  )
  const [first] = members
  const key = [...(first?.keys() ?? [])].find((name) => members.every((member) => (member.get(name)?.length ?? 0) > 0))
  return key === undefined ? undefined : { key, values: members.flatMap((member) => member.get(key) ?? []) }
}

/**
 * A value no member of a discriminated union takes: reported at the discriminator (`spec.type`), as Kubernetes
 * reports an unsupported enum value, rather than at the object.
 */
const discriminatorProblem = (
  issue: SchemaIssue.AnyOf,
  path: ReadonlyArray<PropertyKey>
): ReadonlyArray<Problem> | undefined => {
  const discriminator = discriminatorOf(issue.ast)
  if (discriminator === undefined || !isObject(issue.input as Json)) return undefined
  const value = (issue.input as JsonObject)[discriminator.key]
  const supported = discriminator.values.map((literal) => JSON.stringify(literal)).join(", ")
  return [
    value === undefined
      ? { path: [...path, discriminator.key], tag: "MissingKey", message: "Required value" }
      : {
        path: [...path, discriminator.key],
        tag: "AnyOf",
        message: `Unsupported value: ${JSON.stringify(value)}: supported values: ${supported}`
      }
  ]
}

const leavesOf = (issue: SchemaIssue.Issue, path: ReadonlyArray<PropertyKey>): ReadonlyArray<Problem> =>
  formatter(issue).issues.map((entry) => ({
    path: [...path, ...(entry.path ?? []).map((segment) => (typeof segment === "object" ? segment.key : segment))],
    tag: issue._tag,
    message: entry.message
  }))

const reasonOf = (tag: Problem["tag"]): string => {
  switch (tag) {
    case "MissingKey":
      return "FieldValueRequired"
    case "UnexpectedKey":
      return "FieldValueUnknown"
    case "InvalidType":
      return "FieldValueTypeInvalid"
    case "AnyOf":
      return "FieldValueNotSupported"
    case "Forbidden":
      return "FieldValueForbidden"
    default:
      return "FieldValueInvalid"
  }
}

const causeOf = (problem: Problem): Cause => ({
  field: fieldPath(problem.path),
  reason: reasonOf(problem.tag),
  message: problem.tag === "MissingKey"
    ? "Required value"
    : problem.tag === "UnexpectedKey"
    ? `unknown field "${fieldPath(problem.path)}"`
    : problem.message
})

const unknownFieldError = (unknown: ReadonlyArray<Cause>): ApiError =>
  new ApiError({
    code: "BadRequest",
    message: `strict decoding error: ${unknown.map((cause) => cause.message).join(", ")}`,
    causes: unknown,
    fix:
      "Remove the fields the kind does not define (see `kubectl explain`), or send fieldValidation=Warn to drop them with a warning."
  })

interface Decoders {
  readonly strict: (input: unknown) => Exit.Exit<unknown, Schema.SchemaError>
  readonly lenient: (input: unknown) => Exit.Exit<unknown, Schema.SchemaError>
}

// A decoder is compiled from its schema once; schemas are built once per kind (KindSchemas.ts), so this stays small.
const decoders = new WeakMap<object, Decoders>()

const decodersOf = (schema: Schema.Codec<unknown, unknown>): Decoders => {
  let found = decoders.get(schema)
  if (found === undefined) {
    found = {
      // reportInput keeps the rejected value on issues, so a union can name its discriminator's value.
      strict: Schema.decodeUnknownExit(schema, { errors: "all", onExcessProperty: "error", reportInput: true }),
      lenient: Schema.decodeUnknownExit(schema, { errors: "all", reportInput: true })
    }
    decoders.set(schema, found)
  }
  return found
}

/** The schema's verdict in a failed decode; undefined when the decode died instead (a defect of a schema). */
const schemaErrorOf = (exit: Exit.Exit<unknown, Schema.SchemaError>): Schema.SchemaError | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
  return failure !== undefined && Schema.isSchemaError(failure.error) ? failure.error : undefined
}

const causesOf = (error: Schema.SchemaError): ReadonlyArray<Cause> =>
  problemsOf(error.issue).map((problem) => causeOf(problem))

const unexpected = () => new ApiError({ code: "InternalError", message: "admission failed unexpectedly" })

/**
 * Decodes `input` with `schema`. Returns the admitted object (unknown fields dropped) and the warnings for Warn, or
 * the error a client should see: Invalid with every cause, or BadRequest for unknown fields under Strict.
 */
export const admit = <S extends Schema.Codec<unknown, unknown>>(
  schema: S,
  input: unknown,
  fieldValidation: FieldValidation,
  subject: Subject,
  kind: string
): Result.Result<Admitted, ApiError> => {
  const { strict: decodeStrict, lenient: decodeLenient } = decodersOf(schema)
  const strict = decodeStrict(input)
  if (Exit.isSuccess(strict)) return Result.succeed({ object: strict.value as JsonObject, warnings: [] })
  const failure = schemaErrorOf(strict)
  if (failure === undefined) return Result.fail(unexpected())
  const causes = causesOf(failure)
  const unknown = causes.filter((cause) => cause.reason === "FieldValueUnknown")
  const invalidCauses = causes.filter((cause) => cause.reason !== "FieldValueUnknown")
  if (invalidCauses.length > 0) {
    return Result.fail(invalid(subject, fieldValidation === "Strict" ? causes : invalidCauses, kind))
  }
  if (fieldValidation === "Strict") return Result.fail(unknownFieldError(unknown))
  // Rules that look at a whole object (a filter over several fields) run only once its structure decodes, so without
  // the unknown fields the lenient decode can find problems the strict one never reached: they are the client's too.
  const lenient = decodeLenient(input)
  if (Exit.isFailure(lenient)) {
    const rules = schemaErrorOf(lenient)
    if (rules === undefined) return Result.fail(unexpected())
    const ruleCauses = causesOf(rules)
    return Result.fail(invalid(subject, fieldValidation === "Warn" ? [...ruleCauses, ...unknown] : ruleCauses, kind))
  }
  return Result.succeed({
    object: lenient.value as JsonObject,
    warnings: fieldValidation === "Warn" ? unknown.map((cause) => cause.message) : []
  })
}
