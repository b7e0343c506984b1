// In charge of the package's version, as package.json has it: three folders up from this file, both
// from dist/src/cli/ (the built command) and from src/cli/ (the sources).
import { readFileSync } from 'node:fs';

export function packageVersion(): string {
  return JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')).version;
}
