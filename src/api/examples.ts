// In charge of /api/v1/examples: where the bundled example APIs stand, loading them (each key's
// secret returned once) and unloading them. The work is examples/load.ts's, as for
// QUERYAPIGATE_LOAD_EXAMPLES and `queryapigate examples`.
import { GatewayError } from '../contract/errors.js';
import { jsonAnswer } from '../contract/exchange.js';
import { EXAMPLE_CONNECTION } from '../examples/catalog.js';
import { examplesState, loadExamples, unloadExamples } from '../examples/load.js';
import type { ApiRouter } from './routes.js';

const status = (s: { loaded: boolean; partial: boolean }) => (s.loaded ? 'loaded' : s.partial ? 'partial' : 'not_loaded');

export function exampleRoutes(r: ApiRouter): void {
  r.add('GET', '/api/v1/examples', async (ctx) => {
    const { conflicts: _, ...state } = await examplesState(ctx.store);
    return jsonAnswer(200, state);
  });

  r.add('POST', '/api/v1/examples', async (ctx) => {
    const before = await examplesState(ctx.store);
    // A load never overwrites: an object of the user's own under an example's name is refused, not skipped quietly.
    if (before.conflicts.length) {
      throw new GatewayError('examples_conflict', `These are yours and have the names of examples, so nothing was loaded: ${before.conflicts.join(', ')}`);
    }
    const loaded = await loadExamples(ctx.store, ctx.config.home);
    const keySecrets = Object.fromEntries(loaded.createdKeys.map((k) => [k.name, k.secret]));
    return jsonAnswer(200, { added: loaded.added, key_secrets: keySecrets, status: status(await examplesState(ctx.store)) }, ['Cache-Control', 'no-store']);
  });

  r.add(
    'DELETE',
    '/api/v1/examples',
    async (ctx) => {
      const { removed, keysStillGranted } = await unloadExamples(ctx.store);
      return jsonAnswer(200, { removed, keys_still_granted: keysStillGranted, status: status(await examplesState(ctx.store)) });
      // The example connection may be gone: its pools go with it.
    },
    () => ({ kind: 'connection', name: EXAMPLE_CONNECTION }),
  );
}
