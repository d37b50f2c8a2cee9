/**
 * The name grammars of Kubernetes' apimachinery (`k8s.io/apimachinery/pkg/util/validation`), with its exact messages:
 * object names are DNS-1123 subdomains, project names DNS-1123 labels, label and annotation keys qualified names.
 * kubectl users and their scripts know these rules and messages, so nodus keeps them. Each check returns the list of
 * problems, empty when the value is valid. Lengths are UTF-8 bytes, as Go measures them.
 */

export const dns1123LabelMaxLength = 63
export const dns1123SubdomainMaxLength = 253
export const qualifiedNameMaxLength = 63
export const labelValueMaxLength = 63

const qualifiedNameFormat = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
const qualifiedNamePattern = new RegExp(`^${qualifiedNameFormat}$`, "u")
const qualifiedNameMessage =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
const labelValueFormat = `(${qualifiedNameFormat})?`
const labelValuePattern = new RegExp(`^${labelValueFormat}$`, "u")
const labelValueMessage =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
const dns1123LabelFormat = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
const dns1123LabelPattern = new RegExp(`^${dns1123LabelFormat}$`, "u")
const dns1123LabelMessage =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
/** A DNS-1123 subdomain without anchors, for composing references such as <name>@<version>. */
export const dns1123SubdomainFormat = `${dns1123LabelFormat}(\\.${dns1123LabelFormat})*`
const dns1123SubdomainPattern = new RegExp(`^${dns1123SubdomainFormat}$`, "u")
const dns1123SubdomainMessage =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"

/**
 * The grammars as JSON Schema, for OpenAPI and generated test data. The patterns are ASCII, so maxLength (characters)
 * equals the byte bound; a qualified name's 63-byte name part is not expressed, so its fragment is looser.
 */
export const jsonSchemas = {
  dns1123Label: { pattern: `^${dns1123LabelFormat}$`, maxLength: dns1123LabelMaxLength },
  dns1123Subdomain: { pattern: `^${dns1123SubdomainFormat}$`, maxLength: dns1123SubdomainMaxLength },
  qualifiedName: {
    pattern: `^(${dns1123SubdomainFormat}/)?${qualifiedNameFormat}$`,
    maxLength: dns1123SubdomainMaxLength + 1 + qualifiedNameMaxLength
  },
  labelValue: { pattern: `^${labelValueFormat}$`, maxLength: labelValueMaxLength }
} as const

/**
 * Go measures string lengths in UTF-8 bytes, and the messages say "bytes". Counted from the UTF-16 code units without
 * encoding (every name, label and annotation of every write is measured): a surrogate pair is 4 bytes, a lone
 * surrogate 3 (the U+FFFD it is encoded as).
 */
export const utf8Length = (text: string): number => {
  let bytes = text.length
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index)
    if (unit < 0x80) continue
    if (unit < 0x800) bytes += 1
    else if (
      unit >= 0xd800 && unit <= 0xdbff && index + 1 < text.length && (text.charCodeAt(index + 1) & 0xfc00) === 0xdc00
    ) {
      bytes += 2 // two units, four bytes
      index++
    } else bytes += 2
  }
  return bytes
}

const maxLengthError = (limit: number): string => `must be no more than ${limit} bytes`

// The double space in "'MyName',  or" is apimachinery's, kept so that messages compare equal.
const regexError = (message: string, format: string, examples: ReadonlyArray<string>): string =>
  `${message} (e.g. ${
    examples.map((example) => `'${example}', `).join(" or ")
  }regex used for validation is '${format}')`

/** A DNS-1123 label (project names): lower-case alphanumerics and '-', at most 63 bytes. */
export const checkDns1123Label = (value: string): ReadonlyArray<string> => [
  ...(utf8Length(value) > dns1123LabelMaxLength ? [maxLengthError(dns1123LabelMaxLength)] : []),
  ...(dns1123LabelPattern.test(value)
    ? []
    : [regexError(dns1123LabelMessage, dns1123LabelFormat, ["my-name", "123-abc"])])
]

/** A DNS-1123 subdomain (object names): dot-separated labels, at most 253 bytes. */
export const checkDns1123Subdomain = (value: string): ReadonlyArray<string> => [
  ...(utf8Length(value) > dns1123SubdomainMaxLength ? [maxLengthError(dns1123SubdomainMaxLength)] : []),
  ...(dns1123SubdomainPattern.test(value)
    ? []
    : [regexError(dns1123SubdomainMessage, dns1123SubdomainFormat, ["example.com"])])
]

/**
 * A qualified name (label and annotation keys, finalizers), as apimachinery's `IsQualifiedName` words it: an optional
 * DNS-1123 subdomain prefix and "/", then a name of at most 63 bytes of alphanumerics, '-', '_' and '.'.
 */
export const checkQualifiedName = (value: string): ReadonlyArray<string> => {
  const parts = value.split("/")
  if (parts.length > 2) {
    return [
      `a valid label key ${
        regexError(qualifiedNameMessage, qualifiedNameFormat, ["MyName", "my.name", "123-abc"])
      } with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`
    ]
  }
  const [first = "", second] = parts
  const problems: Array<string> = []
  if (second !== undefined) {
    if (first.length === 0) problems.push("prefix part must be non-empty")
    else problems.push(...checkDns1123Subdomain(first).map((problem) => `prefix part ${problem}`))
  }
  const name = second ?? first
  if (name.length === 0) problems.push("name part must be non-empty")
  else if (utf8Length(name) > qualifiedNameMaxLength) {
    problems.push(`name part ${maxLengthError(qualifiedNameMaxLength)}`)
  }
  if (!qualifiedNamePattern.test(name)) {
    problems.push(
      `name part ${regexError(qualifiedNameMessage, qualifiedNameFormat, ["MyName", "my.name", "123-abc"])}`
    )
  }
  return problems
}

/** A label value: empty, or at most 63 bytes of alphanumerics, '-', '_' and '.', starting and ending alphanumeric. */
export const checkLabelValue = (value: string): ReadonlyArray<string> => [
  ...(utf8Length(value) > labelValueMaxLength ? [maxLengthError(labelValueMaxLength)] : []),
  ...(labelValuePattern.test(value)
    ? []
    : [regexError(labelValueMessage, labelValueFormat, ["MyValue", "my_value", "12345"])])
]
