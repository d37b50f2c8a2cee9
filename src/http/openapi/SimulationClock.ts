// The OpenAPI description of the sim backend's test clock (src/runtime/SimulationControl.ts, docs/simulator.md),
// added to the v1 document: GET and POST /apis/{group}/v1/simulation/clock. It is not a kind, so it carries no
// x-kubernetes-group-version-kind, and kubectl never looks at it. Pure.

import type { JsonObject } from "../../core/Json.ts"
import { formatDurationMs } from "../../core/Units.ts"
import { clockAdvanceMaxMs } from "../../runtime/SimulationControl.ts"
import { errorResponse, json } from "./Operations.ts"

/** The components the clock's operations refer to. */
export const clockSchemas = (group: string): JsonObject => ({
  SimulationClock: {
    type: "object",
    description: "The simulated clock of the sim backend.",
    required: ["apiVersion", "kind", "now", "speed"],
    properties: {
      apiVersion: { type: "string", description: `${group}/v1.` },
      kind: { type: "string", description: "SimulationClock." },
      now: { type: "string", format: "date-time", description: "The simulated time (RFC 3339, milliseconds)." },
      speed: { type: "number", description: "Simulated seconds per wall-clock second (NODUS_SIM_SPEED)." }
    }
  },
  SimulationClockRequest: {
    type: "object",
    description: "Where to move the clock: exactly one of advance and to. Simulated time never goes back.",
    properties: {
      advance: {
        type: "string",
        description: `A duration such as 15m or 2h, at most ${formatDurationMs(clockAdvanceMaxMs)}.`
      },
      to: { type: "string", format: "date-time", description: "An RFC 3339 time not before the clock's now." }
    },
    additionalProperties: false
  }
})

/** The clock's path item. */
export const clockPaths = (group: string): ReadonlyArray<readonly [string, JsonObject]> => [[
  `/apis/${group}/v1/simulation/clock`,
  {
    get: {
      operationId: "readSimulationClock",
      description:
        "Read the simulated time of the sim backend (any key). 404 NotFound when the server runs no simulator.",
      parameters: [],
      responses: { "200": { description: "OK", content: json("SimulationClock") }, default: errorResponse },
      "x-kubernetes-action": "get"
    },
    post: {
      operationId: "advanceSimulationClock",
      description:
        "Move simulated time forward (admin scope). Every event due until then runs, and every resulting write is " +
        "stored, before the answer comes: a Job that needs 10m of work and was created before a 15m advance has finished.",
      parameters: [],
      requestBody: { required: true, content: json("SimulationClockRequest") },
      responses: {
        "200": { description: "The clock after the move", content: json("SimulationClock") },
        default: errorResponse
      },
      "x-kubernetes-action": "post"
    }
  }
]]
