// Kubernetes label selectors (`-l` / `labelSelector=`): a pure parser, matcher and
// printer that reproduce apimachinery's `labels.Parse` token by token, including its
// error messages, because kubectl users see those messages verbatim and scripts rely
// on the exact grammar (`!=` and `notin` matching objects without the key, `in ()`
// meaning "in the empty value", integer-only `>`/`<`).

import { checkLabelValue, checkQualifiedName } from "./Names.ts"
import { err, ok, type ParseResult } from "./ParseResult.ts"

export type Operator =
  | "Equals"
  | "NotEquals"
  | "In"
  | "NotIn"
  | "Exists"
  | "DoesNotExist"
  | "GreaterThan"
  | "LessThan"

export interface Requirement {
  readonly key: string
  readonly operator: Operator
  readonly values: ReadonlyArray<string>
}

export interface LabelSelector {
  readonly requirements: ReadonlyArray<Requirement>
}

/** The selector with no requirements; it matches every object, labelled or not. */
export const everything: LabelSelector = { requirements: [] }

/** Problems with a label key (apimachinery `IsLabelKey`); empty when valid. */
export const validateLabelKey = checkQualifiedName

/** Problems with a label value (apimachinery `IsLabelValue`); empty when valid. */
export const validateLabelValue = checkLabelValue

const namedEscapes: ReadonlyMap<string, string> = new Map([
  ["\x07", "\\a"],
  ["\b", "\\b"],
  ["\f", "\\f"],
  ["\n", "\\n"],
  ["\r", "\\r"],
  ["\t", "\\t"],
  ["\v", "\\v"],
  ["\"", "\\\""],
  ["\\", "\\\\"]
])
// Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space.
const printablePattern = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u

// Go's `%q`, used by field.Invalid to show the offending value.
const quoteGo = (text: string): string => {
  let quoted = "\""
  for (const character of text) {
    const codePoint = character.codePointAt(0) ?? 0
    const named = namedEscapes.get(character)
    if (named !== undefined) quoted += named
    else if (printablePattern.test(character)) quoted += character
    else if (codePoint < 0x80) quoted += `\\x${codePoint.toString(16).padStart(2, "0")}`
    else if (codePoint < 0x10000) quoted += `\\u${codePoint.toString(16).padStart(4, "0")}`
    else quoted += `\\U${codePoint.toString(16).padStart(8, "0")}`
  }
  return `${quoted}"`
}

// field.Invalid(path, value, detail).Error(); the parser passes a nil path, which Go prints as "<nil>".
const invalidValue = (path: string, value: string, detail: string): string =>
  `${path}: Invalid value: ${quoteGo(value)}: ${detail}`

const int64Minimum = -(2n ** 63n)
const int64Maximum = 2n ** 63n - 1n

// strconv.ParseInt(text, 10, 64): optional sign, decimal digits, within int64.
const parseInt64 = (text: string): bigint | undefined => {
  if (!/^[+-]?[0-9]+$/.test(text)) return undefined
  const parsed = BigInt(text)
  return parsed < int64Minimum || parsed > int64Maximum ? undefined : parsed
}

// ---------------------------------------------------------------------------
// Lexer (apimachinery `Lexer`)
// ---------------------------------------------------------------------------

type TokenKind =
  | "EndOfString"
  | "ClosedPar"
  | "Comma"
  | "DoesNotExist"
  | "DoubleEquals"
  | "Equals"
  | "GreaterThan"
  | "Identifier"
  | "In"
  | "LessThan"
  | "NotEquals"
  | "NotIn"
  | "OpenPar"

interface Token {
  readonly kind: TokenKind
  readonly literal: string
}

const symbolTokens: ReadonlyMap<string, TokenKind> = new Map<string, TokenKind>([
  [")", "ClosedPar"],
  [",", "Comma"],
  ["!", "DoesNotExist"],
  ["==", "DoubleEquals"],
  ["=", "Equals"],
  [">", "GreaterThan"],
  ["<", "LessThan"],
  ["!=", "NotEquals"],
  ["(", "OpenPar"]
])

const endOfString: Token = { kind: "EndOfString", literal: "" }

const isWhitespace = (character: string): boolean =>
  character === " " || character === "\t" || character === "\r" || character === "\n"

const isSpecialSymbol = (character: string): boolean => character.length === 1 && "=!(),><".includes(character)

// Go's lexer reads bytes and treats a NUL byte exactly like the end of the input.
const isEnd = (input: string, position: number): boolean => position >= input.length || input[position] === "\0"

