/**
 * The long flags of the commands that take `--name value`, `--name=value` and `--json` (`nodus replay-functions`,
 * `nodus forecast`): one reading, so each command only says which flags take a value and what the values mean.
 */

/** A command-line mistake: the command prints it with its usage and exits 2. */
export class UsageError extends Error {}

export interface LongFlags {
  /** The last value given to each flag that takes one. */
  readonly values: Readonly<Record<string, string>>
  readonly json: boolean
}

/** The flags of `args`, or "help" at the first --help or -h; an unknown flag or a missing value is a UsageError. */
export const parseLongFlags = (args: ReadonlyArray<string>, withValue: ReadonlySet<string>): LongFlags | "help" => {
  const values: Record<string, string> = {}
  let json = false
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!
    if (arg === "--help" || arg === "-h") return "help"
    if (arg === "--json") {
      json = true
      continue
    }
    if (!arg.startsWith("--")) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`)
    const equals = arg.indexOf("=")
    const name = arg.slice(2, equals < 0 ? undefined : equals)
    if (!withValue.has(name)) throw new UsageError(`unknown flag --${name}`)
    const value = equals < 0 ? args[++index] : arg.slice(equals + 1)
    if (value === undefined) throw new UsageError(`--${name} needs a value`)
    values[name] = value
  }
  return { values, json }
}
