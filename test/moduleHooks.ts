// NOT A PRODUCT: module hooks for test/unit/moduleGraph.test.ts: appends every module URL the process
// resolves to the file it is given (hooks run on their own thread, so a file is how they report).
import { appendFileSync } from 'node:fs';

let file = '';

export function initialize(data: { file: string }): void {
  file = data.file;
}

export async function resolve(
  specifier: string,
  context: unknown,
  next: (specifier: string, context: unknown) => Promise<{ url: string }>,
): Promise<{ url: string }> {
  const resolved = await next(specifier, context);
  appendFileSync(file, `${resolved.url}\n`);
  return resolved;
}
