/**
 * The body of `POST .../sandboxes/{name}/commands` (nodus's design where the spec says "not shown"; docs/sandboxes.md):
 * the one schema admission and the OpenAPI document read.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { described, duration, listOf, matching, optional } from "../../core/meta/Fields.ts"

const envName = matching(/^[A-Za-z_][A-Za-z0-9_]*$/u, "must match ^[A-Za-z_][A-Za-z0-9_]*$")

export const SandboxCommandRequest = Schema.Struct({
  command: described(
    listOf(Schema.String, Limits.sandboxCommandArgsMax).check(Schema.makeFilter(
      (
        argv: ReadonlyArray<string>
      ) => (argv.length === 0 || argv[0] === "" ? "Required value: the program to run, then its arguments" : undefined),
      { toJsonSchema: () => ({ minItems: 1 }) }
    )),
    "The argv: the program (found on the box's PATH), then its arguments; no shell unless you name one (sh -c)."
  ),
  stdin: optional(
    Schema.String,
    "Text written to the command's stdin; a foreground command's stdin is closed after it, a background one's stays open for .../stdin."
  ),
  env: optional(
    Schema.Record(envName, Schema.String).check(Schema.makeFilter(
      (
        env: Readonly<Record<string, string>>
      ) => (Object.keys(env).length <= Limits.sandboxCommandEnvMax
        ? undefined
        : `Too many: must have at most ${Limits.sandboxCommandEnvMax} variables`)
    )),
    "Variables added to the Sandbox's own environment for this command."
  ),
  workingDir: optional(
    Schema.String,
    "Where it runs: absolute, or relative to the Sandbox's workingDir (the default)."
  ),
  timeout: optional(
    duration({ minimumMs: 1, maximumMs: Limits.sandboxCommandTimeoutMsMax }),
    `Killed (SIGKILL) after this long; a foreground command defaults to ${Limits.sandboxCommandTimeoutDefault}, a background one runs until killed or the Sandbox stops.`
  ),
  background: optional(Schema.Boolean, "Answer at once with the command's id instead of waiting for its exit.")
}).annotate({ identifier: "SandboxCommandRequest", description: "A command to run in a running Sandbox." })

export type SandboxCommandRequestType = typeof SandboxCommandRequest.Type