// Reads one identifier or keyword starting at `start`; returns it and the index just after it.
const scanIdentifier = (input: string, start: number): readonly [Token, number] => {
  let end = start
  while (!isEnd(input, end) && !isSpecialSymbol(input[end] ?? "") && !isWhitespace(input[end] ?? "")) end++
  const literal = input.slice(start, end)
  const kind: TokenKind = literal === "in" ? "In" : literal === "notin" ? "NotIn" : "Identifier"
  return [{ kind, literal }, end]
}

// Only "!=" and "==" are two-character operators; every other symbol stands alone.
const scanSymbol = (input: string, start: number): readonly [Token, number] => {
  const pair = input.slice(start, start + 2)
  const pairKind = symbolTokens.get(pair)
  if (pair.length === 2 && pairKind !== undefined) return [{ kind: pairKind, literal: pair }, start + 2]
  const single = input.slice(start, start + 1)
  // Every single special symbol is a token, so the fallback is never taken.
  return [{ kind: symbolTokens.get(single) ?? "EndOfString", literal: single }, start + 1]
}

// Splits the whole input into tokens up to and including the first end-of-string token.
const tokenize = (input: string): ReadonlyArray<Token> => {
  const tokens: Array<Token> = []
  let position = 0
  for (;;) {
    while (position < input.length && isWhitespace(input[position] ?? "")) position++
    if (isEnd(input, position)) {
      tokens.push(endOfString)
      return tokens
    }
    const [token, next] = isSpecialSymbol(input[position] ?? "")
      ? scanSymbol(input, position)
      : scanIdentifier(input, position)
    tokens.push(token)
    // Go's scanners stop on a NUL without un-reading it, so a NUL right after a token is skipped.
    position = input[next] === "\0" ? next + 1 : next
  }
}

// ---------------------------------------------------------------------------
// Parser (apimachinery `Parser`)
// ---------------------------------------------------------------------------

// In the Values context the keywords `in` and `notin` are ordinary identifiers, which is
// what lets `in in (in)` and `notin=in` parse.
type ParserContext = "KeyAndOperator" | "Values"

interface Cursor {
  readonly tokens: ReadonlyArray<Token>
  position: number
}

const lookahead = (cursor: Cursor, context: ParserContext): Token => {
  const token = cursor.tokens[cursor.position] ?? endOfString
  return context === "Values" && (token.kind === "In" || token.kind === "NotIn")
    ? { kind: "Identifier", literal: token.literal }
    : token
}

const consume = (cursor: Cursor, context: ParserContext): Token => {
  const token = lookahead(cursor, context)
  cursor.position++
  return token
}

const compareStrings = (left: string, right: string): number => (left < right ? -1 : left > right ? 1 : 0)

// Go keeps values in a sets.String and lists them sorted, so duplicates disappear.
const sortedUnique = (values: Iterable<string>): ReadonlyArray<string> => [...new Set(values)].toSorted(compareStrings)

// The validations of apimachinery's NewRequirement that parsed input can still fail.
const newRequirement = (key: string, operator: Operator, rawValues: Iterable<string>): ParseResult<Requirement> => {
  const values = sortedUnique(rawValues)
  const errors: Array<string> = []
  if (operator === "GreaterThan" || operator === "LessThan") {
    values.forEach((value, index) => {
      if (parseInt64(value) === undefined) {
        errors.push(invalidValue(`values[${index}]`, value, "for 'Gt', 'Lt' operators, the value must be an integer"))
      }
    })
  }
  values.forEach((value, index) => {
    const problems = validateLabelValue(value)
    if (problems.length > 0) errors.push(invalidValue(`values[${index}][${key}]`, value, problems.join("; ")))
  })
  // An aggregate of one error prints bare; several print as "[a, b]" with duplicates dropped.
  const distinct = [...new Set(errors)]
  if (distinct.length === 1) return err(distinct[0] ?? "")
  if (distinct.length > 1) return err(`[${distinct.join(", ")}]`)
  return ok({ key, operator, values })
}

interface KeyAndOperator {
  readonly key: string
  readonly operator: "Exists" | "DoesNotExist" | undefined
}

// Reads `[!] KEY` and infers Exists / DoesNotExist when no binary operator follows.
const parseKeyAndInferOperator = (cursor: Cursor): ParseResult<KeyAndOperator> => {
  let token = consume(cursor, "Values")
  const negated = token.kind === "DoesNotExist"
  if (negated) token = consume(cursor, "Values")
  if (token.kind !== "Identifier") return err(`found '${token.literal}', expected: identifier`)
  const problems = validateLabelKey(token.literal)
  if (problems.length > 0) return err(invalidValue("<nil>", token.literal, problems.join("; ")))
  if (negated) return ok({ key: token.literal, operator: "DoesNotExist" })
  const next = lookahead(cursor, "Values").kind
  const exists = next === "EndOfString" || next === "Comma"
  return ok({ key: token.literal, operator: exists ? "Exists" : undefined })
}

