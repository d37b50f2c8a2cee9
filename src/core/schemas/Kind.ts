/**
 * What a kind's schema module provides: the spec and status schemas (one source for admission, OpenAPI and test
 * data), the normalization that folds aliases and applies cross-field defaults, and the rules of updates after create
 * (spec: which fields are immutable, which amounts may only be raised). `checkUpdate` enforces those rules.
 */
import { Result, Schema } from "effect"
import { equals, isObject, type Json, type JsonObject } from "../Json.ts"
import { type Cause, fieldInvalid } from "../meta/ApiError.ts"
import type { KindInfo } from "../meta/Kinds.ts"
import { changedLeaves, keyPath } from "../meta/ManagedFields.ts"
import { compareUsd } from "../Units.ts"

/** Dotted field paths relative to `spec`, e.g. "recovery.maxAttempts". */
export type FieldPaths = ReadonlyArray<string>

export type UpdateRules =
  /** Only these fields may change after create (the Job's explicit list). */
  | { readonly mutable: FieldPaths; readonly raiseOnly?: FieldPaths }
  /** These fields may not change after create; everything else may. */
  | { readonly immutable: FieldPaths; readonly raiseOnly?: FieldPaths }

/** A schema admission can run: no services needed to decode it. */
export type Admissible = Schema.Codec<unknown, unknown>

export interface KindDefinition {
  readonly spec: Admissible
  readonly status: Admissible
  /**
   * Folds aliases and applies defaults that depend on other fields, after the spec decoded; a spec it changes is
   * decoded again, so the defaults of the fields it made apply too.
   */
  readonly normalize?: (spec: JsonObject) => JsonObject
  /**
   * Defaults that depend on other fields and are valid as written, applied last, with no decoding after them (a
   * decoding costs as much as the rest of an admission for a big spec).
   */
  readonly complete?: (spec: JsonObject) => JsonObject
  /** Absent: every field may change. */
  readonly updates?: UpdateRules
  /**
   * Moves between values the field lists cannot express, given the spec before and after an update: e.g. an
   * AgentGroup's `sealed` only goes from false to true. Its causes are answered as Invalid.
   */
  readonly transitions?: (before: JsonObject, after: JsonObject) => ReadonlyArray<Cause>
  /**
   * Rules that need the request time (admission itself is pure and has none), given the spec, the time and, on
   * updates, the spec before: e.g. a Workspace's readyBy at least 15 minutes ahead.
   */
  readonly timeRules?: (spec: JsonObject, nowMs: number, previous: JsonObject | undefined) => ReadonlyArray<Cause>
  /**
   * Rules that depend on how the server was started (admission itself is the same everywhere): e.g. a WebhookEndpoint
   * whose receiver is on loopback, which only a development server takes.
   */
  readonly serverRules?: (spec: JsonObject, settings: ServerSettings) => ReadonlyArray<Cause>
}

/** What admission knows of the server it runs in, for a kind's `serverRules`. */
export interface ServerSettings {
  /**
   * `--webhook-allow-loopback`: webhook receivers on loopback, over http or https (docs/webhooks.md, "Development").
   */
  readonly developmentWebhooks: boolean
  /**
   * Programs run on live hosts' own userland (the local backend; docs/live.md, "Images"): no image's default command
   * is known, so a Job must name its command. Absent: false (the simulator's images run as simulated).
   */
  readonly hostUserland?: boolean
}

/**
 * A decoded spec as the kind stores it: its `normalize` (the changed spec decoded again by `decodeAgain`, so the
 * defaults of the fields it made apply too), then its `complete`. Admission (Resources.ts) and the kind tests use it.
 */
export const normalizeSpec = <E>(
  definition: KindDefinition,
  spec: JsonObject,
  decodeAgain: (spec: JsonObject) => Result.Result<JsonObject, E>
): Result.Result<JsonObject, E> => {
  const next = definition.normalize === undefined ? spec : definition.normalize(spec)
  const decoded = equals(next, spec) ? Result.succeed(spec) : decodeAgain(next)
  const complete = definition.complete
  return complete === undefined ? decoded : Result.map(decoded, complete)
}

