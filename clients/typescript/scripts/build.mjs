// `npm run build`: copies the repository's generated protocol declarations
// (docs/schema/protocol.d.ts, printed by `magi-code schema --typescript`) into src/, compiles
// src/ with the pinned compiler, and puts the declarations next to the output so dist/ stands
// alone. The copy is never edited: the repository's file is the one source.
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const schema = join(root, "..", "..", "docs", "schema", "protocol.d.ts");
copyFileSync(schema, join(root, "src", "protocol.d.ts"));
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
