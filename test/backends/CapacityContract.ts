/**
 * The capacity contract: what every driver of the capacity port (src/core/capacity/Capacity.ts) must do, written once
 * against the port and run for each driver — the simulator (test/backends/sim/SimPort.test.ts), the fake driver of the
 * tests (test/backends/FakeCapacity.test.ts), live hosts later. A driver supplies the port, a way to let time pass, a
 * variant with a known number of hosts, and how to ask for a program that works a while and exits with a code.
 */
import { Effect, Fiber, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import type {
  AttemptFacts,
  CapacityChange,
  CapacityPortShape,
  HostRequest,
  ProgramRequest
} from "../../src/core/capacity/Capacity.ts"
import type { Variant } from "../../src/core/capacity/Offering.ts"

export interface ContractDriver {
  readonly port: CapacityPortShape
  /** Lets `ms` of (virtual or real) time pass. */
  readonly advance: (ms: number) => Effect.Effect<void>
  /** A variant with `hosts` hosts, booting in at most `bootMs`. */
  readonly variant: Variant
  readonly hosts: number
  readonly bootMs: number
  /**
   * What a program request says, in this driver's terms, for a program that works `workMs` and exits with `exitCode`.
   */
  readonly program: (workMs: number, exitCode: number) => Partial<ProgramRequest>
}

const owner = "job-uid-1"

const hostRequest = (driver: ContractDriver, fields: Partial<HostRequest> = {}): HostRequest => ({
  owner,
  namespace: "demo",
  attempt: "train-0-1",
  index: 0,
  number: 1,
  variant: driver.variant,
  recovery: false,
  ...fields
})

const programRequest = (
  driver: ContractDriver,
  workMs: number,
  exitCode = 0,
  fields: Partial<ProgramRequest> = {}
): ProgramRequest => ({
  restoreFromSeq: undefined,
  resumeFromUnits: undefined,
  checkpointIntervalMs: undefined,
  keepWarmMs: 0,
  env: { PLATFORM_INDEX: "0", JOB_COMPLETION_INDEX: "0" },
  annotations: {},
  ...driver.program(workMs, exitCode),
  ...fields
})

/** Async: a live driver's time passes for real (its programs run), the simulator's at once. */
const run = <A>(effect: Effect.Effect<A>) => Effect.runPromise(effect)

export const capacityContract = (
  name: string,
  makeDriver: () => Effect.Effect<ContractDriver>,
  cleanUp?: () => Promise<void>
) =>
  describe(`capacity contract: ${name}`, () => {
    const fresh = () => run(makeDriver())
    if (cleanUp !== undefined) afterEach(cleanUp)
    /** Acquires a host and starts a program on it, as the runtime does for a launch. */
    const launch = async (
      driver: ContractDriver,
      workMs: number,
      exitCode = 0,
      host: Partial<HostRequest> = {},
      program: Partial<ProgramRequest> = {}
    ) => {
      const request = hostRequest(driver, host)
      const facts = await run(driver.port.acquire(request))
      await run(driver.port.start(request.owner, request.attempt, programRequest(driver, workMs, exitCode, program)))
      return facts
    }
    const facts = async (driver: ContractDriver, of = owner, attempt = "train-0-1"): Promise<AttemptFacts> => {
      const found = await run(driver.port.facts(of, attempt))
      expect(found, `facts of ${of}/${attempt}`).toBeDefined()
      return found!
    }
    const free = (driver: ContractDriver, namespace = "demo") => driver.port.market(namespace).available(driver.variant)

    it("boots a host, runs the program on it and ends with its exit code", async () => {
      const driver = await fresh()
      expect((await launch(driver, 60_000)).phase).toBe("Provisioning")
      await run(driver.advance(driver.bootMs + 1))
      const running = await facts(driver)
      expect(running.phase).toBe("Running")
      expect(running.bootedAt).toBeDefined()
      await run(driver.advance(120_000))
      expect(await facts(driver)).toMatchObject({ phase: "Ended", outcome: { type: "Succeeded" } })
      expect((await facts(driver)).releasedAt).toBeDefined()
    })

    it("reports a non-zero exit as a customer failure", async () => {
      const driver = await fresh()
      await launch(driver, 60_000, 3)
      await run(driver.advance(driver.bootMs + 120_000))
      expect((await facts(driver)).outcome).toMatchObject({ type: "Failed", exitCode: 3 })
    })

    it("takes one host per attempt, idempotently per attempt name, and starts its program once", async () => {
      const driver = await fresh()
      const first = await launch(driver, 3_600_000)
      const again = await run(driver.port.acquire(hostRequest(driver)))
      await run(driver.port.start(owner, "train-0-1", programRequest(driver, 60_000, 5)))
      expect(again.name).toBe(first.name)
      expect(again.requestedAt).toBe(first.requestedAt)
      expect(free(driver)).toBe(driver.hosts - 1)
      await run(driver.advance(driver.bootMs + 120_000))
      // The second start asked for a program that exits 5 after a minute; the first one, an hour's work, still runs.
      expect((await facts(driver)).phase).toBe("Running")
    })

    it("keeps attempts of two owners apart even when their names agree", async () => {
      const driver = await fresh()
      await launch(driver, 3_600_000)
      await launch(driver, 3_600_000, 0, { owner: "other-uid", namespace: "other" })
      expect(free(driver)).toBe(driver.hosts - 2)
      await run(driver.port.release("other-uid", "train-0-1", 0))
      // Untouched: booting, or running where a host needs no boot (a live Node).
      expect(["Provisioning", "Running"]).toContain((await facts(driver)).phase)
      expect((await facts(driver, "other-uid")).phase).toBe("Terminating")
    })

    it("ends an attempt Unavailable at once when no host is left", async () => {
      const driver = await fresh()
      for (let index = 0; index < driver.hosts; index++) {
        await launch(driver, 3_600_000, 0, {
          attempt: `train-${index}-1`,
          index
        })
      }
      expect(free(driver)).toBe(0)
      const refused = await run(driver.port.acquire(hostRequest(driver, { attempt: "train-99-1", index: 99 })))
      expect(refused).toMatchObject({ phase: "Ended", outcome: { type: "Unavailable" } })
    })

    it("releases a host: its program stops (Terminating), then the attempt ends Stopped and the host goes back", async () => {
      const driver = await fresh()
      await launch(driver, 3_600_000)
      await run(driver.advance(driver.bootMs + 1))
      await run(driver.port.release(owner, "train-0-1", 0))
      expect((await facts(driver)).phase).toBe("Terminating")
      expect((await facts(driver)).stoppingAt).toBeDefined()
      await run(driver.advance(600_000))
      expect(await facts(driver)).toMatchObject({ phase: "Ended", outcome: { type: "Stopped" } })
      expect(free(driver)).toBe(driver.hosts)
    })

    it("gives back a host whose program never started", async () => {
      const driver = await fresh()
      await run(driver.port.acquire(hostRequest(driver)))
      expect(free(driver)).toBe(driver.hosts - 1)
      await run(driver.port.release(owner, "train-0-1", 0))
      await run(driver.advance(600_000))
      expect(await facts(driver)).toMatchObject({ phase: "Ended", outcome: { type: "Stopped" } })
      expect(free(driver)).toBe(driver.hosts)
    })

    it("keeps a host warm for the same project only, and a program there starts without a boot", async () => {
      const driver = await fresh()
      await launch(driver, 60_000, 0, {}, { keepWarmMs: 600_000 })
      await run(driver.advance(driver.bootMs + 120_000))
      expect((await facts(driver)).outcome).toMatchObject({ type: "Succeeded" })
      expect(free(driver, "other")).toBe(driver.hosts - 1)
      expect(free(driver, "demo")).toBe(driver.hosts)
      const warm = await launch(driver, 60_000, 0, { attempt: "train-0-2", number: 2 })
      expect(warm.warmReuse).toBe(true)
      await run(driver.advance(driver.bootMs / 2))
      expect((await facts(driver, owner, "train-0-2")).phase).toBe("Running")
    })

    it("saves periodic and suspend checkpoints with growing sequence numbers", async () => {
      const driver = await fresh()
      await launch(driver, 10 * 3_600_000, 0, {}, { checkpointIntervalMs: 600_000 })
      await run(driver.advance(driver.bootMs + 1_900_000))
      const periodic = (await facts(driver)).checkpoint
      expect(periodic?.seq).toBeGreaterThanOrEqual(3)
      await run(driver.port.checkpoint(owner, "train-0-1", 42))
      await run(driver.advance(300_000))
      expect((await facts(driver)).suspend).toMatchObject({ episode: 42, state: "Saved" })
      expect((await facts(driver)).checkpoint!.seq).toBeGreaterThan(periodic!.seq)
    })

    it("tells subscribers whose facts changed, and when capacity was freed", async () => {
      const driver = await fresh()
      const told: Array<CapacityChange> = []
      const fiber = await run(
        Effect.forkDetach(Stream.runForEach(driver.port.changes, (change) => Effect.sync(() => told.push(change))))
      )
      await run(Effect.yieldNow)
      await launch(driver, 60_000)
      await run(driver.advance(driver.bootMs + 120_000))
      await run(Effect.yieldNow)
      expect(told).toContainEqual({ _tag: "Attempt", owner })
      expect(told).toContainEqual({ _tag: "Freed" })
      await run(Fiber.interrupt(fiber))
    })

    it("forgets an owner's attempts", async () => {
      const driver = await fresh()
      await launch(driver, 60_000)
      await run(driver.advance(driver.bootMs + 120_000))
      await run(driver.port.forget(owner))
      expect(await run(driver.port.facts(owner, "train-0-1"))).toBeUndefined()
    })
  })
