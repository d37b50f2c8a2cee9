/**
 * The FunctionCall machine's moves as a table (spec: States and transitions, the FunctionCall rows; ### FunctionCall),
 * then properties over random sequences of moves: a final phase never changes again, the dispatch epoch never goes
 * down, and the status a state is shown as stands for the same state (statusOf / stateOf).
 */
import { Schema } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { CallOutcome } from "../../../src/core/SandboxBox.ts"
import {
  answer,
  type CallPolicy,
  type CallState,
  cancel,
  deadlineOf,
  dispatch,
  expire,
  functionDeleted,
  isDispatchable,
  isUnfinished,
  lose,
  policyOf,
  queued,
  retryDelayMs,
  stateOf,
  statusOf,
  tryCostMicroUsd
} from "../../../src/kinds/function/FunctionCallMachine.ts"
import { FunctionCallStatus } from "../../../src/kinds/function/FunctionCallSchema.ts"
import { FunctionSpec } from "../../../src/kinds/function/FunctionSchema.ts"
import { hour, minute, T0 } from "../../core/Fixtures.ts"

const second = 1000

const policy = (fields: Partial<CallPolicy> = {}): CallPolicy => ({
  maxRetries: 2,
  backoffCoefficient: "2.0",
  initialDelayMs: second,
  maxDelayMs: 60 * second,
  recoveryLimit: 1,
  timeoutMs: 5 * minute,
  ...fields
})

const ok: CallOutcome = { ok: true, encoding: "JSON", result: "eyJ4IjogMX0=" }
const valueError = { type: "ValueError", message: "bad input", traceback: "Traceback ..." }
const raised: CallOutcome = { ok: false, error: valueError }

/** A call a worker took at `at`: Running under epoch 1. */
const running = (at = T0): CallState => dispatch(queued(), "fn-1", at)

describe("dispatch", () => {
  it("puts a queued call on a worker: Running, the epoch one more, startTime now", () => {
    const state = running(T0)
    expect(state).toMatchObject({ phase: "Running", epoch: 1, worker: "fn-1", startTime: T0, notBefore: undefined })
    const again = dispatch({ ...state, phase: "Recovering", worker: undefined }, "fn-2", T0 + minute)
    expect(again).toMatchObject({ phase: "Running", epoch: 2, worker: "fn-2", startTime: T0 + minute })
  })

  it("waits for a retry's backoff: dispatchable from notBefore on, not a millisecond before", () => {
    const retried = answer(running(), 1, raised, policy(), T0 + second, 0n)
    expect(retried.notBefore).toBe(T0 + 2 * second)
    expect(isDispatchable(retried, T0 + 2 * second - 1)).toBe(false)
    expect(isDispatchable(retried, T0 + 2 * second)).toBe(true)
    expect(isDispatchable(queued(), T0)).toBe(true)
    expect(isDispatchable(running(), T0)).toBe(false)
  })
})

describe("answer", () => {
  it("with the return value ends the call Succeeded, the result recorded and the try paid", () => {
    const state = answer(running(), 1, ok, policy(), T0 + second, 7n)
    expect(state).toMatchObject({
      phase: "Succeeded",
      reason: undefined,
      completionTime: T0 + second,
      costMicroUsd: 7n,
      error: undefined
    })
    expect(state.result).toEqual({ encoding: "JSON", inline: "eyJ4IjogMX0=" })
  })

  it("with a raise and retries left queues it again: retries + 1, notBefore = now + the backoff (spec: retried)", () => {
    const first = answer(running(), 1, raised, policy(), T0 + second, 3n)
    expect(first).toMatchObject({
      phase: "Queued",
      retries: 1,
      worker: undefined,
      notBefore: T0 + 2 * second,
      costMicroUsd: 3n,
      error: valueError
    })
    expect(first.message).toBe("ValueError raised; retry 1 of 2 in 1s.")
    const secondTry = answer(dispatch(first, "fn-1", T0 + 2 * second), 2, raised, policy(), T0 + 3 * second, 3n)
    expect(secondTry).toMatchObject({
      phase: "Queued",
      retries: 2,
      notBefore: T0 + 3 * second + 2 * second,
      costMicroUsd: 6n
    })
  })

  it("with a raise and retries exhausted fails it RemoteError, the error recorded", () => {
    const exhausted = { ...running(), retries: 2 }
    const state = answer(exhausted, 1, raised, policy(), T0 + second, 1n)
    expect(state).toMatchObject({
      phase: "Failed",
      reason: "RemoteError",
      retries: 2,
      completionTime: T0 + second,
      costMicroUsd: 1n
    })
    expect(state.error).toEqual({ type: "ValueError", message: "bad input", traceback: "Traceback ..." })
    expect(state.message).toBe("ValueError raised on each of its 3 tries.")
    expect(answer(running(), 1, raised, policy({ maxRetries: 0 }), T0, 0n).message).toBe(
      "ValueError raised on its only try."
    )
  })

  it("for another epoch is fenced: the same state comes back", () => {
    const state = running()
    expect(answer(state, 0, ok, policy(), T0, 5n)).toBe(state)
    expect(answer(state, 2, ok, policy(), T0, 5n)).toBe(state)
    const queuedAgain = answer(state, 1, raised, policy(), T0, 0n)
    // The call was queued again: an answer for the try that raised, heard twice, changes nothing.
    expect(answer(queuedAgain, 1, ok, policy(), T0, 5n)).toBe(queuedAgain)
  })
})

