// Replaying serving load on a Function under the simulator (src/server/FunctionReplay.ts; docs/functions.md,
// "Replaying serving load"): the first 200 requests of the Azure LLM inference trace's code service, through the real
// runtime (reconciler, Function machine, dispatcher, ledger) on the simulator's capacity and worker model.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { promisify } from "node:util"
import { savingsOf } from "../../src/cli/ReplayFunctions.ts"
import { formatMicroUsd, parseMicroUsd } from "../../src/core/Money.ts"
import { genAiArrivalsOf, genAiTraceFile, loadGenAiTrace, parseGenAiTrace } from "../../src/data/GenAiTrace.ts"
import { arrivalsOf, loadLlmTrace, parseLlmTrace, serviceTimeMs } from "../../src/data/LlmTrace.ts"
import {
  defaultReplayStart,
  replay,
  type ReplayedCall,
  type ReplayPolicy,
  type ReplaySummary
} from "../../src/server/FunctionReplay.ts"

const code = loadLlmTrace("code")
const arrivals = arrivalsOf(code).slice(0, 200)
const serviceMs = arrivals.reduce((sum, arrival) => sum + arrival.durationMs, 0)
const policy = (targetConcurrency: number, more: Partial<ReplayPolicy> = {}): ReplayPolicy => ({
  minWorkers: 0,
  maxWorkers: 10,
  targetConcurrency,
  scaledownWindow: "60s",
  ...more
})

/** What holds of every replay, whatever its policy. */
const checkInvariants = (summary: ReplaySummary) => {
  assert.strictEqual(summary.calls, 200)
  assert.strictEqual(summary.succeeded, 200)
  assert.strictEqual(summary.failed, 0)
  assert.deepStrictEqual(summary.other, {})
  assert.strictEqual(summary.serviceMs, serviceMs)
  // Each call ran exactly its service time on its worker, from the instant it was dispatched.
  assert.strictEqual(summary.runMismatches, 0)
  assert.isAtLeast(summary.queueWaitMs.p50, 0)
  assert.isAtMost(summary.queueWaitMs.p50, summary.queueWaitMs.p90)
  assert.isAtMost(summary.queueWaitMs.p90, summary.queueWaitMs.p99)
  assert.isAtMost(summary.queueWaitMs.p99, summary.queueWaitMs.max)
  // A call's latency is its wait and its run: never below the shortest service time.
  assert.isAtLeast(summary.latencyMs.p50, Math.min(...arrivals.map((arrival) => arrival.durationMs)))
  assert.isAtMost(summary.latencyMs.p99, summary.latencyMs.max)
  // A worker runs at most targetConcurrency calls at once, and is held while it runs them.
  assert.isAtLeast(summary.workers.workerSeconds, Math.floor(serviceMs / summary.policy.targetConcurrency / 1000))
  assert.isAtLeast(summary.workers.launched, 1)
  assert.isAtLeast(summary.workers.launched, summary.workers.peak)
  // The Function's status.cost is the ledger's charges to it, and per 1,000 calls is that × 1000 / calls, rounded down.
  assert.match(summary.costUSD, /^\d+(\.\d{1,6})?$/u)
  assert.notStrictEqual(summary.costUSD, "0")
  assert.strictEqual(summary.costUSD, summary.ledgerUSD)
  assert.strictEqual(summary.costPer1000CallsUSD, formatMicroUsd((parseMicroUsd(summary.costUSD) * 1000n) / 200n))
}

describe("the Azure LLM inference trace", () => {
  it("is the upstream code file: 8,819 requests over 57 minutes, in time order, from offset 0", () => {
    assert.strictEqual(code.length, 8_819)
    assert.deepStrictEqual(code[0], { offsetMs: 0, contextTokens: 4808, generatedTokens: 10 })
    // 18:17:03.979(9600) → 19:14:19.928(0160): 57 min 15.949 s, each time cut to the millisecond
    assert.deepStrictEqual(code.at(-1), { offsetMs: 3_435_949, contextTokens: 549, generatedTokens: 173 })
    for (let index = 1; index < code.length; index++) assert.isAtLeast(code[index]!.offsetMs, code[index - 1]!.offsetMs)
    assert.strictEqual(loadLlmTrace("conv").length, 19_366)
  })

  it("service time = context / prefill + generated / decode, whole milliseconds rounded up, at least 1", () => {
    assert.strictEqual(serviceTimeMs({ offsetMs: 0, contextTokens: 1469, generatedTokens: 13 }), 277)
    assert.strictEqual(
      serviceTimeMs({ offsetMs: 0, contextTokens: 1000, generatedTokens: 100 }, {
        prefillTokensPerSecond: 1000,
        decodeTokensPerSecond: 50
      }),
      3000
    )
    assert.strictEqual(serviceTimeMs({ offsetMs: 0, contextTokens: 0, generatedTokens: 0 }), 1)
    assert.strictEqual(arrivalsOf(code, { minutes: 1 }).every((arrival) => arrival.at < 60_000), true)
    assert.strictEqual(
      arrivalsOf(code, { minutes: 1 }).length,
      code.filter((request) => request.offsetMs < 60_000).length
    )
  })

  it("a malformed row is an error naming its line", () => {
    assert.throws(
      () =>
        parseLlmTrace(
          "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n2023-11-16 18:17:04,x,8"
        ),
      /line 3/u
    )
    assert.throws(() => parseLlmTrace("a,b,c\n"), /not an Azure LLM inference trace/u)
  })
})

