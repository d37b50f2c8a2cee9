/**
 * Function workers under the simulator (docs/simulator.md, "Functions"; docs/functions.md): the port's `Call` box
 * requests to a worker (WorkloadProgram.worker) answered by a model on the engine's clock, so Functions can be driven,
 * replayed and priced in virtual time.
 *
 * A call runs for its simulated duration — the call's own `sim.nodus.dev/call-duration` annotation, else the worker
 * owner's (the Function's), default 0s — and is answered then (`Result`): it raises `sim.SimulatedError` on its first
 * N tries (`sim.nodus.dev/call-raises`, the call's over the Function's, default 0; tries counted per FunctionCall for
 * the owner's life), else it returns the first positional argument of a JSON input, or a Pickle input's bytes back. A
 * worker runs `concurrency` calls at once and queues the rest in arrival order, as the live worker's threads do. A
 * worker that ends (stopped, preempted, its node lost, its owner forgotten) answers every call it still holds with
 * `Refused Unavailable` at that instant: the call did not finish there, and the runtime dispatches it again.
 *
 * The reply resumes the caller's fiber first, and then the owner's capacity change is told (an `Attempt` change), so
 * the sim backend (runtime/VirtualTime.ts) waits for the runtime to take the change in — and with it the reply, which
 * its fiber has recorded by then — before the instant's due keys run. Nothing here draws a random number: the same
 * calls at the same virtual times give the same replies at the same virtual times.
 */
import type { AttemptFacts } from "../../core/capacity/Capacity.ts"
import type { BoxReply, BoxRequest, CallOutcome } from "../../core/SandboxBox.ts"
import { durationMs } from "../../core/StatusText.ts"
import type { SimCapacity } from "./SimCapacity.ts"
import { simAnnotationPrefix } from "./Workloads.ts"

/** The error type the model raises, as a worker names a raised exception's type (docs/functions.md, "Errors"). */
export const simulatedErrorType = "sim.SimulatedError"

export type CallRequest = Extract<BoxRequest, { _tag: "Call" }>

/** What a worker needs of the simulated capacity it runs on (SimCapacity, through SimPort). */
export interface WorkerHost {
  readonly now: number
  /** The run's facts: whether its worker takes calls (Running), is starting, or is gone. */
  readonly facts: (owner: string, attempt: string) => AttemptFacts | undefined
  /**
   * A call was made of the worker now; `busy`, when given, is whether a call runs. Answers whether it told a change.
   */
  readonly noteActivity: (owner: string, attempt: string, busy?: boolean) => boolean
  /** Runs `then` at `at` if the attempt's program still runs then. */
  readonly atWhileRunning: (owner: string, attempt: string, at: number, then: () => void) => void
  /** Tells the owner's capacity change (the port publishes an `Attempt` change). */
  readonly changed: (owner: string) => void
}

/**
 * The workers' host over the simulated capacity: its clock, facts and activity, and its owners' changes as told now.
 */
export const workerHostOf = (capacity: SimCapacity): WorkerHost => ({
  get now() {
    return capacity.now
  },
  facts: (owner, attempt) => capacity.facts(owner, attempt),
  noteActivity: (owner, attempt, busy) => capacity.noteActivity(owner, attempt, busy),
  atWhileRunning: (owner, attempt, at, then) => capacity.atWhileRunning(owner, attempt, at, then),
  changed: (owner) => capacity.onChange(owner)
})

interface Call {
  readonly request: CallRequest
  readonly resume: (reply: BoxReply) => void
  done: boolean
}

interface Worker {
  readonly owner: string
  readonly attempt: string
  readonly annotations: Readonly<Record<string, string>>
  readonly concurrency: number
  /** Calls running now, by their id. */
  readonly running: Map<string, Call>
  /** Calls taken while `concurrency` ran, in arrival order. */
  readonly waiting: Array<Call>
}

