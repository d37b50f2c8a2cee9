/**
 * The short chaos test (issue 16; the long form is `npm run bench:chaos`): three `nodus serve --backend sim` processes
 * on one PostgreSQL database, Jobs created through all of them, two of them killed with SIGKILL in turn and restarted.
 * Every Job reaches its final phase exactly once, each Attempt is launched once, the ledger's charges equal the
 * metered runs, every Job's status.cost equals the ledger after every takeover (a kill's and a restart's), no event is
 * recorded twice, every final event reaches a webhook receiver as one delivery (sent again only by a killed sender's
 * successor), and the killed servers' shards are taken over (Chaos.ts says how each is checked). Runs when DATABASE_URL
 * is set; bounded (a deadline on every wait), loopback only.
 */
import { assert, describe, it } from "@effect/vitest"
import { databaseUrl, suiteDatabase } from "../support/Postgres.ts"
import { runChaos } from "./Chaos.ts"

describe.skipIf(databaseUrl === undefined)("three servers on one PostgreSQL database, one killed at a time", () => {
  const database = suiteDatabase()

  it(
    "every Job ends once, each Attempt launched once, charges equal the metered runs and status.cost after every takeover, no event twice, each final event delivered once",
    async () => {
      const report = await runChaos({
        databaseUrl: database.url,
        servers: 3,
        jobs: 24,
        speed: 60,
        durations: ["1m", "3m", "6m"],
        // Two indexes each: a takeover finds Jobs with one index ended and one running.
        completions: 2,
        kills: 2,
        killEveryMs: 3_000,
        deadlineMs: 150_000,
        seed: 16,
        log: (line) => console.log(`chaos: ${line}`)
      })
      console.log(`chaos: ${JSON.stringify({ ...report, violations: report.violations.length })}`)
      assert.deepStrictEqual(report.violations, [])
      assert.strictEqual(report.jobs, 24)
      assert.strictEqual(report.takeoversMs.length, 2)
      assert.isTrue(report.takeoversMs.every((ms) => ms !== undefined), "every killed server's shards were taken over")
      assert.isAtLeast(report.attempts, 48)
    },
    240_000
  )
})
