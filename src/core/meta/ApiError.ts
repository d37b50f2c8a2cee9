/**
 * The one error every operation of the resource API fails with. Its `code` is a registered code (ErrorCodes.ts), which
 * fixes the HTTP status, the docs page and the default fix; the rest is what the spec's Status body carries: a message,
 * the causes with their field paths, the object it concerns and, for retryable answers, when to come back.
 *
 * Core code returns these as values; the server renders them as Status bodies (http/Respond.ts).
 */
import { Data } from "effect"
import type { ErrorCode } from "./ErrorCodes.ts"
import type { ResourceRef } from "./Kinds.ts"

/** One problem of a request, as `details.causes[]` shows it (spec: Errors, Status body). */
export interface Cause {
  /** The field path, e.g. `spec.parallelism` or `metadata.labels[team]`; empty when the whole request is at fault. */
  readonly field: string
  /**
   * A CamelCase kind of problem: FieldValueInvalid, FieldValueRequired, FieldValueNotSupported, FieldValueForbidden…
   */
  readonly reason: string
  readonly message: string
}

/**
 * The object an error is about: `details.group`, `details.kind` (the plural, as Kubernetes writes it), name and uid.
 */
export interface Subject {
  readonly group?: string
  readonly kind?: string
  readonly name?: string
  readonly uid?: string
}

export class ApiError extends Data.TaggedError("ApiError")<{
  readonly code: ErrorCode
  readonly message: string
  readonly causes?: ReadonlyArray<Cause>
  readonly subject?: Subject
  readonly retryAfterSeconds?: number
  /** Replaces the registry's default fix when the problem has a more specific one. */
  readonly fix?: string
}> {}

/** What a Status `message` ends with before its fix: kubectl prints only `message`, so the fix goes there too. */
const fixSeparator = "; fix: "

/** A Status `message` that carries its fix (`details` and `fix` stay as they are). */
export const messageWithFix = (message: string, fix: string): string => `${message}${fixSeparator}${fix}`

/** A Status `message` without the fix the server appended, for clients that show `fix` on its own. */
export const messageWithoutFix = (message: string, fix: unknown): string =>
  typeof fix === "string" && message.endsWith(`${fixSeparator}${fix}`)
    ? message.slice(0, message.length - fixSeparator.length - fix.length)
    : message

/** `jobs.nodus.dev "train-1"`: how Kubernetes names an object in messages. */
/** The subject of an error about objects of `ref` (and the one named `name`). */
export const subjectOf = (ref: ResourceRef, name?: string): Subject => ({
  group: ref.group,
  kind: ref.info.plural,
  ...(name === undefined ? {} : { name })
})

export const describe = (subject: Subject): string => {
  const resource = subject.group === undefined || subject.group === ""
    ? subject.kind
    : `${subject.kind}.${subject.group}`
  return subject.name === undefined ? `${resource ?? "object"}` : `${resource ?? "object"} "${subject.name}"`
}

const withSubject = (subject: Subject | undefined) => (subject === undefined ? {} : { subject })

export const notFound = (subject: Subject): ApiError =>
  new ApiError({ code: "NotFound", message: `${describe(subject)} not found`, subject })

export const alreadyExists = (subject: Subject): ApiError =>
  new ApiError({ code: "AlreadyExists", message: `${describe(subject)} already exists`, subject })

export const conflict = (subject: Subject, why: string): ApiError =>
  new ApiError({
    code: "Conflict",
    message: `Operation cannot be fulfilled on ${describe(subject)}: ${why}`,
    subject
  })

/** A method the requested path does not take (Kubernetes' wording). */
export const methodNotAllowed = (method: string): ApiError =>
  new ApiError({
    code: "MethodNotAllowed",
    message: `the server does not allow this method on the requested resource (${method})`
  })

/** A path the server does not serve (Kubernetes' wording). */
export const resourceNotFound = (): ApiError =>
  new ApiError({ code: "NotFound", message: "the server could not find the requested resource" })

export const badRequest = (message: string, causes?: ReadonlyArray<Cause>): ApiError =>
  new ApiError({ code: "BadRequest", message, ...(causes === undefined ? {} : { causes }) })

/** Kubernetes' Invalid: `Job.nodus.dev "x" is invalid: [spec.a: Invalid value: …, …]`. */
export const invalid = (subject: Subject | undefined, causes: ReadonlyArray<Cause>, kindName?: string): ApiError => {
  const list = causes.map((cause) => (cause.field === "" ? cause.message : `${cause.field}: ${cause.message}`)).join(
    ", "
  )
  const what = subject === undefined
    ? "request"
    : `${kindName ?? subject.kind ?? "object"}${subject.group ? `.${subject.group}` : ""}${
      subject.name === undefined ? "" : ` "${subject.name}"`
    }`
  return new ApiError({
    code: "Invalid",
    message: `${what} is invalid: ${causes.length === 1 ? list : `[${list}]`}`,
    causes,
    ...withSubject(subject)
  })
}

/** A single-field validation problem. */
export const fieldInvalid = (field: string, message: string, reason = "FieldValueInvalid"): Cause => ({
  field,
  reason,
  message
})

export const fieldRequired = (field: string): Cause => ({
  field,
  reason: "FieldValueRequired",
  message: "Required value"
})

export const fieldForbidden = (field: string, message: string): Cause => ({
  field,
  reason: "FieldValueForbidden",
  message
})

/** Renders a JSON value the way Kubernetes quotes it inside "Invalid value: …" messages. */
export const quote = (
  value: unknown
): string => (typeof value === "string" ? `"${value}"` : JSON.stringify(value) ?? "null")