/** The settings of one call: the call's own annotation over its worker owner's (the Function's). */
const setting = (
  call: CallRequest,
  owner: Readonly<Record<string, string>>,
  name: string
): ReadonlyArray<string | undefined> => [
  call.annotations?.[`${simAnnotationPrefix}${name}`],
  owner[`${simAnnotationPrefix}${name}`]
]

/** A call's duration; a malformed value falls to the next (the owner's, then 0s). */
const callDurationMs = (call: CallRequest, owner: Readonly<Record<string, string>>): number => {
  const [own, owners] = setting(call, owner, "call-duration")
  return durationMs(own, durationMs(owners, 0))
}

const count = (
  text: string | undefined
): number | undefined => (text !== undefined && /^[0-9]{1,6}$/u.test(text) ? Number(text) : undefined)

/** How many tries of a FunctionCall raise before one returns. */
const callRaises = (call: CallRequest, owner: Readonly<Record<string, string>>): number => {
  const [own, owners] = setting(call, owner, "call-raises")
  return count(own) ?? count(owners) ?? 0
}

/** The FunctionCall a call id names: `<uid>.<dispatch epoch>` (core/SandboxBox.ts, `Call`). */
export const functionCallOf = (call: string): string => {
  const dot = call.lastIndexOf(".")
  return dot < 0 ? call : call.slice(0, dot)
}

/**
 * What the model's function returns: a JSON input's first positional argument (null without one), or Pickle's bytes.
 */
const returned = (request: CallRequest): CallOutcome => {
  if (request.encoding === "Pickle") return { ok: true, encoding: "Pickle", result: request.input }
  let payload: unknown
  try {
    payload = JSON.parse(Buffer.from(request.input, "base64").toString("utf8"))
  } catch {
    payload = undefined
  }
  const args = typeof payload === "object" && payload !== null && !Array.isArray(payload)
    ? (payload as { readonly args?: unknown }).args ?? []
    : undefined
  // The live worker raises when it cannot decode the payload (docs/functions.md, "Payloads"); so does the model.
  if (!Array.isArray(args)) {
    return {
      ok: false,
      error: {
        type: "ValueError",
        message: "the input is not a JSON payload {\"args\": [...], \"kwargs\": {...}}",
        traceback: ""
      }
    }
  }
  return { ok: true, encoding: "JSON", result: Buffer.from(JSON.stringify(args[0] ?? null), "utf8").toString("base64") }
}

const lost: BoxReply = { _tag: "Refused", code: "Unavailable", message: "the worker was lost" }

export class SimWorkers {
  private readonly host: WorkerHost
  /** Workers by owner, then attempt: a change of one owner looks at its own workers only. */
  private readonly workers = new Map<string, Map<string, Worker>>()
  /** Tries that raised, per owner and FunctionCall uid, for the owner's life (`sim.nodus.dev/call-raises`). */
  private readonly raised = new Map<string, Map<string, number>>()

  constructor(host: WorkerHost) {
    this.host = host
  }

  /**
   * A worker starts for the attempt (it takes calls once the attempt runs); a repeated start keeps the one there is.
   */
  open(owner: string, attempt: string, annotations: Readonly<Record<string, string>>, concurrency: number) {
    let owned = this.workers.get(owner)
    if (owned === undefined) this.workers.set(owner, owned = new Map())
    if (owned.has(attempt)) return
    owned.set(attempt, {
      owner,
      attempt,
      annotations,
      concurrency: Math.max(1, Math.floor(concurrency)),
      running: new Map(),
      waiting: []
    })
  }

  /** Whether the attempt runs a worker (its calls are this model's; a Sandbox's box is SimBoxes'). */
  has(owner: string, attempt: string): boolean {
    return this.workers.get(owner)?.has(attempt) === true
  }

  /** Calls running on the worker now (for tests and summaries). */
  running(owner: string, attempt: string): number {
    return this.workers.get(owner)?.get(attempt)?.running.size ?? 0
  }

