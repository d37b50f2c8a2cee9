/**
 * The Function's registration with the runtime (spec: Function): the machine of kinds/function, its spec as
 * admitted by the Function schema (defaults filled), and its estimate. Its calls are dispatched by
 * runtime/FunctionDispatch.ts, the reconciler's `Serving` for Functions.
 */
import { Effect, Schema } from "effect"
import { isObject } from "../../core/Json.ts"
import type { KindEntry, RuntimeKind } from "../Kind.ts"
import { estimateFunction } from "./FunctionEstimate.ts"
import { functionMachine } from "./FunctionMachine.ts"
import { functionServed, FunctionSpec, type FunctionSpecType, type FunctionStatusType } from "./FunctionSchema.ts"

const decode = Schema.decodeUnknownSync(FunctionSpec)

export const functionKind: RuntimeKind<FunctionSpecType, FunctionStatusType> = {
  kind: "Function",
  machine: functionMachine,
  specOf: (object) => {
    try {
      return decode(isObject(object.spec) ? object.spec : {})
    } catch {
      return undefined
    }
  },
  // Pure, nothing sampled (kinds/function/FunctionEstimate.ts).
  estimator: { estimate: (spec, context) => Effect.succeed(estimateFunction({ ...context, spec })) }
}

/** The kind's entry in the registry (src/kinds/Kinds.ts): how it is served, and its machine. */
export const functionEntry: KindEntry = { ...functionServed, runtime: functionKind }
