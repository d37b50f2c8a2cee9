/** The fake driver of the tests held to the capacity contract: the suite is about the port, not about the simulator. */
import { Effect } from "effect"
import { variant } from "../core/Fixtures.ts"
import { capacityContract } from "./CapacityContract.ts"
import { fakeAnnotation, makeFakeCapacity } from "./FakeCapacity.ts"

capacityContract(
  "fake driver",
  () =>
    Effect.map(
      makeFakeCapacity({
        hosts: 3,
        bootMs: 60_000,
        teardownMs: 10_000,
        warmStartMs: 2_000,
        start: Date.parse("2026-03-01T00:00:00Z")
      }),
      (fake) => ({
        port: fake.port,
        advance: (ms: number) => Effect.sync(() => fake.advance(ms)),
        variant: variant("a10-1x-us"),
        hosts: 3,
        bootMs: 60_000,
        program: (workMs: number, exitCode: number) => ({
          annotations: { [`${fakeAnnotation}work-ms`]: `${workMs}`, [`${fakeAnnotation}exit-code`]: `${exitCode}` }
        })
      })
    )
)