describe("replaying FunctionCall arrivals on a Function under the simulator", () => {
  it.effect(
    "every call ends Succeeded after its service time, waits are non-negative, and the cost is the ledger's",
    () =>
      Effect.gen(function*() {
        checkInvariants(yield* replay(arrivals, { policy: policy(1) }))
      }),
    { timeout: 120_000 }
  )

  it.effect("the same arrivals, policy and seed give the same summary", () =>
    Effect.gen(function*() {
      const first = yield* replay(arrivals, { policy: policy(4) })
      const second = yield* replay(arrivals, { policy: policy(4) })
      checkInvariants(first)
      assert.deepStrictEqual(second, first)
    }), { timeout: 120_000 })

  it.effect(
    "a higher targetConcurrency holds its bound too: worker-seconds ≥ service time / targetConcurrency",
    () =>
      Effect.gen(function*() {
        const summary = yield* replay(arrivals, { policy: policy(16) })
        checkInvariants(summary)
        assert.strictEqual(summary.policy.targetConcurrency, 16)
      }),
    { timeout: 120_000 }
  )

  it.effect(
    "with warm workers enough for every call, no call waits: each is dispatched at its arrival instant",
    () =>
      Effect.gen(function*() {
        // Ten warm workers of 8 slots and 15 minutes to boot them before the first arrival: the 200 calls never fill 80
        // slots.
        const summary = yield* replay(arrivals, { policy: policy(8, { minWorkers: 10 }), leadMs: 15 * 60_000 })
        checkInvariants(summary)
        assert.deepStrictEqual(summary.queueWaitMs, { p50: 0, p90: 0, p99: 0, max: 0 })
        assert.strictEqual(summary.latencyMs.max, Math.max(...arrivals.map((arrival) => arrival.durationMs)))
        assert.strictEqual(summary.workers.peak, 10)
      }),
    { timeout: 120_000 }
  )
})

describe("a replay longer than a FunctionCall's 7-day retention", () => {
  it.effect("counts the calls that ended and were deleted before the replay's end", () =>
    Effect.gen(function*() {
      // The first call ends 8 days before the last arrives: the runtime has deleted it by then (spec: FunctionCall
      // retention).
      const summary = yield* replay(
        [{ at: 0, durationMs: 1000 }, { at: 8 * 86_400_000, durationMs: 2000, raises: 1 }],
        { policy: policy(1) }
      )
      assert.deepStrictEqual([
        summary.calls,
        summary.succeeded,
        summary.failed,
        summary.serviceMs,
        summary.runMismatches
      ], [2, 1, 1, 3000, 0])
    }), { timeout: 120_000 })
})

