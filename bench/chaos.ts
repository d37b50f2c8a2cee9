/**
 * The chaos benchmark (issue 16 item 2; the short form is test/cluster/Chaos.test.ts): `--servers` (3) `nodus serve
 * --backend sim` processes on a fresh database of a PostgreSQL server, `--jobs` (200) Jobs created through all of them
 * in batches, one server killed with SIGKILL at random `--kills` times (12), each kill waited out until the other
 * servers hold every shard (the takeover, timed), then the killed one restarted and `--kill-every` seconds (4) given
 * before the next. Then every Job must reach its final phase by `--deadline` seconds (600), and the invariants of
 * test/cluster/Chaos.ts hold: each Job final exactly once, each Attempt launched once, the ledger's charges within the
 * Attempts' metered runs and equal to status.cost, no hold left open, no Event recorded twice, every final event
 * delivered to a webhook receiver as one delivery (test/cluster/ChaosWebhooks.ts), a rotation and a replay made through
 * two servers taking effect. Attempts that arrived again after their sender was killed are counted (at least once).
 *
 * Prints every kill and takeover, then the takeover times and the invariants' verdict. Exits 1 when an invariant is
 * violated or a takeover took longer than 15 s (the issue's bound), 2 when no PostgreSQL server is given.
 *
 *   npm run bench:chaos -- [--database-url postgres://postgres@127.0.0.1:5432/postgres] [--servers 3] [--jobs 200]
 *                          [--kills 12] [--kill-every 4] [--speed 60] [--seed 16] [--deadline 600]
 *                          [--dump file.json] [--log-dir dir] [--keep]   (what was read at the end; each server's
 *                          output; the database left for a post-mortem)
 */
import { runChaos } from "../test/cluster/Chaos.ts"
import { createDatabase } from "../test/support/Postgres.ts"
import { argument } from "./Arguments.ts"

/** The issue's bound on the takeover of a killed runner's shards. */
const takeoverMsMax = 15_000

const url = argument("database-url", process.env["DATABASE_URL"] ?? "")
if (url === "") {
  console.error("bench:chaos needs a PostgreSQL server: --database-url postgres://… or DATABASE_URL")
  process.exit(2)
}
const servers = Number(argument("servers", "3"))
const jobs = Number(argument("jobs", "200"))
const kills = Number(argument("kills", "12"))
const killEverySeconds = Number(argument("kill-every", "4"))
const speed = Number(argument("speed", "60"))
const seed = Number(argument("seed", "16"))
const deadlineSeconds = Number(argument("deadline", "600"))
const dump = argument("dump", "")
const logDir = argument("log-dir", "")
const keep = process.argv.includes("--keep")

const started = Date.now()
const log = (line: string) => console.log(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}`)
console.log(
  `bench:chaos: ${servers} servers, ${jobs} Jobs, ${kills} kills every ${killEverySeconds} s after the takeover, sim speed ${speed}, seed ${seed}`
)

const database = await createDatabase(url)
let exitCode = 0
try {
  const report = await runChaos({
    databaseUrl: database.url,
    servers,
    jobs,
    speed,
    // Runs of 1 to 20 simulated minutes: at speed 60, many are running at every kill.
    durations: ["1m", "2m", "5m", "10m", "20m"],
    kills,
    killEveryMs: killEverySeconds * 1_000,
    deadlineMs: deadlineSeconds * 1_000,
    seed,
    log,
    ...(dump === "" ? {} : { dumpTo: dump }),
    ...(logDir === "" ? {} : { logDir })
  })
  const measured = report.takeoversMs.filter((ms): ms is number => ms !== undefined).sort((a, b) => a - b)
  const slow = measured.filter((ms) => ms > takeoverMsMax)
  console.log("")
  console.log(`takeovers (ms): ${report.takeoversMs.map((ms) => ms ?? "none").join(", ")}`)
  if (measured.length > 0) {
    console.log(
      `takeover: min ${measured[0]} ms, median ${measured[Math.floor(measured.length / 2)]} ms, max ${
        measured.at(-1)
      } ms (bound ${takeoverMsMax} ms)`
    )
  }
  console.log(
    `jobs: ${report.jobs} (${
      Object.entries(report.phases).map(([phase, count]) => `${count} ${phase}`).join(", ")
    }), attempts: ${report.attempts}, all final after ${
      (report.elapsedMs / 1000).toFixed(1)
    } s; webhook attempts sent again after a kill: ${report.webhooksResent}`
  )
  if (report.violations.length > 0 || slow.length > 0 || measured.length < report.takeoversMs.length) {
    exitCode = 1
    console.log(`VIOLATED (${report.violations.length + slow.length}):`)
    for (const violation of report.violations) console.log(`  ${violation}`)
    for (const ms of slow) console.log(`  a takeover took ${ms} ms, over ${takeoverMsMax} ms`)
  } else {
    console.log("every invariant held")
  }
} finally {
  if (keep) console.log(`the database is kept: ${database.url}`)
  else await database.drop()
}
process.exit(exitCode)
