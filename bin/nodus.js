#!/usr/bin/env node
// The `nodus` command. Node 24 (the project's `node` devDependency) runs the TypeScript sources directly.
import { enableCompileCache } from "node:module"

// V8 settings of the long-running server (issue 16: idle RSS ≤ 250 MB on the embedded default), read by V8 only when
// it starts: `nodus serve` replaces itself (execve: same process id, arguments and environment) with a node given
// them, unless they are there already. Measured on the idle embedded default:
// - --max-semi-space-size=16 (MB): the young generation V8 otherwise sizes from the machine's memory (2 × 64 MB here,
//   touched whole as it cycles: about 100 MB of RSS); 16 MB semi-spaces are V8's long-standing default;
// - --liftoff-only: PGlite's WebAssembly stays in V8's baseline compiler. Optimising its hot functions held 50-60 MB
//   of RSS at idle (and 700-800 MB for a moment at start); its queries take 5-10 % more CPU.
const serveFlags = ["--max-semi-space-size=16", "--liftoff-only"]
if (process.argv[2] === "serve" && typeof process.execve === "function" && !serveFlags.every((flag) => process.execArgv.includes(flag))) {
  process.execve(process.execPath, [process.execPath, ...serveFlags, ...process.execArgv, ...process.argv.slice(1)], process.env)
}

// The TypeScript each module is stripped to and V8's compiled code, kept on disk across runs (Node's compile cache,
// in os.tmpdir()/node-compile-cache, or NODE_COMPILE_CACHE): a start reads them back instead of transpiling and
// compiling again (measured: 0.5 s of CPU and 25 MB of RSS less for `nodus serve`).
enableCompileCache()
await import("../src/cli/main.ts")