describe("nodus replay-functions", () => {
  it("savings against the first policy, in percent to a tenth, from the costs' micro-dollars", () => {
    assert.strictEqual(savingsOf("4.7725", "1.826"), "61.7%")
    assert.strictEqual(savingsOf("2", "3"), "-50.0%")
    assert.strictEqual(savingsOf("0", "3"), "-")
  })

  it("compares policies over the same arrivals: one row each, JSON on request", async () => {
    const node = join(import.meta.dirname, "../../node_modules/.bin/node")
    const nodus = join(import.meta.dirname, "../../bin/nodus.js")
    const { stdout } = await promisify(execFile)(node, [
      nodus,
      "replay-functions",
      "--minutes",
      "1",
      "--concurrency",
      "1,4",
      "--json"
    ])
    const summaries = JSON.parse(stdout) as ReadonlyArray<ReplaySummary>
    const calls = code.filter((request) => request.offsetMs < 60_000).length
    assert.deepStrictEqual(
      summaries.map((summary) => [summary.policy.targetConcurrency, summary.calls, summary.succeeded]),
      [[1, calls, calls], [4, calls, calls]]
    )
    const failure = await promisify(execFile)(node, [nodus, "replay-functions", "--concurrency", "0"]).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error
    )
    assert.strictEqual(failure?.code, 2)
    assert.match(failure?.stderr ?? "", /--concurrency takes whole numbers from 1/u)
  }, 120_000)

  it(
    "--trace genai: the GenAI trace's first 3 days, its FAILED requests counted failed; no token model for it",
    async () => {
      const node = join(import.meta.dirname, "../../node_modules/.bin/node")
      const nodus = join(import.meta.dirname, "../../bin/nodus.js")
      const { stdout, stderr } = await promisify(execFile)(node, [
        nodus,
        "replay-functions",
        "--trace",
        "genai",
        "--minutes",
        "4320",
        "--concurrency",
        "1,4",
        "--json"
      ])
      const rows = genAiRows(26_823).filter((row) => row.at - Date.UTC(2024, 10, 15, 16, 57, 50) < 4320 * 60_000)
      const failed = rows.filter((row) => row.status === "FAILED").length
      const summaries = JSON.parse(stdout) as ReadonlyArray<ReplaySummary>
      assert.deepStrictEqual(
        summaries.map((
          summary
        ) => [
          summary.policy.targetConcurrency,
          summary.calls,
          summary.succeeded,
          summary.failed,
          summary.runMismatches
        ]),
        [[1, rows.length, rows.length - failed, failed, 0], [4, rows.length, rows.length - failed, failed, 0]]
      )
      assert.match(
        stderr,
        new RegExp(
          `replaying ${rows.length} calls \\(the first 4320 minutes of the Alibaba GenAI trace; ${failed} recorded FAILED`,
          "u"
        )
      )
      const failure = await promisify(execFile)(node, [nodus, "replay-functions", "--trace", "genai", "--decode", "50"])
        .then(() => undefined, (error: { code: number; stderr: string }) => error)
      assert.strictEqual(failure?.code, 2)
      assert.match(failure?.stderr ?? "", /genai's are recorded/u)
    },
    120_000
  )
})

// The Alibaba GenAI serving trace v2026 (src/data/GenAiTrace.ts): recorded service times and outcomes. Its first 300
// rows (2024-11-15 16:57:50 .. 2024-11-18) are all SUCCEED or FAILED, five of them FAILED (the first at row 201).
const genAiHeader =
  "gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,negative_prompt_length,num_images_per_prompt,num_inference_steps,checkpoint_model_version_id,num_lora"

/** The file's first `count` rows read here, apart from the loader: [epoch ms as UTC, status, exec seconds]. */
const genAiRows = (count: number) =>
  readFileSync(genAiTraceFile, "utf8").split("\n").slice(1, count + 1).map((line) => {
    const [created, , status, exec] = line.split(",")
    return { at: Date.parse(`${created!.replace(" ", "T")}Z`), status: status!, execMs: Number(exec) * 1000 }
  })