describe("retryDelayMs (spec: retries backoffCoefficient, initialDelay, maxDelay)", () => {
  const delays = (fields: Partial<CallPolicy>, count: number) =>
    Array.from({ length: count }, (_, i) => retryDelayMs(policy(fields), i + 1))

  it("grows by the coefficient from initialDelay, capped at maxDelay", () => {
    expect(delays({ backoffCoefficient: "2.0" }, 8)).toEqual([1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000])
    expect(delays({ backoffCoefficient: "3" }, 6)).toEqual([1000, 3000, 9000, 27000, 60000, 60000])
    expect(delays({ backoffCoefficient: "2.0", initialDelayMs: 500, maxDelayMs: 3000 }, 5)).toEqual([
      500,
      1000,
      2000,
      3000,
      3000
    ])
  })

  it("is exact for a fractional coefficient, rounded to the millisecond", () => {
    // 1.5^4 × 1000 = 5062.5 → 5063; 1.5^5 × 1000 = 7593.75 → 7594; 1.5^6 × 1000 = 11390.625 → 11391.
    expect(delays({ backoffCoefficient: "1.5" }, 7)).toEqual([1000, 1500, 2250, 3375, 5063, 7594, 11391])
    // 1.1^n is not exact in binary floating point; in decimal it is: 1.1^3 × 7 = 9.317 → 9.
    expect(delays({ backoffCoefficient: "1.1", initialDelayMs: 7 }, 4)).toEqual([7, 8, 8, 9])
  })

  it("is initialDelay every time for coefficient 1, and never above maxDelay however many retries", () => {
    expect(delays({ backoffCoefficient: "1" }, 4)).toEqual([1000, 1000, 1000, 1000])
    expect(retryDelayMs(policy({ backoffCoefficient: "10" }), 500)).toBe(60000)
  })

  it("takes the Function's retries, defaults filled, through policyOf", () => {
    const spec = Schema.decodeUnknownSync(FunctionSpec)({
      image: "python:3.12",
      code: { module: "app", qualname: "f" },
      retries: { maxRetries: 3, backoffCoefficient: "1.5", initialDelay: "2s", maxDelay: "5s" },
      timeout: "60s"
    })
    const fromSpec = policyOf(spec, "10s")
    expect(fromSpec).toMatchObject({
      maxRetries: 3,
      backoffCoefficient: "1.5",
      initialDelayMs: 2000,
      maxDelayMs: 5000,
      timeoutMs: 10_000
    })
    expect([1, 2, 3].map((n) => retryDelayMs(fromSpec, n))).toEqual([2000, 3000, 4500])
    expect(policyOf(spec, undefined).timeoutMs).toBe(60_000)
  })
})

describe("lose", () => {
  it("within the recovery limit: Recovering, recoveries + 1, the try paid", () => {
    const state = lose(running(), 1, policy({ recoveryLimit: 2 }), T0 + second, 4n, "NodeLost")
    expect(state).toMatchObject({ phase: "Recovering", recoveries: 1, worker: undefined, costMicroUsd: 4n })
    expect(isDispatchable(state, T0 + second)).toBe(true)
    const again = lose(
      dispatch(state, "fn-2", T0 + 2 * second),
      2,
      policy({ recoveryLimit: 2 }),
      T0 + 3 * second,
      4n,
      "NodeLost"
    )
    expect(again).toMatchObject({ phase: "Recovering", recoveries: 2, epoch: 2, costMicroUsd: 8n })
  })

  it("past the recovery limit: Failed RecoveryLimitExceeded, recoveries as used", () => {
    const recovered = lose(running(), 1, policy({ recoveryLimit: 1 }), T0, 0n, "NodeLost")
    const state = lose(
      dispatch(recovered, "fn-2", T0 + second),
      2,
      policy({ recoveryLimit: 1 }),
      T0 + 2 * second,
      2n,
      "NodeLost"
    )
    expect(state).toMatchObject({
      phase: "Failed",
      reason: "RecoveryLimitExceeded",
      recoveries: 1,
      completionTime: T0 + 2 * second,
      costMicroUsd: 2n
    })
    expect(lose(running(), 1, policy({ recoveryLimit: 0 }), T0, 0n, "x")).toMatchObject({
      phase: "Failed",
      reason: "RecoveryLimitExceeded",
      recoveries: 0
    })
  })

  it("for another epoch is fenced: the same state comes back", () => {
    const state = running()
    expect(lose(state, 0, policy(), T0, 1n, "x")).toBe(state)
    expect(lose(state, 2, policy(), T0, 1n, "x")).toBe(state)
    expect(lose(queued(), 0, policy(), T0, 1n, "x")).toEqual(queued())
  })
})

