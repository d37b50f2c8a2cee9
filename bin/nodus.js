#!/usr/bin/env node
// The `nodus` command. Node 24 (the project's `node` devDependency) runs the TypeScript sources directly.
import "../src/cli/main.ts"
