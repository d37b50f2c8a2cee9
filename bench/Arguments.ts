/** Command-line flags of the bench scripts: `--name value`, or `fallback` when the flag (or its value) is absent. */
export const argument = (name: string, fallback: string, argv: ReadonlyArray<string> = process.argv): string => {
  const index = argv.indexOf(`--${name}`)
  return index === -1 ? fallback : argv[index + 1] ?? fallback
}
