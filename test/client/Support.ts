/** Helpers of the TypeScript client's tests. */
import { assert } from "@effect/vitest"
import { NodusError } from "../../src/client/index.ts"

/** The client error a promise rejected with (it must reject with one). */
export const failure = async (promise: Promise<unknown>): Promise<NodusError> => {
  try {
    await promise
  } catch (error) {
    assert.isTrue(error instanceof NodusError, String(error))
    return error as NodusError
  }
  return assert.fail("expected the call to fail")
}

/** Every item of an async iterable, in order. */
export const collect = async <A>(items: AsyncIterable<A>): Promise<Array<A>> => {
  const all: Array<A> = []
  for await (const item of items) all.push(item)
  return all
}