describe("the Alibaba GenAI serving trace", () => {
  it("is the upstream request file: 26,823 rows in time order; FAILED raise once, PENDING and PROCESSING are skipped", () => {
    const requests = loadGenAiTrace()
    assert.strictEqual(requests.length, 26_823)
    assert.deepStrictEqual(requests[0], { offsetMs: 0, status: "SUCCEED", execMs: 32_000, type: "TXT_2_IMG" })
    // 2024-11-15 16:57:50 → 2024-12-08 17:33:57
    assert.strictEqual(
      requests.at(-1)!.offsetMs,
      Date.UTC(2024, 11, 8, 17, 33, 57) - Date.UTC(2024, 10, 15, 16, 57, 50)
    )
    const { arrivals, skipped } = genAiArrivalsOf(requests)
    assert.deepStrictEqual(skipped, { PENDING: 30, PROCESSING: 3 })
    assert.strictEqual(arrivals.length, 26_823 - 33)
    assert.strictEqual(arrivals.filter((arrival) => arrival.raises === 1).length, 398)
    assert.strictEqual(arrivals.filter((arrival) => arrival.raises !== undefined && arrival.raises !== 1).length, 0)
    assert.isTrue(arrivals.every((arrival) => arrival.durationMs >= 1))
    assert.strictEqual(
      genAiArrivalsOf(requests, { minutes: 360 }).arrivals.length,
      requests.filter((request) => request.offsetMs < 360 * 60_000).length
    )
  })

  it("a malformed row is an error naming its line", () => {
    const good = "2024-11-15 16:57:50,TXT_2_IMG,SUCCEED,32.0,G0000,63.0,26.0,1.0,30.0,M0000,0"
    assert.strictEqual(parseGenAiTrace(`${genAiHeader}\n${good}\n`).length, 1)
    assert.throws(
      () => parseGenAiTrace(`${genAiHeader}\n${good}\n${good.replace("SUCCEED", "LOST")}`),
      /line 3: predict_status/u
    )
    assert.throws(
      () => parseGenAiTrace(`${genAiHeader}\n${good}\n${good.replace("32.0", "x")}`),
      /line 3: exec_time_seconds/u
    )
    assert.throws(() => parseGenAiTrace(`${genAiHeader}\n${good}\n2024-11-15 16:57:51,TXT_2_IMG`), /line 3: 2 fields/u)
    assert.throws(
      () => parseGenAiTrace(`${genAiHeader}\n${good}\n${good.replace("16:57:50", "16:57:49")}`),
      /line 3: out of time order/u
    )
    assert.throws(
      () => parseGenAiTrace(`${genAiHeader}\n${good.replace("2024-11-15", "15/11/2024")}`),
      /line 2: gmt_create/u
    )
    assert.throws(
      () => parseGenAiTrace("TIMESTAMP,ContextTokens,GeneratedTokens\n"),
      /not the Alibaba GenAI request trace/u
    )
  })

  it.effect(
    "replayed: arrivals and service times as recorded, FAILED requests end Failed RemoteError, the rest Succeeded after exactly their time",
    () =>
      Effect.gen(function*() {
        const rows = genAiRows(300)
        const arrivals = genAiArrivalsOf(loadGenAiTrace()).arrivals.slice(0, 300)
        // The loader's arrivals are the file's, recomputed here: none of these rows is PENDING or PROCESSING.
        assert.deepStrictEqual(
          arrivals.map((arrival) => [arrival.at, arrival.durationMs, arrival.raises ?? 0]),
          rows.map((row) => [row.at - rows[0]!.at, Math.max(1, row.execMs), row.status === "FAILED" ? 1 : 0])
        )
        const failed = rows.filter((row) => row.status === "FAILED").length
        assert.strictEqual(failed, 5)
        let ends: ReadonlyArray<ReplayedCall> = []
        const options = {
          policy: policy(1),
          onCalls: (calls: ReadonlyArray<ReplayedCall>) => {
            ends = calls
          }
        }
        const summary = yield* replay(arrivals, options)
        assert.deepStrictEqual(
          [summary.calls, summary.succeeded, summary.failed, summary.other, summary.runMismatches],
          [300, 300 - failed, failed, {}, 0]
        )
        assert.strictEqual(
          summary.serviceMs,
          rows.reduce((sum, row) => sum + Math.max(1, row.execMs), 0)
        )
        assert.strictEqual(summary.costUSD, summary.ledgerUSD)
        assert.strictEqual(ends.length, 300)
        for (const [index, end] of ends.entries()) {
          const row = rows[index]!
          assert.strictEqual(end.index, index)
          assert.deepStrictEqual(
            [end.phase, end.reason],
            row.status === "FAILED" ? ["Failed", "RemoteError"] : ["Succeeded", undefined],
            `call ${index}`
          )
          // Dispatched no earlier than its arrival, and it ran exactly its recorded time (a FAILED one raised at its
          // end).
          assert.isAtLeast(end.startTime!, defaultReplayStart + row.at - rows[0]!.at, `call ${index}`)
          assert.strictEqual(end.completionTime! - end.startTime!, Math.max(1, row.execMs), `call ${index}`)
        }
        // Same-second arrivals keep the file's order: of two calls of one second, the earlier row is dispatched first.
        const sameSecond = ends.filter((end) => end.index > 0 && rows[end.index]!.at === rows[end.index - 1]!.at)
        assert.isNotEmpty(sameSecond)
        for (const end of sameSecond) {
          assert.isAtMost(ends[end.index - 1]!.startTime!, end.startTime!, `call ${end.index}`)
        }
        // The same arrivals, policy and seed: the same summary.
        assert.deepStrictEqual(yield* replay(arrivals, { policy: policy(1) }), summary)
      }),
    { timeout: 120_000 }
  )
})