describe("expire (spec: per-call deadline passes → Failed DeadlineExceeded)", () => {
  it("comes at startTime + timeout exactly, not a millisecond before", () => {
    const state = running(T0)
    expect(deadlineOf(state, policy({ timeoutMs: minute }))).toBe(T0 + minute)
    expect(expire(state, policy({ timeoutMs: minute }), T0 + minute - 1, 9n)).toBe(state)
    expect(expire(state, policy({ timeoutMs: minute }), T0 + minute, 9n)).toMatchObject({
      phase: "Failed",
      reason: "DeadlineExceeded",
      completionTime: T0 + minute,
      costMicroUsd: 9n
    })
  })

  it("counts from the latest try's start, and does nothing to a call no worker runs", () => {
    const retried = answer(running(T0), 1, raised, policy(), T0 + second, 0n)
    expect(deadlineOf(retried, policy())).toBeUndefined()
    expect(expire(retried, policy({ timeoutMs: minute }), T0 + hour, 0n)).toBe(retried)
    const secondTry = dispatch(retried, "fn-1", T0 + 10 * second)
    expect(expire(secondTry, policy({ timeoutMs: minute }), T0 + minute, 0n)).toBe(secondTry)
    expect(expire(secondTry, policy({ timeoutMs: minute }), T0 + 10 * second + minute, 0n).phase).toBe("Failed")
  })

  it("ends a cancelling call Cancelled", () => {
    const cancelling = cancel(running(T0), T0 + second)
    expect(expire(cancelling, policy({ timeoutMs: minute }), T0 + minute, 0n)).toMatchObject({
      phase: "Cancelled",
      reason: "Cancelled"
    })
  })
})

/** One state of each phase, reached by the machine's own moves. */
const phases = (): Record<CallState["phase"], CallState> => {
  const run = running(T0)
  return {
    Queued: queued(),
    Running: run,
    Recovering: lose(run, 1, policy(), T0, 0n, "x"),
    Cancelling: cancel(run, T0),
    Succeeded: answer(run, 1, ok, policy(), T0, 0n),
    Failed: answer(run, 1, raised, policy({ maxRetries: 0 }), T0, 0n),
    Cancelled: cancel(queued(), T0)
  }
}

describe("functionDeleted (spec: any unfinished → Failed FunctionDeleted)", () => {
  it("fails every unfinished phase", () => {
    for (const phase of ["Queued", "Running", "Recovering", "Cancelling"] as const) {
      expect(functionDeleted(phases()[phase], T0 + minute, 0n), phase).toMatchObject({
        phase: "Failed",
        reason: "FunctionDeleted",
        completionTime: T0 + minute
      })
    }
  })

  it("pays for the try that was running", () => {
    const before = phases()["Running"]
    expect(functionDeleted(before, T0 + minute, 7n).costMicroUsd).toBe(before.costMicroUsd + 7n)
  })

  it("leaves a final phase as it was", () => {
    for (const phase of ["Succeeded", "Failed", "Cancelled"] as const) {
      const state = phases()[phase]
      expect(functionDeleted(state, T0 + minute, 5n), phase).toBe(state)
    }
  })
})