const binaryOperators: ReadonlyMap<TokenKind, Operator> = new Map<TokenKind, Operator>([
  ["In", "In"],
  ["Equals", "Equals"],
  ["DoubleEquals", "Equals"],
  ["GreaterThan", "GreaterThan"],
  ["LessThan", "LessThan"],
  ["NotIn", "NotIn"],
  ["NotEquals", "NotEquals"]
])

const parseOperator = (cursor: Cursor): ParseResult<Operator> => {
  const token = consume(cursor, "KeyAndOperator")
  const operator = binaryOperators.get(token.kind)
  return operator === undefined
    ? err(`found '${token.literal}', expected: in, notin, =, ==, !=, gt, lt`)
    : ok(operator)
}

// Reads the comma-separated, possibly empty, values after "(" up to (not including) ")".
const parseIdentifiersList = (cursor: Cursor): ParseResult<ReadonlyArray<string>> => {
  const values: Array<string> = []
  for (;;) {
    const token = consume(cursor, "Values")
    if (token.kind === "Identifier") {
      values.push(token.literal)
      const next = lookahead(cursor, "Values")
      if (next.kind === "ClosedPar") return ok(values)
      if (next.kind !== "Comma") return err(`found '${next.literal}', expected: ',' or ')'`)
    } else if (token.kind === "Comma") {
      // A comma with nothing before it, after it, or between two commas stands for "".
      if (values.length === 0) values.push("")
      const next = lookahead(cursor, "Values").kind
      if (next === "ClosedPar") {
        values.push("")
        return ok(values)
      }
      if (next === "Comma") values.push("")
    } else {
      return err(`found '${token.literal}', expected: ',', or identifier`)
    }
  }
}

// Reads "(v1,v2,…)"; "()" is the set holding only the empty value, as in apimachinery.
const parseValueSet = (cursor: Cursor): ParseResult<ReadonlyArray<string>> => {
  const open = consume(cursor, "Values")
  if (open.kind !== "OpenPar") return err(`found '${open.literal}' expected: '('`)
  const first = lookahead(cursor, "Values")
  if (first.kind === "ClosedPar") {
    consume(cursor, "Values")
    return ok([""])
  }
  if (first.kind !== "Identifier" && first.kind !== "Comma") {
    return err(`found '${first.literal}', expected: ',', ')' or identifier`)
  }
  const values = parseIdentifiersList(cursor)
  if (values._tag === "Err") return values
  // The list always stops at ")", so this only guards the invariant, quoting Go's literal.
  if (consume(cursor, "Values").kind !== "ClosedPar") return err(`found '${first.literal}', expected: ')'`)
  return values
}

// Reads the single value of =, ==, !=, > and <; a missing value is the empty string.
const parseExactValue = (cursor: Cursor): ParseResult<ReadonlyArray<string>> => {
  const next = lookahead(cursor, "Values").kind
  if (next === "EndOfString" || next === "Comma") return ok([""])
  const token = consume(cursor, "Values")
  return token.kind === "Identifier" ? ok([token.literal]) : err(`found '${token.literal}', expected: identifier`)
}

const parseRequirement = (cursor: Cursor): ParseResult<Requirement> => {
  const head = parseKeyAndInferOperator(cursor)
  if (head._tag === "Err") return head
  const { key, operator: unary } = head.value
  if (unary !== undefined) return ok({ key, operator: unary, values: [] })
  const operator = parseOperator(cursor)
  if (operator._tag === "Err") return operator
  const isSet = operator.value === "In" || operator.value === "NotIn"
  const values = isSet ? parseValueSet(cursor) : parseExactValue(cursor)
  if (values._tag === "Err") return values
  return newRequirement(key, operator.value, values.value)
}

const startsRequirement = (token: Token): boolean => token.kind === "Identifier" || token.kind === "DoesNotExist"

