// The outcome of parsing user input (selectors, quantities, …). Bad input is an
// ordinary result rather than a thrown exception, so callers must decide how to
// report it (usually as a 400 BadRequest carrying the message verbatim).

export type ParseResult<A> =
  | { readonly _tag: "Ok"; readonly value: A }
  | { readonly _tag: "Err"; readonly message: string }

/** Wraps a successfully parsed value. */
export const ok = <A>(value: A): ParseResult<A> => ({ _tag: "Ok", value })

/**
 * Reports input that could not be parsed. The result has type `ParseResult<never>`,
 * which is assignable to every `ParseResult<A>`, so it can be returned from any parser.
 */
export const err = (message: string): ParseResult<never> => ({ _tag: "Err", message })
