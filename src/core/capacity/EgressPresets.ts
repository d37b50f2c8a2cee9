/**
 * Egress presets (spec: Network.egress.presets, "curated host-list names"): each name stands for the hosts a common
 * tool reaches, in the allow list's own forms (exact names and `*.suffix` patterns). nodus's own lists
 * (docs/live.md, "Network"); a name not here is refused when the program starts.
 */
export const egressPresets: Readonly<Record<string, ReadonlyArray<string>>> = {
  pypi: ["pypi.org", "files.pythonhosted.org"],
  npm: ["registry.npmjs.org"],
  github: [
    "github.com",
    "api.github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
    "raw.githubusercontent.com"
  ],
  huggingface: ["huggingface.co", "*.huggingface.co", "*.hf.co"],
  debian: ["deb.debian.org", "security.debian.org"],
  conda: ["conda.anaconda.org", "repo.anaconda.com"]
}
