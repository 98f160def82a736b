// `npm run build` (and `npm pack`, through `prepack`): compiles src/ with the pinned compiler
// into dist/ and puts the protocol declarations next to the output, so dist/ stands alone.
// src/protocol.d.ts is the repository's generated docs/schema/protocol.d.ts (printed by
// `magi-code schema --typescript`), committed here so the package builds from this folder
// alone; inside the repository the build refreshes it from there first (a repository test
// keeps the two equal). It is never edited by hand.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const schema = join(root, "src", "protocol.d.ts");
const generated = join(root, "..", "..", "docs", "schema", "protocol.d.ts");
if (existsSync(generated)) copyFileSync(generated, schema);
rmSync(join(root, "dist"), { recursive: true, force: true });
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
// The package, then the compile-time checks of its typed surface (types-test/, not emitted).
for (const project of ["tsconfig.json", "tsconfig.types.json"]) {
  const compiled = spawnSync(process.execPath, [tsc, "-p", join(root, project)], {
    stdio: "inherit",
  });
  if (compiled.status !== 0) process.exit(compiled.status ?? 1);
}
mkdirSync(join(root, "dist"), { recursive: true });
copyFileSync(schema, join(root, "dist", "protocol.d.ts"));