  /**
   * A call to the worker (the port's `box`): refused at once while the attempt is not Running; otherwise `resume` is
   * called with its reply when it ends in virtual time, or when the worker is lost under it.
   */
  call(owner: string, attempt: string, request: CallRequest, resume: (reply: BoxReply) => void): void {
    const phase = this.host.facts(owner, attempt)?.phase
    if (phase === "Provisioning") {
      return resume({ _tag: "Refused", code: "SandboxStarting", message: "the worker is starting" })
    }
    const worker = this.workers.get(owner)?.get(attempt)
    if (phase !== "Running" || worker === undefined) {
      return resume({ _tag: "Refused", code: "SandboxNotRunning", message: "the worker is not running" })
    }
    if (worker.running.has(request.call) || worker.waiting.some((call) => call.request.call === request.call)) {
      return resume({ _tag: "Refused", code: "Conflict", message: `the worker holds a call ${request.call} already` })
    }
    this.host.noteActivity(owner, attempt)
    worker.waiting.push({ request, resume, done: false })
    this.pump(worker)
  }

  /** Starts waiting calls while fewer than `concurrency` run; the worker is busy while any runs. */
  private pump(worker: Worker) {
    const wasBusy = worker.running.size > 0
    while (worker.running.size < worker.concurrency && worker.waiting.length > 0) {
      const call = worker.waiting.shift()!
      worker.running.set(call.request.call, call)
      const at = this.host.now + callDurationMs(call.request, worker.annotations)
      this.host.atWhileRunning(worker.owner, worker.attempt, at, () => this.end(worker, call))
    }
    if (!wasBusy && worker.running.size > 0) this.host.noteActivity(worker.owner, worker.attempt, true)
  }

  /** A call ends now: its reply first, then the owner's change (module doc), after the next waiting call started. */
  private end(worker: Worker, call: Call) {
    if (call.done) return
    call.done = true
    worker.running.delete(call.request.call)
    call.resume({ _tag: "Result", outcome: this.outcome(worker.owner, worker.annotations, call.request) })
    this.pump(worker)
    if (!this.host.noteActivity(worker.owner, worker.attempt, worker.running.size > 0)) this.host.changed(worker.owner)
  }

  private outcome(owner: string, annotations: Readonly<Record<string, string>>, request: CallRequest): CallOutcome {
    const raises = callRaises(request, annotations)
    if (raises > 0) {
      const uid = functionCallOf(request.call)
      let tries = this.raised.get(owner)
      if (tries === undefined) this.raised.set(owner, tries = new Map())
      const raised = tries.get(uid) ?? 0
      if (raised < raises) {
        tries.set(uid, raised + 1)
        return {
          ok: false,
          error: { type: simulatedErrorType, message: "raised by the simulator's model", traceback: "" }
        }
      }
    }
    return returned(request)
  }

  /** Every call the worker holds answers that it was lost, now. */
  private lose(worker: Worker) {
    const calls = [...worker.running.values(), ...worker.waiting]
    worker.running.clear()
    worker.waiting.length = 0
    for (const call of calls) {
      call.done = true
      call.resume(lost)
    }
    if (calls.length > 0) this.host.noteActivity(worker.owner, worker.attempt, false)
  }

  /**
   * The owner's facts changed (or a worker of it was released): a worker whose program no longer runs loses its calls
   * now, and one whose run ended is dropped (a later call to it is refused as not running).
   */
  settle(owner: string) {
    const owned = this.workers.get(owner)
    if (owned === undefined) return
    for (const [attempt, worker] of owned) {
      const phase = this.host.facts(owner, attempt)?.phase
      if (phase === "Running" || phase === "Provisioning") continue
      this.lose(worker)
      if (phase !== "Terminating") owned.delete(attempt)
    }
    if (owned.size === 0) this.workers.delete(owner)
  }

  /** Forgets an owner's workers (their calls are lost) and its tries. */
  forget(owner: string) {
    const owned = this.workers.get(owner)
    this.workers.delete(owner)
    for (const worker of owned?.values() ?? []) this.lose(worker)
    this.raised.delete(owner)
  }
}
