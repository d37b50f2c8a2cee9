/**
 * fast-check arbitraries shared by property tests.
 */
import * as fc from "fast-check"
import type { Json } from "../../src/core/Json.ts"

/** Any JSON value (finite numbers), with object member names drawn from `key`. */
export const jsonValue = (key: fc.Arbitrary<string>): fc.Arbitrary<Json> =>
  fc.letrec<{ value: Json }>((tie) => ({
    value: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      fc.oneof(
        fc.constant(null),
        fc.boolean(),
        fc.integer(),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.string({ maxLength: 6 })
      ),
      fc.array(tie("value"), { maxLength: 4 }),
      fc.dictionary(key, tie("value"), { maxKeys: 5, noNullPrototype: true })
    )
  })).value
