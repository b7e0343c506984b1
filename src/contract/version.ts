// In charge of the gateway's version, as package.json has it (what /health, /openapi.json and
// `queryapigate --version` report): three folders up from the built file, dist/src/contract/.
import { readFileSync } from 'node:fs';

let version: string | undefined;

export function packageVersion(): string {
  version ??= JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')).version as string;
  return version;
}
