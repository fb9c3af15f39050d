#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx's loader, so `npx talon` works
// straight after `npm install` with no build step.
import { register } from "tsx/esm/api"
register()
await import("../src/cli/main.ts")