describe("cancel", () => {
  it("ends a call no worker runs Cancelled at once", () => {
    for (const phase of ["Queued", "Recovering"] as const) {
      expect(cancel(phases()[phase], T0 + second), phase).toMatchObject({
        phase: "Cancelled",
        reason: "Cancelled",
        completionTime: T0 + second
      })
    }
  })

  it("makes a running call Cancelling; the worker's answer is then discarded, Cancelled, and the try paid", () => {
    const cancelling = cancel(running(T0), T0 + second)
    expect(cancelling).toMatchObject({ phase: "Cancelling", epoch: 1 })
    expect(isUnfinished(cancelling)).toBe(true)
    for (const outcome of [ok, raised]) {
      const state = answer(cancelling, 1, outcome, policy(), T0 + 2 * second, 5n)
      expect(state).toMatchObject({
        phase: "Cancelled",
        reason: "Cancelled",
        completionTime: T0 + 2 * second,
        costMicroUsd: 5n,
        result: undefined
      })
    }
    expect(lose(cancelling, 1, policy(), T0 + 2 * second, 0n, "x")).toMatchObject({
      phase: "Cancelled",
      reason: "Cancelled"
    })
    expect(answer(cancelling, 2, ok, policy(), T0, 0n)).toBe(cancelling)
  })

  it("leaves Cancelling and the final phases as they were", () => {
    for (const phase of ["Cancelling", "Succeeded", "Failed", "Cancelled"] as const) {
      const state = phases()[phase]
      expect(cancel(state, T0 + minute), phase).toBe(state)
    }
  })
})

describe("tryCostMicroUsd (spec: costUSD, worker time in whole seconds at the per-call rate)", () => {
  it("rounds the seconds up, then the micro-USD up", () => {
    // 1.5 s → 2 s; 2 × 750000 / 3600 = 416.67 → 417.
    expect(tryCostMicroUsd(1500, 750_000n, 1)).toBe(417n)
    expect(tryCostMicroUsd(1, 3_600_000n, 1)).toBe(1000n)
    expect(tryCostMicroUsd(1000, 3_600_000n, 1)).toBe(1000n)
    expect(tryCostMicroUsd(1001, 3_600_000n, 1)).toBe(2000n)
    expect(tryCostMicroUsd(0, 3_600_000n, 1)).toBe(0n)
    expect(tryCostMicroUsd(-5, 3_600_000n, 1)).toBe(0n)
  })

  it("shares the worker's rate among the calls it takes at once", () => {
    // 2 s × 750000 / (3600 × 4) = 104.17 → 105.
    expect(tryCostMicroUsd(1500, 750_000n, 4)).toBe(105n)
    expect(tryCostMicroUsd(3_600_000, 3_600_000n, 3)).toBe(1_200_000n)
    // A concurrency below 1 counts as 1.
    expect(tryCostMicroUsd(1000, 3_600_000n, 0)).toBe(1000n)
  })

  it("is exact at rates and durations past floating point", () => {
    const rate = 123_456_789_012_345n
    expect(tryCostMicroUsd(24 * 3_600_000, rate, 7)).toBe((86_400n * rate + 3600n * 7n - 1n) / (3600n * 7n))
  })
})

// ---------------------------------------------------------------------------------------------------------------------
// Properties

type Move =
  | { readonly _tag: "dispatch" }
  | { readonly _tag: "answer"; readonly ok: boolean; readonly epochDelta: number }
  | { readonly _tag: "lose"; readonly epochDelta: number }
  | { readonly _tag: "expire" }
  | { readonly _tag: "functionDeleted" }
  | { readonly _tag: "cancel" }

const moveArb: fc.Arbitrary<{ readonly move: Move; readonly advanceMs: number; readonly cost: bigint }> = fc.record({
  move: fc.oneof(
    fc.constant<Move>({ _tag: "dispatch" }),
    fc.record({ _tag: fc.constant("answer" as const), ok: fc.boolean(), epochDelta: fc.integer({ min: -1, max: 1 }) }),
    fc.record({ _tag: fc.constant("lose" as const), epochDelta: fc.integer({ min: -1, max: 1 }) }),
    fc.constant<Move>({ _tag: "expire" }),
    fc.constant<Move>({ _tag: "functionDeleted" }),
    fc.constant<Move>({ _tag: "cancel" })
  ),
  advanceMs: fc.integer({ min: 0, max: 10 * 60 * 1000 }),
  cost: fc.bigInt({ min: 0n, max: 10_000_000n })
})

const policyArb: fc.Arbitrary<CallPolicy> = fc.record({
  maxRetries: fc.integer({ min: 0, max: 10 }),
  backoffCoefficient: fc.constantFrom("1", "1.5", "2.0", "3", "10"),
  initialDelayMs: fc.integer({ min: 0, max: 5000 }),
  maxDelayMs: fc.integer({ min: 5000, max: 60_000 }),
  recoveryLimit: fc.integer({ min: 0, max: 5 }),
  timeoutMs: fc.integer({ min: 1000, max: 5 * 60 * 1000 })
})

