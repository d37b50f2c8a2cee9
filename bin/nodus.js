#!/usr/bin/env node
// The `nodus` command. Node 24 (the project's `node` devDependency) runs the TypeScript sources directly.

// An older node (a system one, by `node bin/nodus.js`) cannot load them, nor link this file's own imports: say so
// first, in syntax any node parses, with no static import (which would fail before this line ran).
const nodeMajor = Number(process.versions.node.split(".")[0])
if (nodeMajor < 24) {
  process.stderr.write(
    "nodus needs Node 24 (this is Node " + process.versions.node +
      "): use npm start or npx nodus, which run the project's own Node 24\n"
  )
  process.exit(1)
}

// V8 settings of a server on the embedded store (issue 16: idle RSS ≤ 250 MB), read by V8 only when it starts: `nodus
// serve` replaces itself (execve: the same process, arguments and environment) with a node given them, unless they
// are there already. Decided here, before any TypeScript is loaded, so the process that is replaced strips none.
// Measured on the idle embedded default:
// - --max-semi-space-size=8 (MB): V8 sizes the young generation from the machine's memory (134 MB here, touched whole
//   as it cycles; 17 MB with this). The server's CPU per API request did not differ between 8, 16 and V8's 64 beyond
//   this machine's noise (±15 %).
// - --liftoff-only: PGlite's WebAssembly stays in V8's baseline compiler. Optimising its hot functions held 50-60 MB
//   at idle (and 700-800 MB for a moment at start); PGlite's queries take 5-10 % more CPU.
// A server on PostgreSQL (--database-url, DATABASE_URL) keeps V8's defaults: it runs no WebAssembly, and its memory is
// not held to the goal.
const embeddedFlags = ["--max-semi-space-size=8", "--liftoff-only"]
const [command, ...args] = process.argv.slice(2)
const onPostgres = args.some((arg) => arg === "--database-url" || arg.startsWith("--database-url=")) ||
  (process.env.DATABASE_URL ?? "") !== ""
if (
  command === "serve" && !onPostgres && typeof process.execve === "function" &&
  !embeddedFlags.every((flag) => process.execArgv.includes(flag))
) {
  process.execve(
    process.execPath,
    [process.execPath, ...embeddedFlags, ...process.execArgv, ...process.argv.slice(1)],
    process.env
  )
}

// The TypeScript each module is stripped to and V8's compiled code, kept on disk across runs (Node's compile cache,
// in os.tmpdir()/node-compile-cache, or NODE_COMPILE_CACHE): a start reads them back instead of transpiling and
// compiling again (measured: 0.5 s of CPU less for `nodus serve`).
const { enableCompileCache } = await import("node:module")
enableCompileCache()
await import("../src/cli/main.ts")
