/**
 * A Job spec as the machine reads it: the Job kind's normalization (aliases folded, cross-field defaults) and its
 * schema with defaults, the same admission a create gets. The runtime decodes stored specs with it, the simulator
 * a scenario's workloads, the estimates a dry run's object. It throws on a spec the schema refuses (a stored spec was
 * admitted already; a scenario's problems are reported by the scenario's own decoding first).
 */
import { Schema } from "effect"
import type { JsonObject } from "../../core/Json.ts"
import { JobSpec, type JobSpecType, normalizeJob } from "./JobSchema.ts"

const decode = Schema.decodeUnknownSync(JobSpec)

export const admitJobSpec = (spec: JsonObject): JobSpecType => decode(normalizeJob(spec))