/**
 * Applies a move as the dispatcher would: a worker takes only a dispatchable call; reports name an epoch near the
 * current one.
 */
const apply = (state: CallState, move: Move, callPolicy: CallPolicy, now: number, cost: bigint): CallState => {
  switch (move._tag) {
    case "dispatch":
      return isDispatchable(state, now) ? dispatch(state, `fn-${state.epoch + 1}`, now) : state
    case "answer":
      return answer(state, state.epoch + move.epochDelta, move.ok ? ok : raised, callPolicy, now, cost)
    case "lose":
      return lose(state, state.epoch + move.epochDelta, callPolicy, now, cost, "NodeLost")
    case "expire":
      return expire(state, callPolicy, now, cost)
    case "functionDeleted":
      return functionDeleted(state, now, cost)
    case "cancel":
      return cancel(state, now)
  }
}

/** Every state a random sequence of moves passes through, from a new call. */
const walk = (
  callPolicy: CallPolicy,
  moves: ReadonlyArray<{ readonly move: Move; readonly advanceMs: number; readonly cost: bigint }>
): Array<CallState> => {
  const states = [queued()]
  let now = T0
  for (const { move, advanceMs, cost } of moves) {
    now += advanceMs
    states.push(apply(states[states.length - 1]!, move, callPolicy, now, cost))
  }
  return states
}

describe("properties over random sequences of moves", () => {
  it("a final phase never changes again; the epoch and the cost never go down; retries and recoveries stay within the policy", () => {
    fc.assert(
      fc.property(policyArb, fc.array(moveArb, { maxLength: 40 }), (callPolicy, moves) => {
        const states = walk(callPolicy, moves)
        for (let i = 1; i < states.length; i++) {
          const before = states[i - 1]!
          const after = states[i]!
          if (!isUnfinished(before)) expect(after).toBe(before)
          expect(after.epoch).toBeGreaterThanOrEqual(before.epoch)
          expect(after.costMicroUsd).toBeGreaterThanOrEqual(before.costMicroUsd)
          expect(after.retries).toBeLessThanOrEqual(callPolicy.maxRetries)
          expect(after.recoveries).toBeLessThanOrEqual(callPolicy.recoveryLimit)
          if (!isUnfinished(after)) expect(after.completionTime).toBeDefined()
        }
      }),
      { numRuns: 300 }
    )
  })

  it("stateOf(statusOf(s)) keeps the phase, reason, retries, recoveries, epoch, worker, times (a retry's too), error, result and cost", () => {
    fc.assert(
      fc.property(policyArb, fc.array(moveArb, { maxLength: 30 }), (callPolicy, moves) => {
        for (const state of walk(callPolicy, moves)) {
          const shown = statusOf(state, {})
          // What is shown is a status the schema admits.
          Schema.decodeUnknownSync(FunctionCallStatus)(shown)
          const back = stateOf(shown)
          expect({
            phase: back.phase,
            reason: back.reason,
            message: back.message,
            retries: back.retries,
            recoveries: back.recoveries,
            epoch: back.epoch,
            worker: back.worker,
            startTime: back.startTime,
            completionTime: back.completionTime,
            notBefore: back.notBefore,
            error: back.error,
            result: back.result,
            costMicroUsd: back.costMicroUsd
          }).toEqual({
            phase: state.phase,
            reason: state.reason,
            message: state.message,
            retries: state.retries,
            recoveries: state.recoveries,
            epoch: state.epoch,
            worker: state.worker,
            startTime: state.startTime,
            completionTime: state.completionTime,
            notBefore: state.notBefore,
            error: state.error,
            result: state.result,
            costMicroUsd: state.costMicroUsd
          })
        }
      }),
      { numRuns: 200 }
    )
  })

  it("statusOf drops what the state no longer holds from the previous status", () => {
    const failed = answer(running(), 1, raised, policy({ maxRetries: 0 }), T0 + second, 1n)
    const shown = statusOf(failed, {})
    expect(shown).toMatchObject({
      phase: "Failed",
      reason: "RemoteError",
      worker: { attempt: "fn-1", epoch: 1 },
      costUSD: "0.000001"
    })
    // A status written before dispatch shows no worker, and a fresh call's status has no reason left over.
    const fresh = statusOf(queued(), shown)
    expect(fresh.phase).toBe("Queued")
    expect(fresh.reason).toBeUndefined()
    expect(fresh.error).toBeUndefined()
    expect(fresh.worker).toBeUndefined()
    expect(fresh.costUSD).toBe("0")
    expect(stateOf({})).toEqual(queued())
  })
})
