/**
 * The capacity contract: what every driver of the CapacityPort (src/core/capacity/Capacity.ts) must do, written once against
 * the port and run for each driver — the simulator now, live providers later. A driver supplies the port, a way to
 * let time pass, a variant with a known number of hosts, and how its programs behave (work, exit code).
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type { AttemptFacts, CapacityPort, LaunchRequest } from "../../src/core/capacity/Capacity.ts"
import type { Variant } from "../../src/core/capacity/Offering.ts"

export interface ContractDriver {
  readonly port: CapacityPort
  /** Lets `ms` of (virtual or real) time pass. */
  readonly advance: (ms: number) => Effect.Effect<void>
  /** A variant with `hosts` hosts, booting in at most `bootMs`. */
  readonly variant: Variant
  readonly hosts: number
  readonly bootMs: number
  /** The next program of `owner` works `workMs` and exits with `exitCode`. */
  readonly program: (owner: string, workMs: number, exitCode: number) => void
}

const request = (driver: ContractDriver, fields: Partial<LaunchRequest> = {}): LaunchRequest => ({
  owner: "demo/train",
  namespace: "demo",
  attempt: "train-0-1",
  index: 0,
  number: 1,
  variant: driver.variant,
  recovery: false,
  restoreFromSeq: undefined,
  resumeFromUnits: undefined,
  checkpointIntervalMs: undefined,
  keepWarmMs: 0,
  env: { PLATFORM_INDEX: "0", JOB_COMPLETION_INDEX: "0" },
  ...fields
})

const run = <A>(effect: Effect.Effect<A>) => Effect.runSync(effect)

export const capacityContract = (name: string, makeDriver: () => ContractDriver) => describe(`capacity contract: ${name}`, () => {
  const launch = (driver: ContractDriver, fields: Partial<LaunchRequest> = {}) => run(driver.port.launch(request(driver, fields)))
  const facts = (driver: ContractDriver, owner = "demo/train", attempt = "train-0-1") => run(driver.port.facts(owner, attempt))!
  const free = (driver: ContractDriver, namespace = "demo") => run(driver.port.available(driver.variant, namespace))

  it("boots, runs and ends a program with its exit code", () => {
    const driver = makeDriver()
    driver.program("demo/train", 60_000, 0)
    expect(launch(driver).phase).toBe("Provisioning")
    run(driver.advance(driver.bootMs + 1))
    const running = facts(driver)
    expect(running.phase).toBe("Running")
    expect(running.bootedAt).toBeDefined()
    run(driver.advance(120_000))
    expect(facts(driver)).toMatchObject({ phase: "Ended", outcome: { type: "Succeeded" } })
  })

  it("reports a non-zero exit as a customer failure", () => {
    const driver = makeDriver()
    driver.program("demo/train", 60_000, 3)
    launch(driver)
    run(driver.advance(driver.bootMs + 120_000))
    expect(facts(driver).outcome).toMatchObject({ type: "Failed", exitCode: 3 })
  })

  it("takes one host per attempt, idempotently per attempt name", () => {
    const driver = makeDriver()
    driver.program("demo/train", 3_600_000, 0)
    const first = launch(driver)
    const again = launch(driver)
    expect(again).toBe(first)
    expect(free(driver)).toBe(driver.hosts - 1)
  })

  it("keeps attempts of two owners apart even when their names agree", () => {
    const driver = makeDriver()
    driver.program("demo/train", 3_600_000, 0)
    driver.program("other/train", 3_600_000, 0)
    launch(driver)
    launch(driver, { owner: "other/train", namespace: "other" })
    expect(free(driver)).toBe(driver.hosts - 2)
    run(driver.port.stop("other/train", "train-0-1", 0))
    expect(facts(driver, "demo/train").phase).toBe("Provisioning")
    expect(facts(driver, "other/train").phase).toBe("Terminating")
  })

  it("ends an attempt Unavailable when no host is left", () => {
    const driver = makeDriver()
    for (let index = 0; index < driver.hosts; index++) {
      driver.program("demo/train", 3_600_000, 0)
      launch(driver, { attempt: `train-${index}-1`, index })
    }
    expect(free(driver)).toBe(0)
    const refused: AttemptFacts = launch(driver, { attempt: "train-99-1", index: 99 })
    expect(refused).toMatchObject({ phase: "Ended", outcome: { type: "Unavailable" } })
  })

  it("stops a program: Terminating, then Ended Stopped, and the host goes back", () => {
    const driver = makeDriver()
    driver.program("demo/train", 3_600_000, 0)
    launch(driver)
    run(driver.advance(driver.bootMs + 1))
    run(driver.port.stop("demo/train", "train-0-1", 0))
    expect(facts(driver).phase).toBe("Terminating")
    run(driver.advance(600_000))
    expect(facts(driver)).toMatchObject({ phase: "Ended", outcome: { type: "Stopped" } })
    expect(free(driver)).toBe(driver.hosts)
  })

  it("keeps a host warm for the same project only, and a launch there skips the boot", () => {
    const driver = makeDriver()
    driver.program("demo/train", 60_000, 0)
    launch(driver, { keepWarmMs: 600_000 })
    run(driver.advance(driver.bootMs + 120_000))
    expect(free(driver, "other")).toBe(driver.hosts - 1)
    expect(free(driver, "demo")).toBe(driver.hosts)
    driver.program("demo/train", 60_000, 0)
    const warm = launch(driver, { attempt: "train-0-2", number: 2 })
    expect(warm.warmReuse).toBe(true)
  })

  it("saves periodic and suspend checkpoints with growing sequence numbers", () => {
    const driver = makeDriver()
    driver.program("demo/train", 10 * 3_600_000, 0)
    launch(driver, { checkpointIntervalMs: 600_000 })
    run(driver.advance(driver.bootMs + 1_900_000))
    const periodic = facts(driver).checkpoint
    expect(periodic?.seq).toBeGreaterThanOrEqual(3)
    run(driver.port.checkpoint("demo/train", "train-0-1", 42))
    run(driver.advance(300_000))
    expect(facts(driver).suspend).toMatchObject({ episode: 42, state: "Saved" })
    expect(facts(driver).checkpoint!.seq).toBeGreaterThan(periodic!.seq)
  })

  it("tells listeners whose facts changed", () => {
    const driver = makeDriver()
    const told: Array<string> = []
    run(driver.port.onChange((owner) => told.push(owner)))
    driver.program("demo/train", 60_000, 0)
    launch(driver)
    run(driver.advance(driver.bootMs + 120_000))
    expect(told).toContain("demo/train")
  })
})
