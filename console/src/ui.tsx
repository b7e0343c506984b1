// In charge of the few pieces every screen shares: a labelled field with its error beside it, a
// form-level error, a hook that loads data, and small formatting helpers.
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';

let ids = 0;
/** A stable id for label/input and error pairs. */
export function useId(prefix: string): string {
  const [id] = useState(() => `${prefix}-${++ids}`);
  return id;
}

interface FieldProps {
  label: string;
  error?: string;
  hint?: string;
  children: (id: string, describedBy: string | undefined) => ComponentChildren;
}

/** A label, the control (given its id and aria-describedby), and its error in words right next to it. */
export function Field({ label, error, hint, children }: FieldProps) {
  const id = useId('f');
  const described = [error ? `${id}-err` : '', hint ? `${id}-hint` : ''].filter(Boolean).join(' ') || undefined;
  return (
    <div class={`field${error ? ' invalid' : ''}`}>
      <label for={id}>{label}</label>
      {children(id, described)}
      {hint && (
        <small id={`${id}-hint`} class="hint">
          {hint}
        </small>
      )}
      {error && (
        <span id={`${id}-err`} class="error" role="alert">
          {error}
        </span>
      )}
    </div>
  );
}

interface TextProps {
  label: string;
  value: string;
  onInput: (v: string) => void;
  error?: string;
  hint?: string;
  type?: 'text' | 'password' | 'date';
  placeholder?: string;
  name?: string;
  autocomplete?: string;
}

export function TextField({ label, value, onInput, error, hint, type = 'text', placeholder, name, autocomplete = 'off' }: TextProps) {
  return (
    <Field label={label} error={error} hint={hint}>
      {(id, described) => (
        <input
          id={id}
          name={name}
          type={type as 'text'}
          value={value}
          placeholder={placeholder}
          autocomplete={autocomplete}
          spellcheck={false}
          aria-invalid={error ? 'true' : undefined}
          aria-describedby={described}
          onInput={(e) => onInput((e.target as HTMLInputElement).value)}
        />
      )}
    </Field>
  );
}

export function FormError({ error }: { error?: string }) {
  return error ? (
    <p class="error form-error" role="alert">
      {error}
    </p>
  ) : null;
}

/** Loads `fn` now and whenever `reload` is called; the error is kept as words. */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[] = []) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState('');
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    fn().then(
      (d) => {
        if (live) {
          setData(d);
          setError('');
        }
      },
      (e: Error) => live && setError(e.message),
    );
    return () => {
      live = false;
    };
  }, [tick, ...deps]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, reload, setData };
}

export const list = (v: string[] | '*' | null | undefined): string => (v === '*' ? '*' : (v ?? []).join(', '));
export const splitList = (s: string): string[] =>
  s
    .split(/[,\n]/)
    .map((x) => x.trim())
    .filter(Boolean);

export function Page({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section aria-labelledby="page-title">
      <header class="page-head">
        <h1 id="page-title" tabIndex={-1}>
          {title}
        </h1>
        <div class="actions">{actions}</div>
      </header>
      {children}
    </section>
  );
}
