/**
 * Secret values out of text a run's program or files can put words into — its log, its last lines, an error that
 * quotes its files — before the text reaches status, events, the server's logs or the agent's (docs/live.md, "Logs").
 */
import type { RunSpec } from "./Protocol.ts"

/** Secret values shorter than this are not scrubbed: they would redact ordinary words (docs/live.md, "Logs"). */
const scrubbedLengthMin = 4

/** Text with every secret value the program was given replaced by [redacted]. */
export const scrub = (text: string, values: ReadonlyArray<string>): string =>
  values.reduce(
    (scrubbed, value) => (value.length < scrubbedLengthMin ? scrubbed : scrubbed.split(value).join("[redacted]")),
    text
  )

/**
 * Everything a run was given that may be secret, as its agent knows it: every env value (the spec does not tell
 * which came from a Secret, so all are taken) and the secret files' contents.
 */
export const givenValues = (spec: RunSpec): ReadonlyArray<string> => [
  ...Object.values(spec.env),
  ...spec.secretFiles.map((file) => Buffer.from(file.contentBase64, "base64").toString("utf8"))
]
