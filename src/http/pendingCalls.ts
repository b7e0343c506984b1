// In charge of the calls waiting for their answers (http/callBatches.ts), by id, without a Map. A Map whose keys
// come and go at the call rate rebuilds its table every few dozen calls, and each old table links to the next (for
// iterators): a table the scavenger promoted kept its successor alive, and that one the next. The pooled acceptor
// then promoted about 1.5 MB a scavenge, its scavenges took 2-9 ms instead of 0.25, and it made a full collection
// about every second (a probe of the hand-off alone: 44 full collections in a run against 4 with slots).
// Here an id names its slot (generation × capacity + slot, slots reused from a free list), so an answer for a call
// settled already, whose slot another call has since, carries an id that is not that call's and is ignored.

export class PendingCalls<T> {
  readonly #values: Array<T | undefined> = [];
  readonly #ids: number[] = [];
  readonly #free: number[] = [];
  readonly #capacity: number;
  #generation = 0;

  /** `capacity`: the most values kept at once (the caller bounds them: running + queued calls). */
  constructor(capacity: number) {
    this.#capacity = Math.max(1, capacity);
  }

  get size(): number {
    return this.#values.length - this.#free.length;
  }

  /** Keeps `value` until taken; returns its id. */
  add(value: T): number {
    let slot = this.#free.pop();
    if (slot === undefined) {
      if (this.#values.length >= this.#capacity) throw new Error(`more than ${this.#capacity} calls pending`);
      slot = this.#values.length;
      this.#values.push(undefined);
      this.#ids.push(-1);
    }
    const id = this.#generation++ * this.#capacity + slot;
    this.#values[slot] = value;
    this.#ids[slot] = id;
    return id;
  }

  get(id: number): T | undefined {
    const slot = id % this.#capacity;
    return this.#ids[slot] === id ? this.#values[slot] : undefined;
  }

  /** Removes and returns the value of `id`; undefined when it was taken already. */
  take(id: number): T | undefined {
    const slot = id % this.#capacity;
    if (this.#ids[slot] !== id) return undefined;
    const value = this.#values[slot];
    this.#values[slot] = undefined;
    this.#ids[slot] = -1;
    this.#free.push(slot);
    return value;
  }

  /** The ids of every value kept (a sweep: an executor that died fails its calls). */
  ids(): number[] {
    return this.#ids.filter((id) => id !== -1);
  }
}
