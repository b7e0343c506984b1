// Tests for the process's channels (contract/messages.ts): a message posted with postOnce (the name opened
// for the post and closed at once) reaches every instance listening on its name, in the order one thread
// posted them; across threads, every poster's messages reach the one listener.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { channel, postOnce } from '../../src/contract/messages.js';

const settle = () => new Promise((r) => setTimeout(r, 50));

test('postOnce: every listener hears each message, in the order this thread posted them', async (t) => {
  const scope = `channels-${randomUUID()}`;
  const heard: unknown[][] = [[], []];
  const listeners = heard.map((into) => {
    const c = channel('snapshots', scope);
    c.onmessage = (e: MessageEvent) => into.push(e.data);
    return c;
  });
  t.after(() => {
    for (const c of listeners) c.close();
  });
  for (let i = 0; i < 20; i++) postOnce('snapshots', scope, i);
  for (let i = 0; i < 40 && heard[1].length < 20; i++) await settle();
  const inOrder = Array.from({ length: 20 }, (_, i) => i);
  assert.deepEqual(heard, [inOrder, inOrder]);
});

test("postOnce: messages from several threads all reach the listener, each thread's in its order", async (t) => {
  const scope = `channels-${randomUUID()}`;
  const heard: Array<{ from: number; i: number }> = [];
  const listener = channel('snapshots', scope);
  listener.onmessage = (e: MessageEvent) => heard.push(e.data as { from: number; i: number });
  t.after(() => listener.close());
  const url = new URL('../../src/contract/messages.js', import.meta.url).href;
  const posters = [1, 2, 3].map(
    (from) =>
      new Worker(
        `import(${JSON.stringify(url)}).then(({ postOnce }) => { for (let i = 0; i < 50; i++) postOnce('snapshots', ${JSON.stringify(scope)}, { from: ${from}, i }); });`,
        { eval: true },
      ),
  );
  await Promise.all(posters.map((w) => new Promise((r) => w.once('exit', r))));
  for (let i = 0; i < 40 && heard.length < 150; i++) await settle();
  assert.equal(heard.length, 150);
  for (const from of [1, 2, 3]) {
    assert.deepEqual(
      heard.filter((m) => m.from === from).map((m) => m.i),
      Array.from({ length: 50 }, (_, i) => i),
    );
  }
});