/** A kind whose fields are not written down yet: any JSON object. */
export const permissive: KindDefinition = {
  spec: Schema.Record(Schema.String, Schema.Json),
  status: Schema.Record(Schema.String, Schema.Json)
}

const dotted = (key: string): string => keyPath(key).join(".")

const covers = (rule: string, path: string): boolean =>
  path === rule || path.startsWith(`${rule}.`) || rule.startsWith(`${path}.`)

const valueAt = (value: Json | undefined, path: string): Json | undefined => {
  let current = value
  for (const segment of path.split(".")) {
    if (!isObject(current) || !Object.hasOwn(current, segment)) return undefined
    current = current[segment]
  }
  return current
}

/** Causes for fields that changed though the kind forbids it (spec: FieldImmutable). */
export const immutableChanges = (rules: UpdateRules, before: JsonObject, after: JsonObject): ReadonlyArray<Cause> => {
  const changed = [...changedLeaves(before, after)].map(dotted)
  const forbidden = "mutable" in rules
    ? changed.filter((path) => !rules.mutable.some((rule) => path === rule || path.startsWith(`${rule}.`)))
    : changed.filter((path) => rules.immutable.some((rule) => covers(rule, path)))
  // Report each field once, at the shallowest path the rules name.
  const fields = [...new Set(forbidden)].sort()
  return fields.map((path) =>
    fieldInvalid(`spec.${path}`, `Invalid value: ${JSON.stringify(valueAt(after, path) ?? null)}: field is immutable`)
  )
}

/** Causes for amounts lowered though they may only be raised (spec: Conventions 4, maxCostUSD). */
export const loweredAmounts = (rules: UpdateRules, before: JsonObject, after: JsonObject): ReadonlyArray<Cause> =>
  (rules.raiseOnly ?? []).flatMap((path) => {
    const previous = valueAt(before, path)
    const next = valueAt(after, path)
    if (typeof previous !== "string" || typeof next !== "string") {
      // Adding a cap to an uncapped object lowers it from unlimited; removing one raises it to unlimited.
      return previous === undefined && typeof next === "string"
        ? [
          fieldInvalid(
            `spec.${path}`,
            `Invalid value: "${next}": may only be raised after create, and the object was created without a limit`
          )
        ]
        : []
    }
    return compareUsd(next, previous) < 0
      ? [fieldInvalid(`spec.${path}`, `Invalid value: "${next}": may only be raised (it is ${previous})`)]
      : []
  })

/**
 * A transitions rule: once `spec.state` is `final` (a cancel), it stays so (spec: States and transitions — cancel is
 * terminal; nodus: a cancelled run does not come back, so it is refused rather than silently ignored).
 */
export const finalState =
  (final: string, kind: string) => (before: JsonObject, after: JsonObject): ReadonlyArray<Cause> =>
    before["state"] === final && after["state"] !== final
      ? [
        fieldInvalid(
          "spec.state",
          `Invalid value: ${JSON.stringify(after["state"] ?? null)}: a ${final} ${kind} cannot be resumed`
        )
      ]
      : []

/** Every rule an update of the spec breaks; empty when it may go ahead. */
export const checkUpdate = (definition: KindDefinition, before: Json | undefined, after: Json | undefined) => {
  const { updates: rules, transitions } = definition
  if (equals(before ?? null, after ?? null)) return { immutable: [], invalid: [] }
  const previous = isObject(before) ? before : {}
  const next = isObject(after) ? after : {}
  return {
    // FieldImmutable causes.
    immutable: rules === undefined ? [] : immutableChanges(rules, previous, next),
    // Invalid causes: amounts lowered that only rise, and state moves the kind forbids.
    invalid: [
      ...(rules === undefined ? [] : loweredAmounts(rules, previous, next)),
      ...(transitions?.(previous, next) ?? [])
    ]
  }
}

/**
 * A served kind: how the API serves it (its row of the spec's "Availability by kind") and the schema it is admitted
 * with.
 */
export interface ServedKind {
  readonly info: KindInfo
  readonly definition: KindDefinition
}
