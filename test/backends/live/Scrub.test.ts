// Secret values out of text a run can put words into (src/backends/live/Scrub.ts): the agent's own messages about a
// run — a failed checkpoint's tar error naming the run's files — are scrubbed of everything the run was given.
import { assert, describe, it } from "@effect/vitest"
import type { RunSpec } from "../../../src/backends/live/Protocol.ts"
import { givenValues, scrub } from "../../../src/backends/live/Scrub.ts"

const spec = {
  env: { API_TOKEN: "tok-8c1d2e9f", MODE: "on" },
  secretFiles: [{ name: "db-password", contentBase64: Buffer.from("hunter22-secret").toString("base64") }]
} as unknown as RunSpec

describe("scrub", () => {
  it("replaces every value the run was given, env and secret files, and keeps values too short to be secrets", () => {
    const error = "tar: /platform/state/tok-8c1d2e9f: file changed as we read it; hunter22-secret in MODE on"
    assert.strictEqual(
      scrub(error, givenValues(spec)),
      "tar: /platform/state/[redacted]: file changed as we read it; [redacted] in MODE on"
    )
  })
})
