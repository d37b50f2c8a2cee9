/**
 * The name grammars of Kubernetes' apimachinery (`k8s.io/apimachinery/pkg/util/validation`): object names are DNS-1123
 * subdomains, project names DNS-1123 labels, label and annotation keys qualified names. kubectl users already know these
 * rules and their messages, so nodus keeps them exactly. Each check returns the list of problems, empty when valid.
 */

export const dns1123LabelMaxLength = 63
export const dns1123SubdomainMaxLength = 253
export const qualifiedNameMaxLength = 63
export const labelValueMaxLength = 63

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/u
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/u
const qualifiedNamePart = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/u

const tooLong = (max: number): string => `must be no more than ${max} characters`

/** A DNS-1123 label: lower-case alphanumerics and '-', starting and ending alphanumeric, at most 63 characters. */
export const checkDns1123Label = (value: string): ReadonlyArray<string> => [
  ...(value.length > dns1123LabelMaxLength ? [tooLong(dns1123LabelMaxLength)] : []),
  ...(dns1123Label.test(value)
    ? []
    : ["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')"])
]

/** A DNS-1123 subdomain: dot-separated labels, at most 253 characters. */
export const checkDns1123Subdomain = (value: string): ReadonlyArray<string> => [
  ...(value.length > dns1123SubdomainMaxLength ? [tooLong(dns1123SubdomainMaxLength)] : []),
  ...(dns1123Subdomain.test(value)
    ? []
    : ["a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com')"])
]

/** A qualified name: an optional DNS subdomain prefix and '/', then a name of at most 63 characters. */
export const checkQualifiedName = (value: string): ReadonlyArray<string> => {
  const parts = value.split("/")
  if (parts.length > 2) {
    return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
  }
  const [prefix, name] = parts.length === 2 ? [parts[0] ?? "", parts[1] ?? ""] : [undefined, parts[0] ?? ""]
  const problems: Array<string> = []
  if (prefix !== undefined) {
    if (prefix.length === 0) problems.push("prefix part must be non-empty")
    else problems.push(...checkDns1123Subdomain(prefix).map((problem) => `prefix part ${problem}`))
  }
  if (name.length === 0) problems.push("name part must be non-empty")
  else if (name.length > qualifiedNameMaxLength) problems.push(`name part ${tooLong(qualifiedNameMaxLength)}`)
  if (name.length > 0 && !qualifiedNamePart.test(name)) {
    problems.push("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc')")
  }
  return problems
}

/** A label value: empty, or at most 63 characters of the qualified-name alphabet. */
export const checkLabelValue = (value: string): ReadonlyArray<string> => [
  ...(value.length > labelValueMaxLength ? [tooLong(labelValueMaxLength)] : []),
  ...(value === "" || qualifiedNamePart.test(value)
    ? []
    : ["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or '12345')"])
]