const parseRequirements = (cursor: Cursor): ParseResult<ReadonlyArray<Requirement>> => {
  const requirements: Array<Requirement> = []
  for (;;) {
    const next = lookahead(cursor, "Values")
    if (next.kind === "EndOfString") return ok(requirements)
    if (!startsRequirement(next)) return err(`found '${next.literal}', expected: !, identifier, or 'end of string'`)
    const requirement = parseRequirement(cursor)
    if (requirement._tag === "Err") return err(`unable to parse requirement: ${requirement.message}`)
    requirements.push(requirement.value)
    const separator = consume(cursor, "Values")
    if (separator.kind === "EndOfString") return ok(requirements)
    if (separator.kind !== "Comma") return err(`found '${separator.literal}', expected: ',' or 'end of string'`)
    const following = lookahead(cursor, "Values")
    if (!startsRequirement(following)) return err(`found '${following.literal}', expected: identifier after ','`)
  }
}

const sortByKey = (requirements: ReadonlyArray<Requirement>): ReadonlyArray<Requirement> =>
  requirements.toSorted((left, right) => compareStrings(left.key, right.key))

/**
 * Parses a label selector with apimachinery's `labels.Parse` grammar: comma-separated
 * requirements `key`, `!key`, `key=v`, `key==v`, `key!=v`, `key in (v,…)`,
 * `key notin (v,…)`, `key>n`, `key<n`. The empty (or all-blank) string selects
 * everything. Requirements come back sorted by key and set values sorted and
 * de-duplicated, as apimachinery does; `==` is folded into `Equals`. Errors carry
 * apimachinery's message text.
 */
export const parse = (input: string): ParseResult<LabelSelector> => {
  const requirements = parseRequirements({ tokens: tokenize(input), position: 0 })
  return requirements._tag === "Err" ? requirements : ok({ requirements: sortByKey(requirements.value) })
}

// ---------------------------------------------------------------------------
// Matching and printing
// ---------------------------------------------------------------------------

const compareIntegers = (
  operator: "GreaterThan" | "LessThan",
  label: string,
  values: ReadonlyArray<string>
): boolean => {
  const actual = parseInt64(label)
  const expected = values.length === 1 ? parseInt64(values[0] ?? "") : undefined
  if (actual === undefined || expected === undefined) return false
  return operator === "GreaterThan" ? actual > expected : actual < expected
}

const matchesRequirement = (
  requirement: Requirement,
  labels: Readonly<Record<string, string>> | undefined
): boolean => {
  // Own properties only: "constructor" is a valid label key and must not hit Object.prototype.
  const label = labels !== undefined && Object.hasOwn(labels, requirement.key) ? labels[requirement.key] : undefined
  switch (requirement.operator) {
    case "Equals":
    case "In":
      return label !== undefined && requirement.values.includes(label)
    case "NotEquals":
    case "NotIn":
      return label === undefined || !requirement.values.includes(label)
    case "Exists":
      return label !== undefined
    case "DoesNotExist":
      return label === undefined
    case "GreaterThan":
    case "LessThan":
      return label !== undefined && compareIntegers(requirement.operator, label, requirement.values)
  }
}

/**
 * Whether an object's labels satisfy every requirement (they are ANDed). Kubernetes
 * semantics: `!=` and `notin` also match objects that lack the key; `>`/`<` match only
 * when the label value parses as a 64-bit integer. Missing labels are the empty map.
 */
export const matches = (selector: LabelSelector, labels: Readonly<Record<string, string>> | undefined): boolean =>
  selector.requirements.every((requirement) => matchesRequirement(requirement, labels))

const operatorText: Readonly<Record<Operator, string>> = {
  Equals: "=",
  NotEquals: "!=",
  In: " in ",
  NotIn: " notin ",
  Exists: "",
  DoesNotExist: "",
  GreaterThan: ">",
  LessThan: "<"
}

const formatRequirement = (requirement: Requirement): string => {
  const { key, operator } = requirement
  if (operator === "Exists") return key
  if (operator === "DoesNotExist") return `!${key}`
  const values = sortedUnique(requirement.values).join(",")
  return operator === "In" || operator === "NotIn"
    ? `${key}${operatorText[operator]}(${values})`
    : `${key}${operatorText[operator]}${values}`
}

/**
 * Prints a selector the way apimachinery's `Selector.String()` does (`a=b,c in (d,e),!f`),
 * with requirements sorted by key and set values sorted and de-duplicated, so the text
 * is canonical and `parse(format(s))` gives back `s` for any parsed selector.
 */
export const format = (selector: LabelSelector): string =>
  sortByKey(selector.requirements).map(formatRequirement).join(",")

/** Equality requirements only (key → value) — lets a SQL store push `a=b` terms down to an index. */
export const equalityTerms = (selector: LabelSelector): ReadonlyArray<readonly [string, string]> =>
  selector.requirements.flatMap((requirement) =>
    requirement.operator === "Equals" ? [[requirement.key, requirement.values[0] ?? ""] as const] : []
  )
