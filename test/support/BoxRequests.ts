/**
 * Box requests for tests (core/SandboxBox.ts): a command to start, the fields a test does not name at their defaults.
 */
import type { ExecRequest } from "../../src/core/SandboxBox.ts"

/** A foreground command with no env, working directory, stdin (closed at once) or timeout, unless `options` says. */
export const execRequest = (
  command: string,
  argv: ReadonlyArray<string>,
  options: Partial<Omit<ExecRequest, "_tag" | "command" | "argv">> = {}
): ExecRequest => ({
  _tag: "Exec",
  command,
  argv,
  env: {},
  workingDir: undefined,
  stdin: undefined,
  keepStdin: false,
  timeoutMs: undefined,
  background: false,
  ...options
})
