// In charge of the time limits the gateway keeps itself on statements in flight (a backstop past the server's own
// limit, or the whole limit where the server keeps none): each a deadline in a reused slot, checked by one timer
// every CHECK_MS while any is set, not a setTimeout armed and cleared for every call. A timer a call had cost about
// 0.7 µs of CPU (setTimeout, clearTimeout and their Timeout object), a slot about 0.1. A deadline fires up to
// CHECK_MS late, a tenth of a second on limits of a second and more past the server's.

/** How often deadlines are checked: how late one may fire. */
export const CHECK_MS = 100;
/** Slots a token can name (far more statements than a thread has in flight); the rest of a token is its slot's use. */
const SLOTS = 1 << 20;

/** The deadlines of one thread's statements (each thread has its own module, so its own set). */
class Deadlines {
  /** By slot: when its call is due (performance.now()), or 0 when the slot is free. */
  #at: number[] = [];
  #fire: ((() => void) | null)[] = [];
  /** By slot: how many times it was set, so a token of an earlier use (cleared twice, or after firing) clears nothing. */
  #uses: number[] = [];
  #free: number[] = [];
  #set = 0;
  #timer: NodeJS.Timeout | null = null;

  /** Calls `fire` once `ms` have passed, unless cleared first; returns the token to clear it with. */
  set(ms: number, fire: () => void): number {
    const slot = this.#free.pop() ?? this.#at.length;
    const use = (this.#uses[slot] ?? 0) + 1;
    this.#uses[slot] = use;
    this.#at[slot] = performance.now() + ms;
    this.#fire[slot] = fire;
    this.#set++;
    if (this.#timer === null) {
      this.#timer = setInterval(() => this.#check(), CHECK_MS);
      this.#timer.unref(); // a deadline never keeps the process alive
    }
    return use * SLOTS + slot;
  }

  /** Clears a deadline not yet fired; a token already cleared or fired, or a negative one (none set), is ignored. */
  clear(token: number): void {
    if (token < 0) return;
    const slot = token % SLOTS;
    if (this.#at[slot] === 0 || this.#uses[slot] !== (token - slot) / SLOTS) return;
    this.#at[slot] = 0;
    this.#fire[slot] = null;
    this.#free.push(slot);
    this.#set--;
  }

  #check(): void {
    if (this.#set === 0) {
      // Idle a whole interval: stopped, and started again by the next deadline (not at every call when they come one at a time).
      clearInterval(this.#timer!);
      this.#timer = null;
      return;
    }
    const now = performance.now();
    for (let slot = 0; slot < this.#at.length; slot++) {
      const at = this.#at[slot];
      if (at === 0 || at > now) continue;
      const fire = this.#fire[slot]!;
      this.clear(this.#uses[slot] * SLOTS + slot);
      fire();
    }
  }
}

export const deadlines = new Deadlines();
